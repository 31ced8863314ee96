import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import type { TreeCap } from "../../shared/bus/tree-iterations.js";
import {
  addSpend,
  hasSpendBudget,
  readSpend,
  spentBudget,
  type TreeSpent,
} from "../../shared/bus/tree-spend.js";
import { usageOfFailure } from "../../shared/loop/review-usage.js";
import type { LoopState } from "../../shared/loop/state.js";

/** Trees whose budget and spend a worker keeps: far more than it drives runs of at once. */
const MAX_TREES = 4_096;

type Run = Pick<LoopState, "runId" | "rootRunId">;
type Bus = Pick<ActorBus, "nc" | "jsm" | "subjects" | "clock" | "logger">;

/**
 * The run trees' cost and token budgets as one worker sees them: each tree's budget (its root's
 * `maxCostUsd` and `maxTokensBudget`, written with its iteration cap at the root's admission), and
 * the spend its counters last answered. Each model response and critic review of a budgeted tree
 * adds to the counters, and a run's next model call is refused once the tree is past a budget, so
 * a tree's spend passes its budget by at most the calls its runs were making as it did.
 */
export class TreeSpend {
  private readonly spent = new Map<string, TreeSpent>();

  constructor(
    private readonly bus: Bus,
    /** The tree's budgets, as the worker's iteration leases read and keep them (IterationLeases.budget). */
    private readonly budgets: (rootRunId: string) => Promise<TreeCap | undefined>,
  ) {}

  /** The spend checks of one lease on `run`. */
  forRun(run: Run): RunSpend {
    return new RunSpend(this, run);
  }

  /** The tree's budget when its root set a cost or token budget; undefined otherwise. */
  async budgetOf(rootRunId: string): Promise<TreeCap | undefined> {
    // A tree with no cap (retired, or never admitted) is the iteration leases' to refuse.
    const read = await this.budgets(rootRunId);
    return read && hasSpendBudget(read) ? read : undefined;
  }

  /** What the tree spent, read from its counters (`fresh`) or as last answered here. */
  async spentOf(rootRunId: string, fresh: boolean): Promise<TreeSpent> {
    const known = this.spent.get(rootRunId);
    if (known && !fresh) return known;
    const read = await readSpend(this.bus, rootRunId);
    this.note(rootRunId, read);
    return read;
  }

  /**
   * Adds a step's spend to the tree's counters. A failed add is logged and not retried (it may
   * have landed): the step's answer is not thrown away for it, since asking again costs again.
   */
  async charge(run: Run, tokens: number, costUsd: number): Promise<void> {
    try {
      this.note(run.rootRunId, await addSpend(this.bus, run.rootRunId, tokens, costUsd));
    } catch (err) {
      this.bus.logger.warn(
        { err, runId: run.runId, rootRunId: run.rootRunId, tokens, costUsd },
        "a step's spend was not added to its run tree's counters",
      );
    }
  }

  /** Keeps the larger totals: adds answered out of order must not make the tree look less spent. */
  private note(rootRunId: string, totals: TreeSpent): void {
    const known = this.spent.get(rootRunId);
    this.spent.delete(rootRunId);
    this.spent.set(rootRunId, {
      tokens: Math.max(known?.tokens ?? 0, totals.tokens),
      costMicroUsd: Math.max(known?.costMicroUsd ?? 0, totals.costMicroUsd),
    });
    if (this.spent.size > MAX_TREES) this.spent.delete(this.spent.keys().next().value ?? rootRunId);
  }

  get clock(): Bus["clock"] {
    return this.bus.clock;
  }
}

/**
 * One lease's view of its run tree's spending budgets: its first check reads the counters (other
 * workers' runs of the tree spend too), later ones use what the lease's own adds answered.
 */
export class RunSpend {
  private fresh = true;

  constructor(
    private readonly trees: TreeSpend,
    private readonly run: Run,
  ) {}

  /** Reads the tree's budget now, while the run is read, rather than before its first model call. */
  prefetch(): void {
    this.trees.budgetOf(this.run.rootRunId).catch(() => undefined);
  }

  /** The loop's `globalCapReached` in place of a model call when the tree is past a budget; else undefined. */
  async refusal(): Promise<LoopEvent | undefined> {
    const { rootRunId } = this.run;
    const budget = await this.trees.budgetOf(rootRunId);
    if (!budget) return undefined;
    const spent = await this.trees.spentOf(rootRunId, this.fresh);
    this.fresh = false;
    const over = spentBudget(rootRunId, budget, spent);
    if (!over) return undefined;
    return {
      type: "globalCapReached",
      at: this.trees.clock.now(),
      message: over.message,
      budget: over.budget,
    };
  }

  /** Counts what a model response or a critic review spent toward the tree, when the tree has a budget. */
  async charge(event: LoopEvent | undefined): Promise<void> {
    const spend = spendOf(event);
    if (!spend || !(await this.trees.budgetOf(this.run.rootRunId))) return;
    await this.trees.charge(this.run, spend.tokens, spend.costUsd);
  }
}

/** The tokens and cost of an event that reports them. */
function spendOf(event: LoopEvent | undefined): { tokens: number; costUsd: number } | undefined {
  if (event?.type === "modelResponded") {
    const { usage, costUsd } = event.response;
    return { tokens: usage.inputTokens + usage.outputTokens, costUsd };
  }
  const usage =
    event?.type === "criticReviewed"
      ? event.usage
      : event?.type === "criticFailed"
        ? usageOfFailure(event.error)
        : undefined;
  return usage && { tokens: usage.inputTokens + usage.outputTokens, costUsd: usage.costUsd };
}
