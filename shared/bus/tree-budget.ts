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

const Count = z.number().int().nonnegative();
const Grants = z.tuple([Count, Count]);
/**
 * A run's iterations as its worker last told them: how many it had spent then, and that plus
 * what it was granted since, less what it gave back (never below the first).
 */
const Paid = z.tuple([Count, Count]).refine(([spent, paid]) => paid >= spent, "paid below spent");

export const TreeUsage = z.object({
  used: Count,
  // Per run, its last two grants: a worker's unspent iterations are the rest of the lease it is
  // spending and the one it asked ahead, so a give-back can never return more than these.
  recent: z.record(z.string(), Grants).optional(),
  // Per run in `recent` whose worker said what it spent: a later request that says it again
  // takes back what the run was paid beyond it, the lease a killed worker held included.
  paid: z.record(z.string(), Paid).optional(),
});
export type TreeUsage = z.infer<typeof TreeUsage>;

/**
 * What a tree's key reads as when it holds nothing: never written, or retired with its root (see
 * `lease`). Compared by identity: casChange hands this very object to a decision on a missing key.
 */
const NO_TREE: TreeUsage = Object.freeze({ used: 0 });

/** What a give-back did: the tree's count after it, and how many iterations it took back. */
export interface GiveBack {
  used: number;
  returned: number;
  /** The request said the run had spent fewer than a later request did: nothing was taken. */
  stale?: true;
}

/**
 * The iterations a run was paid and did not spend, by the count its worker says it spent: 0 when
 * the run was never told about, or the count is older than one told before (a worker that lost
 * the run to another still asking).
 */
function unspentOf(state: TreeUsage, runId: string, spent: number | undefined): number {
  const paid = spent === undefined ? undefined : state.paid?.[runId];
  if (!paid || spent === undefined || spent < paid[0]) return 0;
  return Math.min(state.used, Math.max(0, paid[1] - spent));
}

/**
 * The global iteration budget of one run tree (a root run and every descendant), counted on the
 * pool bucket with compare-and-set: workers lease iterations before model calls, so no tree can
 * exceed its cap however many workers and supervisors there are.
 *
 * A request that says how many iterations the run has spent first takes back what the run was
 * paid beyond that, whichever worker held it: a worker killed with part of a lease unspent leaves
 * it counted only until the run's next worker asks. Without that count (a request of an older
 * version, or a run never told about), a give-back returns at most the giving run's last two
 * grants, once. Either way a worker that errs, or anyone who may publish lease requests, cannot
 * take back more than the run was granted since its last told count.
 */
export class TreeBudget {
  /** The bucket, and what this process last wrote to each tree: its next lease is one write (see KnownRevisions). */
  private readonly cas: CasDeps & { known: KnownRevisions<TreeUsage> };

  constructor(deps: CasDeps) {
    this.cas = { ...deps, known: new KnownRevisions() };
  }

  /**
   * Grants `runId` up to `count` iterations (fewer near the cap), after taking back what it was
   * paid beyond `spent` (see above); GLOBAL_CAP when none are left, or when the tree has no key
   * and the run is not its root. A root leases before its first model call, so before it can spawn
   * anything: a tree without a key is one whose key the root's status retention removed, and a run
   * of it still asking (a child resumed long after its root finished) must not count it afresh.
   */
  async lease(
    rootRunId: string,
    runId: string,
    count: number,
    cap: number,
    spent?: number,
  ): Promise<{ granted: number; used: number; returned: number }> {
    const result = await casChange(this.cas, treeBudgetKey(rootRunId), TreeUsage, NO_TREE, (state) => {
      if (state === NO_TREE && runId !== rootRunId) throw retired(rootRunId);
      const returned = unspentOf(state, runId, spent);
      const granted = Math.min(count, cap - (state.used - returned));
      if (granted <= 0 && returned === 0) {
        throw capReached(rootRunId, state.used, cap);
      }
      // What was taken back is kept even when nothing is left to grant (a cap lowered since).
      const given = Math.max(0, granted);
      const used = state.used - returned + given;
      const { [runId]: before, ...others } = state.recent ?? {};
      // Re-inserted last, so the oldest entry is the first one.
      const recent: Record<string, [number, number]> = { ...others, [runId]: [before?.[1] ?? 0, given] };
      const paid = { ...state.paid };
      const told = paid[runId];
      if (spent !== undefined && (!told || spent >= told[0])) paid[runId] = [spent, spent + given];
      else if (told) paid[runId] = [told[0], told[1] + given];
      const names = Object.keys(recent);
      for (const name of names.slice(0, Math.max(0, names.length - MAX_TRACKED_RUNS))) {
        delete recent[name];
        delete paid[name];
      }
      return { result: { granted: given, used, returned }, next: { used, recent, paid } };
    });
    if (result.granted === 0) throw capReached(rootRunId, result.used, cap);
    return result;
  }

  /**
   * Takes back iterations `runId` was granted and never spent: what it was paid beyond `spent`
   * when it says so, else up to `unspent` of what it was granted since its last told count, or of
   * its last two grants when never told. A count settles the run: paid exactly what it spent. An
   * `ended` run (committed or failed) is then forgotten; any other (parked, handed back) stays
   * told, so that a lease its next worker asks before reading it, whose answer is lost, is still
   * taken back when that worker says the count (forgotten, the lease stayed counted for good).
   */
  giveBack(
    rootRunId: string,
    runId: string,
    unspent: number,
    spent?: number,
    ended = false,
  ): Promise<GiveBack> {
    return casChange<typeof TreeUsage, GiveBack>(
      this.cas,
      treeBudgetKey(rootRunId),
      TreeUsage,
      NO_TREE,
      (state) => {
        const { [runId]: grants, ...others } = state.recent ?? {};
        const { [runId]: told, ...otherPaid } = state.paid ?? {};
        if (!grants) return { result: { used: state.used, returned: 0 } };
        if (told && spent !== undefined && spent < told[0]) {
          return { result: { used: state.used, returned: 0, stale: true } };
        }
        if (told && spent === undefined) {
          // A worker that never knew the run's count (a copy of its job another worker drives):
          // the run stays told, less what this one gives back.
          const returned = Math.min(unspent, told[1] - told[0], state.used);
          if (returned === 0) return { result: { used: state.used, returned } };
          const used = state.used - returned;
          const paid = { ...otherPaid, [runId]: [told[0], told[1] - returned] as [number, number] };
          return { result: { used, returned }, next: { ...state, used, paid } };
        }
        const returned = told
          ? unspentOf(state, runId, spent)
          : Math.min(unspent, grants[0] + grants[1], state.used);
        const used = state.used - returned;
        if (spent === undefined || ended) {
          return { result: { used, returned }, next: { used, recent: others, paid: otherPaid } };
        }
        // Kept where it was in `recent`: settling is not leasing, and the oldest lease goes first.
        const recent = { ...state.recent, [runId]: [0, 0] as [number, number] };
        const paid = { ...otherPaid, [runId]: [spent, spent] as [number, number] };
        return { result: { used, returned }, next: { used, recent, paid } };
      },
    );
  }

  /** The tree's count; undefined when it has no key (no run of it leased yet, or it was retired). */
  async used(rootRunId: string): Promise<number | undefined> {
    const entry = await this.cas.kv.get(treeBudgetKey(rootRunId));
    return entry?.operation === "PUT" ? decode(TreeUsage, entry.value).used : undefined;
  }
}

/**
 * The refusal of a run whose tree has no key: its root never leased (a child submitted naming a
 * parent that never ran), or its key was removed with the root's status (SUPERVISOR_STATUS_RETAIN_MS).
 */
export function retired(rootRunId: string): AgentError {
  return new AgentError(
    "GLOBAL_CAP",
    `run tree ${rootRunId} has no iteration budget: its root run finished and was removed after the cluster's status retention (or never ran), so no run of the tree may lease more`,
    { details: { retired: true } },
  );
}

function capReached(rootRunId: string, used: number, cap: number): AgentError {
  return new AgentError("GLOBAL_CAP", `run tree ${rootRunId} used its global budget of ${cap} iterations`, {
    details: { used, cap },
  });
}

/** A run tree's key in the pool bucket. */
export const treeBudgetKey = (rootRunId: string): string => `tree.${rootRunId}`;
