import type { Msg } from "@nats-io/transport-node";
import { parseBody } from "../../dist/shared/bus/log-codec.js";
import { PART_HEADER } from "../../dist/shared/bus/wal-parts.js";

/**
 * What the bench reads off one message of the run log (`agents.log.<runId>.<kind>`): its run and
 * the types of the records it holds; none for a message of events only, or for a part of a split
 * message (not a body on its own).
 */
export function logMessage(msg: Msg): { runId: string; types: string[] } {
  const runId = msg.subject.split(".")[2] ?? "";
  if (msg.headers?.get(PART_HEADER)) return { runId, types: [] };
  // Unvalidated, as before: the bench's own CPU shares the host with the cluster it times.
  const entry = parseBody(msg.data) as { records?: { type: string }[] };
  return { runId, types: (entry.records ?? []).map((r) => r.type) };
}
