import type { Msg } from "@nats-io/transport-node";
import { PART_HEADER } from "../../dist/shared/bus/wal-parts.js";

const decoder = new TextDecoder();

/**
 * What the bench reads off one WAL message: its run (the subject's last token) and the types of the
 * records it holds, one for a single record, several for a transition's batch, none for a part of
 * a split record (not JSON on its own).
 */
export function walMessage(msg: Msg): { runId: string; types: string[] } {
  const runId = msg.subject.split(".").at(-1) ?? "";
  if (msg.headers?.get(PART_HEADER)) return { runId, types: [] };
  const parsed = JSON.parse(decoder.decode(msg.data)) as { type: string } | { type: string }[];
  return { runId, types: Array.isArray(parsed) ? parsed.map((r) => r.type) : [parsed.type] };
}
