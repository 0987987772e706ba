/**
 * The built-in agents module (the default AGENTS_MODULE): a function of the
 * deployment's configuration, so each tool gets its service's settings.
 * A team's own module has the same shape (see examples/ and the README).
 */
import type { AgentsModuleContext } from '../config/agentsModule.js';
import { supportAgent } from './support/index.js';
import { supportServices } from './support/vendors/index.js';

export default function agents({ config }: AgentsModuleContext) {
  return [supportAgent(supportServices(config))];
}
