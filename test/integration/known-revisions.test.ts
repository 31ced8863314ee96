import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { casChange } from "../../shared/bus/cas.js";
import { connectBus } from "../../shared/bus/connect.js";
import { KnownRevisions } from "../../shared/bus/known-revisions.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { AgentError } from "../../shared/runtime/errors.js";
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

type Count = z.infer<typeof Count>;
const Count = z.object({ used: z.number().int().nonnegative() });

/**
 * A count under a cap changed by compare-and-set, as a supervisor replica keeps one (its own
 * connection, its own known revisions): `take` refuses what would pass the cap.
 */
async function countOn(nc: NatsConnection, seed: number) {
  const deps = {
    kv: await new Kvm(nc).open(suite.subjects.buckets().pool),
    clock: systemClock,
    random: seededRandom(seed),
    known: new KnownRevisions<Count>(),
  };
  const change = (key: string, by: number, cap = Infinity): Promise<number> =>
    casChange(deps, key, Count, { used: 0 }, (state) => {
      const used = state.used + by;
      if (used > cap) throw new AgentError("GLOBAL_CAP", `${key} is at its cap`);
      return { result: used, next: { used } };
    });
  return {
    take: (key: string, n: number, cap: number) => change(key, n, cap),
    giveBack: (key: string, n: number) => change(key, -n),
    used: async (key: string) => Count.parse((await deps.kv.get(key))?.json()).used,
  };
}

/** Messages `nc` sent while `during` ran: a KV read, a write or a refused write is one each. */
async function sentDuring(nc: NatsConnection, during: () => Promise<unknown>): Promise<number> {
  const before = nc.stats().outMsgs;
  await during();
  return nc.stats().outMsgs - before;
}

describe("compare-and-set against the revision written last", () => {
  it("a key's only writer: the first change reads and creates, every later change is one write", async () => {
    const a = await countOn(suite.nc, 1);
    expect(await sentDuring(suite.nc, () => a.take("t1", 1, 100))).toBe(2);
    const later = await sentDuring(suite.nc, async () => {
      for (let i = 0; i < 5; i++) await a.take("t1", 2, 100);
      await a.giveBack("t1", 1);
    });
    expect(later).toBe(6);
    expect(await a.used("t1")).toBe(10);
  });

  it("a change another replica made in between: the stale write is refused and the change decided on what it wrote", async () => {
    const [a, b] = [await countOn(suite.nc, 2), await countOn(nc2, 3)];
    expect(await a.take("t2", 2, 5)).toBe(2);
    expect(await b.take("t2", 3, 5)).toBe(5);
    // Decided on A's own last value (2), this change would fit: the count is at its cap.
    const sent = await sentDuring(suite.nc, () =>
      expect(a.take("t2", 1, 5)).rejects.toMatchObject({ code: "GLOBAL_CAP" }),
    );
    expect(sent).toBe(2); // the refused write, then the read
    expect(await a.used("t2")).toBe(5);
  });

  it("a refusal decided on the value written last is decided again on a fresh read", async () => {
    const [a, b] = [await countOn(suite.nc, 4), await countOn(nc2, 5)];
    expect(await a.take("t3", 3, 3)).toBe(3);
    expect(await b.giveBack("t3", 2)).toBe(1);
    // A last wrote 3 of 3; there is room again since B took two back.
    expect(await a.take("t3", 1, 3)).toBe(2);
  });

  it("replicas taking turns stop writing against stale revisions, and the one left writing starts again", async () => {
    const [a, b] = [await countOn(suite.nc, 6), await countOn(nc2, 7)];
    const aSent: number[] = [];
    for (let i = 0; i < 40; i++) {
      aSent.push(await sentDuring(suite.nc, () => a.take("t4", 1, 1_000)));
      await b.take("t4", 1, 1_000);
    }
    // At first a refused write, a read and a write; once stale revisions are the rule, a read and a write.
    expect(aSent.slice(1, 6)).toEqual([3, 3, 3, 3, 3]);
    expect(aSent.slice(-10)).toEqual(Array.from({ length: 10 }, () => 2));
    const alone: number[] = [];
    for (let i = 0; i < 40; i++) alone.push(await sentDuring(suite.nc, () => a.take("t4", 1, 1_000)));
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
