/**
 * The agent worker actor: `npm run actor -- agent`. Configuration comes from the environment
 * (see docs/configuration.md); SIGTERM/SIGINT drain it: no new jobs, current steps finish, jobs go
 * back to the queue at once for another worker.
 */
import { startAgentWorker } from "./start.js";

await startAgentWorker();
