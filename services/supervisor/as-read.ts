import type { RunStatus } from "../../shared/contracts/run-status.js";
import { AgentError } from "../../shared/runtime/errors.js";

/**
 * Refuses a request that names the revision of the run's status its client read (an approval, a
 * resume) once the status has moved on: RUN_CHANGED, saying what the run is now. `doing` ends the
 * message ("deciding", "resuming it"). A request naming no revision is taken as it comes.
 */
export function checkAsRead(
  read: { status: RunStatus; revision: number },
  revision: number | undefined,
  doing: string,
): void {
  if (revision === undefined || revision === read.revision) return;
  throw new AgentError(
    "RUN_CHANGED",
    `run '${read.status.runId}' has changed since its status was read (revision ${revision}, now ${read.revision}: it is ${read.status.status}): read it again before ${doing}`,
  );
}
