import { LeaseReply, LeaseRequest } from "../../shared/contracts/cluster.js";
import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { requestJson } from "../../shared/bus/request.js";
import type { LoopState } from "../../shared/loop/state.js";
import { fromErrorPayload } from "../../shared/runtime/errors.js";

/**
 * Iterations leased from the run tree's global budget (kept by the supervisors), spent one per model
 * call. Each lease asks for twice what it asked before, up to `chunk` (1, 2, 4… per run lease): a
 * short run asks for what it spends, a long one makes one request per `chunk` model calls. A refused lease becomes the loop's `globalCapReached` event, which
 * circuit-breaks the run; a supervisor that cannot be reached is an error, and the job is retried.
 * Iterations leased but not spent when a lease ends are not returned: the count errs on the safe side.
 */
export class IterationLeases {
  private readonly balance = new Map<string, number>();
  private readonly nextAsk = new Map<string, number>();

  constructor(
    private readonly bus: ActorBus,
    private readonly chunk: number,
  ) {}

  async take(state: LoopState): Promise<LoopEvent | undefined> {
    const left = this.balance.get(state.runId) ?? 0;
    if (left > 0) {
      this.balance.set(state.runId, left - 1);
      return undefined;
    }
    const ask = this.nextAsk.get(state.runId) ?? 1;
    const reply = await requestJson(
      this.bus.nc,
      this.bus.subjects.iterationLease(),
      {
        schema: LeaseRequest,
        value: { schemaVersion: 1, runId: state.runId, rootRunId: state.rootRunId, count: ask },
      },
      LeaseReply,
      { timeoutMs: 10_000 },
    );
    if (reply.ok) {
      this.balance.set(state.runId, reply.granted - 1);
      this.nextAsk.set(state.runId, Math.min(this.chunk, ask * 2));
      return undefined;
    }
    if (reply.error.code === "GLOBAL_CAP") {
      return { type: "globalCapReached", at: this.bus.clock.now(), message: reply.error.message };
    }
    throw fromErrorPayload(reply.error);
  }

  forget(runId: string): void {
    this.balance.delete(runId);
    this.nextAsk.delete(runId);
  }
}
