/**
 * `npm run --silent openapi > openapi.json` (without --silent, npm's own lines come first): the HTTP API's OpenAPI document without a running API (src/http/openapi.ts),
 * for the built-in agents (a deployment's own agents add their shorthands and webhooks: GET /openapi.json).
 */
import { AgentCatalog } from '../src/core/agent.js';
import { supportAgent } from '../src/agents/support/index.js';
import { openApiDocument } from '../src/http/openapi.js';

const agents = new AgentCatalog([supportAgent({ baseUrl: 'http://127.0.0.1' })]);
process.stdout.write(`${JSON.stringify(openApiDocument(agents), null, 2)}\n`);
