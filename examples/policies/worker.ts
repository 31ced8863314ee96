/**
 * An agent worker with convergence policies registered in code: the entry an operator builds
 * into their own image instead of `services/agent/main.ts`. The same configuration applies
 * (docs/configuration.md); AGENT_POLICY_MODULES may add more.
 */
import { startAgentWorker } from "../../services/agent/start.js";
import { policies } from "./policies.js";

await startAgentWorker({ policies });
