/**
 * The built-in agents module (the default AGENTS_MODULE): the support agent with its own
 * settings (its vendors' URLs and credentials, src/agents/support/settings.ts), validated at
 * boot. A team's own module has the same shape (docs/writing-an-agent.md, examples/).
 */
import { defineAgentsModule } from '../config/agentsModule.js';
import { supportAgent } from './support/index.js';
import { supportSettings } from './support/settings.js';
import { supportServices } from './support/vendors/index.js';

export default defineAgentsModule({
  settings: supportSettings,
  agents: ({ settings }) => [supportAgent(supportServices(settings))],
});
