import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import {
  addIterations,
  capReached,
  grantOf,
  readTreeBudget,
  readTreeCap,
  retired,
  type TreeCap,
} from "../../shared/bus/tree-iterations.js";
import type { LoopState } from "../../shared/loop/state.js";
import type { Clock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";

/** Trees whose budgets a worker keeps: far more than it drives runs of at once. */
const MAX_TREES = 4_096;
/**
 * Reservations refused while the tree's counter held others' overshoots on their way back, and
 * found room once they were: asked again up to this many times before the run is refused.
 */
const MAX_RESERVE_ATTEMPTS = 5;

type Run = Pick<LoopState, "runId" | "rootRunId">;
type Bus = Pick<ActorBus, "nc" | "subjects" | "clock" | "buckets" | "logger">;

/**
 * The run trees' iteration budgets as one worker spends them: each tree's budgets, read from the
 * pool bucket once and kept (they never change; the cost and token budgets are read from here too,
 * see TreeSpend), and its JetStream counter, to which a reservation adds what it asks for. The supervisor writes the cap at the root's admission and has
 * no part after it: the counter is exact however many workers add to it at once.
 */
export class IterationLeases {
  private readonly budgets = new Map<string, TreeCap>();
  private readonly reading = new Map<string, Promise<TreeCap | undefined>>();

  constructor(
    private readonly bus: Bus,
    /** The most iterations one reservation asks for (AGENT_ITERATION_LEASE). */
    private readonly chunk: number,
  ) {}

  /** The iterations one lease on `run` reserves and spends. */
  forRun(run: Run): RunIterations {
    return new RunIterations(this, run, { chunk: this.chunk, clock: this.bus.clock });
  }

  /**
   * The tree's budgets as its root's admission wrote them, read once for the calls that ask while
   * the read is under way, and kept; undefined, and not kept, for a tree without them (retired, or
   * never admitted).
   */
  async budget(rootRunId: string): Promise<TreeCap | undefined> {
    const kept = this.budgets.get(rootRunId);
    if (kept) return kept;
    let reading = this.reading.get(rootRunId);
    if (!reading) {
      reading = readTreeBudget(this.bus.buckets.pool, rootRunId).finally(() =>
        this.reading.delete(rootRunId),
      );
      this.reading.set(rootRunId, reading);
    }
    const read = await reading;
    if (read && !this.budgets.has(rootRunId)) {
      this.budgets.set(rootRunId, read);
      if (this.budgets.size > MAX_TREES) this.budgets.delete(this.budgets.keys().next().value ?? rootRunId);
    }
    return read;
  }

  /**
   * Reserves up to `asked` iterations of the run's tree with one add to its counter, and gives
   * back at once what went past the cap; resolves with how many were granted, or rejects with
   * GLOBAL_CAP when none were. The cap is read alongside the first add for its tree.
   */
  async reserve(run: Run, asked: number): Promise<number> {
    const { rootRunId } = run;
    for (let attempt = 1; ; attempt++) {
      const [read, added] = await Promise.allSettled([
        this.budget(rootRunId).then((budget) => budget?.cap),
        addIterations(this.bus, rootRunId, asked),
      ]);
      // An add that failed may have landed: what it asked stays counted, never granted.
      if (added.status === "rejected") throw added.reason;
      const total = added.value;
      const cap = await this.capOf(run, read, total - asked).catch(async (err: unknown) => {
        await this.giveBack(rootRunId, asked);
        throw err;
      });
      const granted = grantOf(cap, total, asked);
      if (granted === asked) return granted;
      // Given back before the grant is used, so that it says whether the tree has room after all.
      const after = await this.giveBack(rootRunId, asked - granted);
      if (granted > 0) return granted;
      // Refused for overshoots of others still on their way back: the tree had room.
      if (after === undefined || after >= cap || attempt >= MAX_RESERVE_ATTEMPTS)
        throw capReached(rootRunId, cap, total - asked);
    }
  }

  /**
   * Gives back iterations reserved and never spent (a negative add); resolves with the counter's
   * total after it, or undefined when it failed, which leaves them counted: the tree can only
   * come out short of its cap, never over it.
   */
  async giveBack(rootRunId: string, count: number): Promise<number | undefined> {
    try {
      return await addIterations(this.bus, rootRunId, -count);
    } catch (err) {
      this.bus.logger.warn(
        { err, rootRunId, count },
        "iterations not given back: they stay counted in the tree",
      );
      return undefined;
    }
  }

  /**
   * The tree's cap as read alongside an add, or GLOBAL_CAP when the tree was
   * retired: it has no cap, or, for a run that is not its root, the counter held nothing before
   * the add (the parent's model call that spawned the run counts before any child runs) and the
   * cap this worker kept is gone on a read made after the add (the counter was purged with it).
   */
  private async capOf(
    run: Run,
    read: PromiseSettledResult<number | undefined>,
    before: number,
  ): Promise<number> {
    if (read.status === "rejected") throw read.reason;
    const cap = read.value;
    if (cap === undefined) throw retired(run.rootRunId);
    const child = run.runId !== run.rootRunId;
    if (child && before === 0 && (await readTreeCap(this.bus.buckets.pool, run.rootRunId)) === undefined)
      throw retired(run.rootRunId);
    return cap;
  }
}

/**
 * The iterations of one lease on one run, spent one per model call. Each reservation asks for
 * twice what the last asked, up to AGENT_ITERATION_LEASE (1, 2, 4…): a short run reserves about
 * what it spends, a long one adds to its tree's counter once per that many calls. The next
 * reservation is made as the last reserved iteration is spent, so its round trip overlaps the
 * step's tool call. When the lease ends, what it reserved and did not spend goes back, and so does
 * the iteration of a model call it made and got no answer to (the run's next worker asks it
 * again, and pays then). A refused reservation is the loop's `globalCapReached` event, which
 * circuit-breaks the run; a counter that cannot be reached is an error, and the job is retried.
 */
export class RunIterations {
  private balance = 0;
  private nextAsk = 1;
  /** The reservation made ahead of need (its rejection is kept for the call that needs it). */
  private ahead: Promise<number> | undefined;
  /** The last model call was paid for and not answered (cut off, or failed). */
  private unanswered = false;
  private ended = false;

  constructor(
    private readonly leases: IterationLeases,
    private readonly run: Run,
    private readonly options: { chunk: number; clock: Clock },
  ) {}

  /**
   * Reserves now, ahead of the model call that needs it (a run's first, while the run is read):
   * the add overlaps that work instead of delaying the call. Nothing when iterations are held.
   */
  prefetch(): void {
    if (this.balance === 0 && !this.ahead) this.askAhead();
  }

  /** A model call, paid for with one iteration; the loop's `globalCapReached` instead when the tree is spent. */
  async call(perform: () => Promise<LoopEvent | undefined>): Promise<LoopEvent | undefined> {
    const refused = await this.take();
    if (refused) return refused;
    this.unanswered = true;
    const event = await perform();
    this.unanswered = event?.type === "modelFailed";
    return event;
  }

  /**
   * The lease ended: what it reserved and did not spend (a reservation still on its way included)
   * is given back, without waiting.
   */
  release(): void {
    if (this.ended) return;
    this.ended = true;
    const held = this.balance + (this.unanswered ? 1 : 0);
    const ahead = this.ahead ?? Promise.resolve(0);
    this.balance = 0;
    this.ahead = undefined;
    void ahead
      .catch(() => 0)
      .then((granted) =>
        held + granted > 0 ? this.leases.giveBack(this.run.rootRunId, held + granted) : undefined,
      );
  }

  private async take(): Promise<LoopEvent | undefined> {
    // A call made before this one is not asked again: answered or not, it stays paid for.
    this.unanswered = false;
    if (this.balance === 0) {
      const pending = this.ahead ?? this.reserve();
      this.ahead = undefined;
      try {
        this.balance = await pending;
      } catch (err) {
        if (!(err instanceof AgentError) || err.code !== "GLOBAL_CAP") throw err;
        return { type: "globalCapReached", at: this.options.clock.now(), message: err.message };
      }
    }
    this.balance -= 1;
    if (this.balance === 0) this.askAhead();
    return undefined;
  }

  private reserve(): Promise<number> {
    const asked = this.nextAsk;
    this.nextAsk = Math.min(this.options.chunk, asked * 2);
    return this.leases.reserve(this.run, asked);
  }

  private askAhead(): void {
    const next = this.reserve();
    // Rejections are awaited by the next call; until then they must not count as unhandled.
    next.catch(() => undefined);
    this.ahead = next;
  }
}
