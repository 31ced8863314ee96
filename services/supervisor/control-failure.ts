import { failureReply } from "../../shared/bus/serve.js";
import { storageFull } from "../../shared/bus/storage-full.js";
import { AgentError, isAgentError } from "../../shared/runtime/errors.js";

/**
 * The reply to an operator's control the supervisor could not finish: a refusal it decided goes as
 * it is; anything else (JetStream out of its reach mid-way, a stream's leader election, a fault of
 * its own) may have left the request carried out or not, which the bare cause ("timeout") did
 * not tell. agentctl asks again all but a tree's resume (see ClusterClient), whose operator reads
 * the runs before resuming them again.
 */
export function controlFailure(err: unknown): ReturnType<typeof failureReply> {
  if (isAgentError(err)) return failureReply(err);
  // A write refused for a full store (one not made through withBusRetry): nothing was written.
  const full = storageFull("the supervisor could not record this request", err);
  if (full) return failureReply(full);
  const cause = err instanceof Error ? err.message : String(err);
  return failureReply(
    new AgentError(
      "INTERNAL",
      `the supervisor could not finish this request (${cause}): it may or may not have been carried out; read the run's status (agentctl status) before asking again`,
      { cause: err },
    ),
  );
}
