import { describe, expect, it } from "vitest";
import { IterationLeases } from "../../services/agent/leases.js";
import { decode, encode } from "../../shared/bus/codec.js";
import { LeaseReply, LeaseRequest } from "../../shared/contracts/cluster.js";
import type { LoopState } from "../../shared/loop/state.js";
import { TreeBudget, TreeUsage, treeBudgetKey } from "../../shared/bus/tree-budget.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { leaseIterations } from "../../services/supervisor/control.js";
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

/** The supervisor's own lease handler on the lease subject, over a TreeBudget (cap 100). */
function treeSupervisor(): { budget: TreeBudget; sub: { unsubscribe: () => void } } {
  const budget = new TreeBudget({ ...suite, kv: suite.buckets.pool });
  const bus = { logger: silentLogger } as unknown as ActorBus;
  const sub = suite.nc.subscribe(suite.subjects.iterationLease(), {
    callback: (_err, msg) => {
      void leaseIterations(bus, budget, 100, msg.data).then((reply) =>
        msg.respond(encode(LeaseReply, reply)),
      );
    },
  });
  return { budget, sub };
}

const run = (runId: string) =>
  ({ runId, rootRunId: runId, guard: { iteration: 0 }, awaiting: null }) as unknown as LoopState;
/** The run's next model call, as the loop makes it (its iteration counted first), leased. */
const call = (leases: IterationLeases, state: LoopState): ReturnType<IterationLeases["take"]> => {
  state.guard.iteration += 1;
  return leases.take(state);
};
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
      expect(await call(leases, state)).toBeUndefined();
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
    for (let i = 0; i < 3; i++) await call(leases, state);
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
    expect(await call(leases, state)).toBeUndefined();
    await settle();
    // The take was answered by the prefetched ask, and spending that one iteration asked for two.
    expect(sup.asks).toEqual([1, 2]);
    expect(await call(leases, state)).toBeUndefined();
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
    for (let i = 0; i < 7; i++) expect(await call(leases, state)).toBeUndefined();
    await settle();
    expect(sup.asks).toEqual([1, 2, 4, 4]);
    expect(await call(leases, state)).toMatchObject({ type: "globalCapReached", message: "spent" });
    leases.release(state);
    // Released: the next take starts over with one iteration (and is refused: the tree is spent).
    expect(await call(leases, state)).toMatchObject({ type: "globalCapReached" });
    expect(sup.asks.at(-1)).toBe(1);
    sup.stop();
  });

  it("a worker killed holding iterations: the tree takes them back when the run's next worker asks, and ends counting the calls answered", async () => {
    const { budget, sub } = treeSupervisor();
    const state = run("killed");
    const a = new IterationLeases(suite, 4);
    a.prefetch(state);
    for (let i = 0; i < 4; i++) expect(await call(a, state)).toBeUndefined();
    await settle();
    // 1 + 2 + 4 leased for 4 calls; the worker is then killed: it gives nothing back.
    expect(await budget.used("killed")).toBe(7);
    const b = new IterationLeases(suite, 4);
    b.prefetch(state);
    await settle();
    expect(await budget.used("killed")).toBe(8);
    // Its first call (the run's 5th) spends the prefetched one and asks ahead, saying 5 are spent.
    expect(await call(b, state)).toBeUndefined();
    await settle();
    expect(await budget.used("killed")).toBe(5 + 2);
    expect(await call(b, state)).toBeUndefined();
    // A 7th call is out when the lease ends (a drain): its next worker will ask it again.
    state.guard.iteration += 1;
    (state as { awaiting: unknown }).awaiting = { type: "callModel" };
    b.release(state, state);
    await settle();
    expect(await budget.used("killed")).toBe(6);
    sub.unsubscribe();
  });

  it("a give-back says whether the run ended: a parked run stays told, so a lease asked for it and lost is taken back later; an ended run is forgotten", async () => {
    const { budget, sub } = treeSupervisor();
    const state = run("parks");
    const a = new IterationLeases(suite, 4);
    a.prefetch(state, true);
    expect(await call(a, state)).toBeUndefined();
    // The run parks waiting for approval after its first call.
    Object.assign(state, { phase: "ACT", pending: { kind: "approval" } });
    a.release(state, state);
    await settle();
    expect(await budget.used("parks")).toBe(1);
    // Its job comes back: a worker asks before reading the run, and its answer is lost (killed).
    new IterationLeases(suite, 4).prefetch(state);
    await settle();
    expect(await budget.used("parks")).toBe(2);
    // The next worker makes the run's 2nd call and asks ahead saying 2: the lost lease comes back.
    const b = new IterationLeases(suite, 4);
    b.prefetch(state);
    expect(await call(b, state)).toBeUndefined();
    await settle();
    expect(await budget.used("parks")).toBe(2 + 2);
    Object.assign(state, { phase: "COMMIT", pending: null });
    b.release(state, state);
    await settle();
    expect(await budget.used("parks")).toBe(2);
    const entry = await suite.buckets.pool.get(treeBudgetKey("parks"));
    expect(decode(TreeUsage, entry?.value ?? new Uint8Array()).paid).toEqual({});
    sub.unsubscribe();
  });

  it("a fresh run's first ask says it spent nothing: a worker killed before the run's first call leaves nothing counted", async () => {
    const { budget, sub } = treeSupervisor();
    const state = run("fresh-killed");
    new IterationLeases(suite, 4).prefetch(state, true);
    await settle();
    expect(await budget.used("fresh-killed")).toBe(1);
    // The job delivered again: its worker cannot tell it is fresh, and asks saying nothing.
    const b = new IterationLeases(suite, 4);
    b.prefetch(state);
    expect(await call(b, state)).toBeUndefined();
    await settle();
    // Its first call made, it asks ahead saying 1 is spent: the 1 the killed worker held comes back.
    expect(await budget.used("fresh-killed")).toBe(1 + 2);
    b.release(state, state);
    await settle();
    expect(await budget.used("fresh-killed")).toBe(1);
    sub.unsubscribe();
  });
});
