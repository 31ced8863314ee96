import { LeaseReply, LeaseRequest } from "../../shared/contracts/cluster.js";
import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { requestJson, type ServiceWait } from "../../shared/bus/request.js";
import type { LoopState } from "../../shared/loop/state.js";
import { fromErrorPayload } from "../../shared/runtime/errors.js";

/**
 * The run's model calls that were answered: the iterations that stay spent when a worker lets the
 * run go. A call still out is asked again by the run's next worker, which pays for it then.
 */
export function answeredCalls(state: Pick<LoopState, "guard" | "awaiting">): number {
  return state.guard.iteration - (state.awaiting?.type === "callModel" ? 1 : 0);
}

/**
 * Whether the run has ended for good (committed, or failed with nothing left to undo): it never
 * leases again, so the tree may forget it. A halted or parked run may be resumed.
 */
export function runEnded(state: Pick<LoopState, "phase" | "pending">): boolean {
  return (state.phase === "COMMIT" || state.phase === "FAIL") && state.pending === null;
}

/**
 * Iterations leased from the run tree's global budget (kept by the supervisors), spent one per model
 * call. Each lease asks for twice what it asked before, up to `chunk` (1, 2, 4… per run lease): a
 * short run asks for about what it spends, a long one makes one request per `chunk` model calls.
 * The next lease is asked for as soon as the last leased iteration is spent, so its round trip
 * overlaps the step's tool call instead of delaying the next model call. When the worker's lease
 * on the run ends, what it leased and did not spend (the rest of a lease, the lease asked ahead) is
 * given back to the tree's budget. A refused lease becomes the loop's `globalCapReached` event,
 * which circuit-breaks the run; a supervisor that cannot be reached is an error, and the job is
 * retried. Every lease asked for while the run is known, and every give-back, says how many of the
 * run's iterations are spent (see LeaseRequest.spent): a worker that dies gives nothing back, and
 * what it held goes back to the tree when the run's next worker asks.
 */
export class IterationLeases {
  private readonly balance = new Map<string, number>();
  private readonly nextAsk = new Map<string, number>();
  /** The lease asked for ahead of need, per run (its rejection is kept for the `take` that needs it). */
  private readonly ahead = new Map<string, Promise<LeaseReply>>();

  constructor(
    private readonly bus: Pick<ActorBus, "nc" | "subjects" | "clock">,
    private readonly chunk: number,
    /** Waits for a supervisor when none serves leases (one restarting), instead of failing the lease. */
    private readonly wait?: ServiceWait,
  ) {}

  async take(state: LoopState): Promise<LoopEvent | undefined> {
    const left = this.balance.get(state.runId) ?? 0;
    if (left > 0) {
      this.spend(state, left);
      return undefined;
    }
    // Asked now, the lease pays for the call it is asked for: the calls before it are paid for.
    const pending = this.ahead.get(state.runId) ?? this.ask(state, state.guard.iteration - 1);
    this.ahead.delete(state.runId);
    const reply = await pending;
    if (reply.ok) {
      this.spend(state, reply.granted);
      return undefined;
    }
    if (reply.error.code === "GLOBAL_CAP") {
      return { type: "globalCapReached", at: this.bus.clock.now(), message: reply.error.message };
    }
    throw fromErrorPayload(reply.error);
  }

  /**
   * Asks for a run's next lease now, ahead of the model call that needs it (a fresh run's first,
   * asked while the run is read and started): the round trip overlaps that work instead of
   * delaying the call. Nothing is asked when the run holds iterations or an ask is already out.
   * The run is not read yet: the ask says it spent nothing only when the job is `fresh` (a run's
   * first, delivered the first time), and says nothing otherwise (a count lower than one told
   * before would take nothing back anyway).
   */
  prefetch(state: Pick<LoopState, "runId" | "rootRunId">, fresh = false): void {
    if ((this.balance.get(state.runId) ?? 0) > 0 || this.ahead.has(state.runId)) return;
    this.askAhead(state, fresh ? 0 : undefined);
  }

  /**
   * The worker's lease on the run ended: what it kept for the run is dropped, and the iterations it
   * leased and did not spend (an answer still on its way included) are given back, without waiting.
   * With the run's `last` state (the lease read the run), the give-back says the run's answered
   * model calls, which lets the tree take back what the run's earlier workers left unspent too, and
   * whether the run ended, which lets the tree forget it. A give-back that fails leaves them counted
   * as used until the run's next worker asks.
   */
  release(
    run: Pick<LoopState, "runId" | "rootRunId">,
    last?: Pick<LoopState, "guard" | "awaiting" | "phase" | "pending">,
  ): void {
    const held = this.balance.get(run.runId) ?? 0;
    const ahead = this.ahead.get(run.runId);
    this.drop(run);
    if (held === 0 && !ahead && !last) return;
    const unspent = (ahead ?? Promise.resolve(undefined)).then(
      (reply) => held + (reply?.ok ? reply.granted : 0),
      () => held,
    );
    const spent = last && answeredCalls(last);
    const ended = last !== undefined && runEnded(last);
    void unspent
      .then((count) =>
        count > 0 || spent !== undefined ? this.request(run, 0, count, spent, ended) : undefined,
      )
      .catch(() => undefined);
  }

  /**
   * Forgets what the worker kept for the run without giving it back: another worker drives the run
   * now, and the tree takes it back when that one asks (a give-back from here would be counted
   * against the iterations the other was granted).
   */
  drop(state: Pick<LoopState, "runId">): void {
    this.balance.delete(state.runId);
    this.nextAsk.delete(state.runId);
    this.ahead.delete(state.runId);
  }

  /** Spends one of `available` iterations; spending the last asks for the next lease at once. */
  private spend(state: LoopState, available: number): void {
    this.balance.set(state.runId, available - 1);
    if (available > 1 || this.ahead.has(state.runId)) return;
    // Every call up to the one this iteration pays for is paid for.
    this.askAhead(state, state.guard.iteration);
  }

  private askAhead(state: Pick<LoopState, "runId" | "rootRunId">, spent?: number): void {
    const next = this.ask(state, spent);
    // Rejections are awaited by the next `take`; until then they must not count as unhandled.
    next.catch(() => undefined);
    this.ahead.set(state.runId, next);
  }

  private ask(state: Pick<LoopState, "runId" | "rootRunId">, spent: number | undefined): Promise<LeaseReply> {
    const count = this.nextAsk.get(state.runId) ?? 1;
    this.nextAsk.set(state.runId, Math.min(this.chunk, count * 2));
    return this.request(state, count, undefined, spent);
  }

  private request(
    state: Pick<LoopState, "runId" | "rootRunId">,
    count: number,
    unspent?: number,
    spent?: number,
    ended = false,
  ): Promise<LeaseReply> {
    const { runId, rootRunId } = state;
    const told = spent === undefined ? {} : { spent: Math.max(0, spent), ...(ended ? { ended: true } : {}) };
    return requestJson(
      this.bus.nc,
      this.bus.subjects.iterationLease(),
      {
        schema: LeaseRequest,
        value: { schemaVersion: 1, runId, rootRunId, count, ...(unspent ? { unspent } : {}), ...told },
      },
      LeaseReply,
      { timeoutMs: 10_000, wait: this.wait },
    );
  }
}
