import type { Draft } from "./draft.js";

/**
 * Parks the run for a human: `approval.requested` (with what the reviewer needs in `data`), and an
 * approval effect the worker records and lets go of, so no worker is held while the human decides.
 */
export function requestApproval(
  d: Draft,
  on: "commit" | "failure",
  reason: string,
  data: Record<string, unknown> = {},
): void {
  const s = d.state;
  if (on === "commit") s.status = "awaiting_approval";
  d.audit("approval.requested", "started", { reason, data: { on, ...data } });
  d.await({ type: "requestApproval", reason }, { kind: "approval", on });
}
