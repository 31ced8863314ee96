import { describe, expect, it } from "vitest";
import { IterationLeases } from "../../services/agent/leases.js";
import { decode, encode } from "../../shared/bus/codec.js";
import { LeaseReply, LeaseRequest } from "../../shared/contracts/cluster.js";
import type { LoopState } from "../../shared/loop/state.js";
import { useBusSuite } from "../helpers/bus-suite.js";

const suite = useBusSuite("ls");

/** A supervisor stand-in on the lease subject: grants what is asked until `cap` is spent, takes back what is given back. */
function supervisor(cap: number): {
  asks: number[];
  givenBack: number[];
  used: () => number;
  stop: () => void;
} {
  const asks: number[] = [];
  const givenBack: number[] = [];
  let used = 0;
  const sub = suite.nc.subscribe(suite.subjects.iterationLease(), {
    callback: (_err, msg) => {
      const { count, unspent } = decode(LeaseRequest, msg.data);
      if (unspent !== undefined) {
        givenBack.push(unspent);
        used -= unspent;
      }
      if (count > 0) asks.push(count);
      const granted = Math.min(count, cap - used);
      used += granted;
      const reply: LeaseReply =
        granted > 0 || count === 0
          ? { schemaVersion: 1, ok: true, granted, used, cap }
          : {
              schemaVersion: 1,
              ok: false,
              error: { code: "GLOBAL_CAP", message: "spent", retryable: false },
            };
      msg.respond(encode(LeaseReply, reply));
    },
  });
  return { asks, givenBack, used: () => used, stop: () => sub.unsubscribe() };
}

const run = (runId: string) => ({ runId, rootRunId: runId }) as LoopState;
const settle = async (): Promise<void> => {
  await suite.nc.flush();
  await new Promise((r) => setTimeout(r, 50));
};

describe("iteration leases", () => {
  it("asks 1, 2, 4… up to the chunk, each lease as soon as the last leased iteration is spent", async () => {
    const sup = supervisor(1_000);
    const leases = new IterationLeases(suite, 4);
    const state = run("long");
    const seen: number[][] = [];
    for (let i = 0; i < 15; i++) {
      expect(await leases.take(state)).toBeUndefined();
      await settle();
      seen.push([...sup.asks]);
    }
    // Only the first take waits for its lease; each later one is asked while the iterations before it are spent.
    expect(seen[0]).toEqual([1, 2]);
    expect(seen[1]).toEqual([1, 2]);
    expect(seen[2]).toEqual([1, 2, 4]);
    expect(seen[5]).toEqual([1, 2, 4]);
    expect(seen[6]).toEqual([1, 2, 4, 4]);
    expect(seen[10]).toEqual([1, 2, 4, 4, 4]);
    expect(seen[14]).toEqual([1, 2, 4, 4, 4, 4]);
    sup.stop();
  });

  it("when the lease on a run ends, what it leased and did not spend (the lease asked ahead included) goes back to the tree", async () => {
    const sup = supervisor(1_000);
    const leases = new IterationLeases(suite, 4);
    const state = run("short");
    for (let i = 0; i < 3; i++) await leases.take(state);
    await settle();
    expect(sup.asks).toEqual([1, 2, 4]);
    expect(sup.used()).toBe(7);
    leases.release(state);
    await settle();
    expect(sup.givenBack).toEqual([4]);
    expect(sup.used()).toBe(3);
    // Released twice (the worker's fallback after the lease's own): nothing more goes back.
    leases.release(state);
    await settle();
    expect(sup.givenBack).toEqual([4]);
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
    // The take was answered by the prefetched ask, and spending that one iteration asked for two.
    expect(sup.asks).toEqual([1, 2]);
    expect(await leases.take(state)).toBeUndefined();
    // The run holds an iteration: a prefetch asks nothing.
    leases.prefetch(state);
    await settle();
    expect(sup.asks).toEqual([1, 2]);
    sup.stop();
  });

  it("a lease asked ahead and refused is the next take's globalCapReached; release drops what a run kept", async () => {
    const sup = supervisor(7);
    const leases = new IterationLeases(suite, 4);
    const state = run("capped");
    for (let i = 0; i < 7; i++) expect(await leases.take(state)).toBeUndefined();
    await settle();
    expect(sup.asks).toEqual([1, 2, 4, 4]);
    expect(await leases.take(state)).toMatchObject({ type: "globalCapReached", message: "spent" });
    leases.release(state);
    // Released: the next take starts over with one iteration (and is refused: the tree is spent).
    expect(await leases.take(state)).toMatchObject({ type: "globalCapReached" });
    expect(sup.asks.at(-1)).toBe(1);
    sup.stop();
  });
});
