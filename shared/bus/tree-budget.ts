import { z } from "zod";
import { AgentError } from "../runtime/errors.js";
import { casChange, type CasDeps } from "./cas.js";
import { decode } from "./codec.js";
import { KnownRevisions } from "./known-revisions.js";

/**
 * Runs of one tree whose recent grants are kept. Past it the run that leased longest ago is
 * forgotten: it can give nothing back, so its unspent iterations stay counted as used.
 */
export const MAX_TRACKED_RUNS = 256;

const Grants = z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]);

export const TreeUsage = z.object({
  used: z.number().int().nonnegative(),
  // Per run, its last two grants: a worker's unspent iterations are the rest of the lease it is
  // spending and the one it asked ahead, so a give-back can never return more than these.
  recent: z.record(z.string(), Grants).optional(),
});
export type TreeUsage = z.infer<typeof TreeUsage>;

/** What a give-back did: the tree's count after it, and how many of the iterations offered it took. */
export interface GiveBack {
  used: number;
  returned: number;
}

/**
 * The global iteration budget of one run tree (a root run and every descendant), counted on the
 * pool bucket with compare-and-set: workers lease iterations before model calls, so no tree can
 * exceed its cap however many workers and supervisors there are. A give-back returns at most the
 * giving run's last two grants, once: a worker that errs, or anyone who may publish lease
 * requests, cannot push a tree past its cap by more than those.
 */
export class TreeBudget {
  /** The bucket, and what this process last wrote to each tree: its next lease is one write (see KnownRevisions). */
  private readonly cas: CasDeps & { known: KnownRevisions<TreeUsage> };

  constructor(deps: CasDeps) {
    this.cas = { ...deps, known: new KnownRevisions() };
  }

  /** Grants `runId` up to `count` iterations (fewer near the cap); GLOBAL_CAP when none are left. */
  lease(
    rootRunId: string,
    runId: string,
    count: number,
    cap: number,
  ): Promise<{ granted: number; used: number }> {
    return casChange(this.cas, key(rootRunId), TreeUsage, { used: 0 }, (state) => {
      const granted = Math.min(count, cap - state.used);
      if (granted <= 0) {
        throw new AgentError(
          "GLOBAL_CAP",
          `run tree ${rootRunId} used its global budget of ${cap} iterations`,
          { details: { used: state.used, cap } },
        );
      }
      const used = state.used + granted;
      const { [runId]: before, ...others } = state.recent ?? {};
      // Re-inserted last, so the oldest entry is the first one.
      const recent: Record<string, [number, number]> = { ...others, [runId]: [before?.[1] ?? 0, granted] };
      const names = Object.keys(recent);
      for (const name of names.slice(0, Math.max(0, names.length - MAX_TRACKED_RUNS))) delete recent[name];
      return { result: { granted, used }, next: { used, recent } };
    });
  }

  /** Takes back iterations `runId` was granted and never spent, up to its last two grants. */
  giveBack(rootRunId: string, runId: string, count: number): Promise<GiveBack> {
    return casChange(this.cas, key(rootRunId), TreeUsage, { used: 0 }, (state) => {
      const { [runId]: grants, ...others } = state.recent ?? {};
      if (!grants) return { result: { used: state.used, returned: 0 } };
      const returned = Math.min(count, grants[0] + grants[1], state.used);
      const used = state.used - returned;
      return { result: { used, returned }, next: { used, recent: others } };
    });
  }

  async used(rootRunId: string): Promise<number> {
    const entry = await this.cas.kv.get(key(rootRunId));
    return entry?.operation === "PUT" ? decode(TreeUsage, entry.value).used : 0;
  }
}

const key = (rootRunId: string): string => `tree.${rootRunId}`;
