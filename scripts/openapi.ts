/** `npm run openapi > openapi.json`: the HTTP API's OpenAPI document without a running API (src/http/openapi.ts). */
import { openApiDocument } from '../src/http/openapi.js';

process.stdout.write(`${JSON.stringify(openApiDocument(), null, 2)}\n`);
