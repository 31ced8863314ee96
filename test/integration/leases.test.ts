import { describe, expect, it } from "vitest";
import { IterationLeases } from "../../services/agent/leases.js";
import { decode, encode } from "../../shared/bus/codec.js";
import { LeaseReply, LeaseRequest } from "../../shared/contracts/cluster.js";
import type { LoopState } from "../../shared/loop/state.js";
import { useBusSuite } from "../helpers/bus-suite.js";

const suite = useBusSuite("ls");

/** A supervisor stand-in on the lease subject: grants what is asked until `cap` is spent. */
function supervisor(cap: number): { asks: number[]; stop: () => void } {
  const asks: number[] = [];
  let used = 0;
  const sub = suite.nc.subscribe(suite.subjects.iterationLease(), {
    callback: (_err, msg) => {
      const { count } = decode(LeaseRequest, msg.data);
      asks.push(count);
      const granted = Math.min(count, cap - used);
      used += granted;
      const reply: LeaseReply =
        granted > 0
          ? { schemaVersion: 1, ok: true, granted, used, cap }
          : {
              schemaVersion: 1,
              ok: false,
              error: { code: "GLOBAL_CAP", message: "spent", retryable: false },
            };
      msg.respond(encode(LeaseReply, reply));
    },
  });
  return { asks, stop: () => sub.unsubscribe() };
}

const run = (runId: string) => ({ runId, rootRunId: runId }) as LoopState;
const settle = async (): Promise<void> => {
  await suite.nc.flush();
  await new Promise((r) => setTimeout(r, 50));
};

describe("iteration leases", () => {
  it("asks 1, 2, 4… up to the chunk; once a run has been granted a whole chunk, the next lease is asked when its last iteration is spent", async () => {
    const sup = supervisor(1_000);
    const leases = new IterationLeases(suite, 4);
    const state = run("long");
    const seen: number[][] = [];
    for (let i = 0; i < 15; i++) {
      expect(await leases.take(state)).toBeUndefined();
      await settle();
      seen.push([...sup.asks]);
    }
    // Takes 1, 2 and 4 ask when needed; from the 7th take on (a whole chunk spent) the next is asked ahead.
    expect(seen[0]).toEqual([1]);
    expect(seen[1]).toEqual([1, 2]);
    expect(seen[2]).toEqual([1, 2]);
    expect(seen[3]).toEqual([1, 2, 4]);
    expect(seen[6]).toEqual([1, 2, 4, 4]);
    expect(seen[10]).toEqual([1, 2, 4, 4, 4]);
    expect(seen[14]).toEqual([1, 2, 4, 4, 4, 4]);
    sup.stop();
  });

  it("a short run never asks ahead, so a tight tree budget is spent only on iterations it uses", async () => {
    const sup = supervisor(1_000);
    const leases = new IterationLeases(suite, 4);
    for (let i = 0; i < 3; i++) await leases.take(run("short"));
    await settle();
    expect(sup.asks).toEqual([1, 2]);
    sup.stop();
  });

  it("prefetch asks for a run's next lease before its take, once; the take spends that answer", async () => {
    const sup = supervisor(1_000);
    const leases = new IterationLeases(suite, 4);
    const state = run("fresh");
    leases.prefetch(state);
    leases.prefetch(state);
    await settle();
    expect(sup.asks).toEqual([1]);
    expect(await leases.take(state)).toBeUndefined();
    await settle();
    // The take was answered by the prefetched ask; the next take asks for two, as without a prefetch.
    expect(sup.asks).toEqual([1]);
    expect(await leases.take(state)).toBeUndefined();
    leases.prefetch(state);
    await settle();
    expect(sup.asks).toEqual([1, 2]);
    sup.stop();
  });

  it("a lease asked ahead and refused is the next take's globalCapReached; forget drops what a run kept", async () => {
    const sup = supervisor(7);
    const leases = new IterationLeases(suite, 4);
    const state = run("capped");
    for (let i = 0; i < 7; i++) expect(await leases.take(state)).toBeUndefined();
    await settle();
    expect(sup.asks).toEqual([1, 2, 4, 4]);
    expect(await leases.take(state)).toMatchObject({ type: "globalCapReached", message: "spent" });
    leases.forget(state.runId);
    // Forgotten: the next take starts over with one iteration (and is refused: the tree is spent).
    expect(await leases.take(state)).toMatchObject({ type: "globalCapReached" });
    expect(sup.asks.at(-1)).toBe(1);
    sup.stop();
  });
});
