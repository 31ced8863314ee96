import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectBus } from "../../shared/bus/connect.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { TreeBudget } from "../../shared/bus/tree-budget.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { useBusSuite } from "../helpers/bus-suite.js";

/**
 * Compare-and-set against the revision this process wrote last (KnownRevisions), on a real
 * server: a key's only writer changes it in one round trip, and a value someone else changed
 * since is never decided on.
 */
const suite = useBusSuite("kr");
/** A second supervisor replica: its own connection, its own known revisions. */
let nc2: NatsConnection;

beforeAll(async () => {
  nc2 = await connectBus({
    servers: suite.server.url,
    name: "replica-2",
    logger: silentLogger,
    ...(suite.server.user ? { user: suite.server.user, pass: suite.server.pass ?? "" } : {}),
  });
});
afterAll(async () => {
  await nc2?.close();
});

const budgetOn = async (nc: NatsConnection, seed: number): Promise<TreeBudget> =>
  new TreeBudget({
    kv: await new Kvm(nc).open(suite.subjects.buckets().pool),
    clock: systemClock,
    random: seededRandom(seed),
  });

/** Messages `nc` sent while `during` ran: a KV read, a write or a refused write is one each. */
async function sentDuring(nc: NatsConnection, during: () => Promise<unknown>): Promise<number> {
  const before = nc.stats().outMsgs;
  await during();
  return nc.stats().outMsgs - before;
}

describe("compare-and-set against the revision written last", () => {
  it("a tree's only writer: the first lease reads and creates, every later change is one write", async () => {
    const a = await budgetOn(suite.nc, 1);
    expect(await sentDuring(suite.nc, () => a.lease("t1", "t1", 1, 100))).toBe(2);
    const later = await sentDuring(suite.nc, async () => {
      for (let i = 0; i < 5; i++) await a.lease("t1", "t1", 2, 100);
      await a.giveBack("t1", "t1", 1);
    });
    expect(later).toBe(6);
    expect(await a.used("t1")).toBe(10);
  });

  it("a lease another replica answered in between: the stale write is refused and the lease decided on what it wrote", async () => {
    const [a, b] = [await budgetOn(suite.nc, 2), await budgetOn(nc2, 3)];
    expect(await a.lease("t2", "t2", 2, 5)).toEqual({ granted: 2, used: 2, returned: 0 });
    expect(await b.lease("t2", "t2", 3, 5)).toEqual({ granted: 3, used: 5, returned: 0 });
    // Decided on A's own last value (2 used), this lease would be granted: the tree is at its cap.
    const sent = await sentDuring(suite.nc, () =>
      expect(a.lease("t2", "t2", 1, 5)).rejects.toMatchObject({ code: "GLOBAL_CAP" }),
    );
    expect(sent).toBe(2); // the refused write, then the read
    expect(await a.used("t2")).toBe(5);
  });

  it("a refusal decided on the value written last is decided again on a fresh read", async () => {
    const [a, b] = [await budgetOn(suite.nc, 4), await budgetOn(nc2, 5)];
    expect(await a.lease("t3", "t3", 3, 3)).toEqual({ granted: 3, used: 3, returned: 0 });
    expect(await b.giveBack("t3", "t3", 2)).toEqual({ used: 1, returned: 2 });
    // A last wrote 3 of 3 used; the tree has room again since B took two back.
    expect(await a.lease("t3", "t3", 1, 3)).toEqual({ granted: 1, used: 2, returned: 0 });
  });

  it("replicas taking turns stop writing against stale revisions, and the one left writing starts again", async () => {
    const [a, b] = [await budgetOn(suite.nc, 6), await budgetOn(nc2, 7)];
    const aSent: number[] = [];
    for (let i = 0; i < 40; i++) {
      aSent.push(await sentDuring(suite.nc, () => a.lease("t4", "t4", 1, 1_000)));
      await b.lease("t4", "run-b", 1, 1_000);
    }
    // At first a refused write, a read and a write; once stale revisions are the rule, a read and a write.
    expect(aSent.slice(1, 6)).toEqual([3, 3, 3, 3, 3]);
    expect(aSent.slice(-10)).toEqual(Array.from({ length: 10 }, () => 2));
    const alone: number[] = [];
    for (let i = 0; i < 40; i++) alone.push(await sentDuring(suite.nc, () => a.lease("t4", "t4", 1, 1_000)));
    expect(alone.slice(0, 5)).toEqual([2, 2, 2, 2, 2]);
    expect(alone.slice(-10)).toEqual(Array.from({ length: 10 }, () => 1));
    expect(await a.used("t4")).toBe(120);
  });

  it("the pool ledger: one supervisor's admissions and releases are one write each", async () => {
    const pool = PoolLedger.of({ ...suite, clock: systemClock, random: seededRandom(8) });
    await pool.acquire("run-0", 10);
    const sent = await sentDuring(suite.nc, async () => {
      for (let i = 1; i <= 5; i++) expect(await pool.acquire(`run-${i}`, 10)).toBe("admitted");
      expect(await pool.release("run-3")).toBe("released");
    });
    expect(sent).toBe(6);
    expect((await pool.active()).sort()).toEqual(["run-0", "run-1", "run-2", "run-4", "run-5"]);
  });
});
