import type { RunStatus } from "../contracts/run-status.js";
import { toRfc3339 } from "../runtime/clock.js";
import type { LoopState } from "./state.js";

/** What `watch` and `status` show for a run: derived from its state, never stored separately. */
export function statusOf(state: LoopState, now: number): RunStatus {
  const terminal = state.terminal;
  return {
    runId: state.runId,
    rootRunId: state.rootRunId,
    ...(state.parentRunId ? { parentRunId: state.parentRunId } : {}),
    depth: state.depth,
    status: state.status,
    phase: state.phase,
    iteration: state.guard.iteration,
    usage: state.usage,
    ...(terminal
      ? {
          terminal: {
            kind: terminal.kind,
            reason: terminal.reason,
            ...(terminal.output !== undefined ? { output: terminal.output } : {}),
            ...(terminal.artifact.kind === "commit" ? { provenance: terminal.artifact.provenance } : {}),
          },
        }
      : {}),
    updatedAt: toRfc3339(now),
  };
}
