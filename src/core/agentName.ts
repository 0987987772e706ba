/**
 * An agent's name: it goes into run ids, run hashes and metric labels, so it is short, lowercase and holds no separator
 * of keys. A module of its own because settings check names against it (src/config/config.ts), and every process
 * reads its settings: the command line among them, which loads no agent and needs nothing else of src/core/agent.ts
 * (its tokenizer, 0.3 s of start).
 */
export const AGENT_NAME_FORMAT = /^[a-z][a-z0-9_-]{0,62}$/;
