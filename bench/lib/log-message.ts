import type { Msg } from "@nats-io/transport-node";
import { PART_HEADER } from "../../dist/shared/bus/wal-parts.js";

const decoder = new TextDecoder();

/**
 * What the bench reads off one message of the run log (`agents.log.<runId>.<kind>`): its run and
 * the types of the records it holds; none for a message of events only, or for a part of a split
 * message (not JSON on its own).
 */
export function logMessage(msg: Msg): { runId: string; types: string[] } {
  const runId = msg.subject.split(".")[2] ?? "";
  if (msg.headers?.get(PART_HEADER)) return { runId, types: [] };
  const entry = JSON.parse(decoder.decode(msg.data)) as { records?: { type: string }[] };
  return { runId, types: (entry.records ?? []).map((r) => r.type) };
}
