/**
 * How far a run's `task.plan` has got. Plain data in the run's state (and so in its checkpoints):
 * a run resumed on another worker goes on from the round it was waiting on.
 */
export interface DagProgress {
  /** The output of each node whose child committed, by node id. */
  outputs: Record<string, string>;
  /** The nodes of the round under way, in the order of its fan-out (the order of its results). */
  round: string[];
  /** Children started so far for each node (more than one when a failed node ran again). */
  attempts: Record<string, number>;
  /** Why each node's last child failed, told to the child that runs it again. */
  failures: Record<string, string>;
}

/** The action id of a plan's round: never an ACT call's (`act-N`), which a model's spawn has. */
export const PLAN_ROUND_PREFIX = "plan-";

/** Whether a call is one of a plan's rounds, which the runtime, not the model, asked for. */
export function isPlanRound(state: { dag?: DagProgress | undefined }, actionId: string): boolean {
  return state.dag !== undefined && actionId.startsWith(PLAN_ROUND_PREFIX);
}
