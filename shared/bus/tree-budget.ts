import { z } from "zod";
import { AgentError } from "../runtime/errors.js";
import { casChange, type CasDeps } from "./cas.js";
import { decode } from "./codec.js";

export const TreeUsage = z.object({ used: z.number().int().nonnegative() });
export type TreeUsage = z.infer<typeof TreeUsage>;

/**
 * The global iteration budget of one run tree (a root run and every descendant), counted on the
 * pool bucket with compare-and-set: workers lease iterations before model calls, so no tree can
 * exceed its cap however many workers and supervisors there are.
 */
export class TreeBudget {
  constructor(private readonly deps: CasDeps) {}

  /** Grants up to `count` iterations (fewer near the cap); GLOBAL_CAP when none are left. */
  lease(rootRunId: string, count: number, cap: number): Promise<{ granted: number; used: number }> {
    return casChange(this.deps, `tree.${rootRunId}`, TreeUsage, { used: 0 }, (state) => {
      const granted = Math.min(count, cap - state.used);
      if (granted <= 0) {
        throw new AgentError(
          "GLOBAL_CAP",
          `run tree ${rootRunId} used its global budget of ${cap} iterations`,
          { details: { used: state.used, cap } },
        );
      }
      return { result: { granted, used: state.used + granted }, next: { used: state.used + granted } };
    });
  }

  /** Takes back iterations a lease granted and its run never spent. */
  giveBack(rootRunId: string, count: number): Promise<{ used: number }> {
    return casChange(this.deps, `tree.${rootRunId}`, TreeUsage, { used: 0 }, (state) => {
      const used = Math.max(0, state.used - count);
      return { result: { used }, next: { used } };
    });
  }

  async used(rootRunId: string): Promise<number> {
    const entry = await this.deps.kv.get(`tree.${rootRunId}`);
    return entry?.operation === "PUT" ? decode(TreeUsage, entry.value).used : 0;
  }
}
