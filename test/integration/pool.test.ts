import { Kvm } from "@nats-io/kv";
import { describe, expect, it } from "vitest";
import { connectBus } from "../../shared/bus/connect.js";
import { ledgerLimit, POOL_KEY, PoolLedger, PoolState } from "../../shared/bus/pool.js";
import { decode } from "../../shared/bus/codec.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { useBusSuite } from "../helpers/bus-suite.js";

const suite = useBusSuite("p");

describe("pool admission with compare-and-set (two supervisor replicas)", () => {
  it("50 concurrent admissions across two replicas, capacity 5: exactly 5 admitted, never more than 5 active", async () => {
    const bucket = suite.subjects.buckets().pool;
    // A second connection stands in for a second supervisor replica.
    const nc2 = await connectBus({
      servers: suite.server.url,
      name: "replica-2",
      logger: silentLogger,
      ...(suite.server.user ? { user: suite.server.user, pass: suite.server.pass ?? "" } : {}),
    });
    const replicas = [
      new PoolLedger({
        kv: await new Kvm(suite.nc).open(bucket),
        clock: systemClock,
        random: seededRandom(1),
        maxBytes: ledgerLimit(suite.nc.info?.max_payload),
      }),
      new PoolLedger({
        kv: await new Kvm(nc2).open(bucket),
        clock: systemClock,
        random: seededRandom(2),
        maxBytes: ledgerLimit(nc2.info?.max_payload),
      }),
    ];
    // Sample every revision of the ledger while the race runs.
    const seen: number[] = [];
    const watcher = await (await new Kvm(suite.nc).open(bucket)).watch({ key: POOL_KEY });
    const watching = (async () => {
      for await (const entry of watcher)
        if (entry.operation === "PUT") seen.push(decode(PoolState, entry.value).active.length);
    })();

    const outcomes = await Promise.allSettled(
      Array.from({ length: 50 }, (_, i) => (replicas[i % 2] as PoolLedger).acquire(`run-${i}`, 5)),
    );
    const admitted = outcomes.filter((o) => o.status === "fulfilled");
    const refused = outcomes.flatMap((o) => (o.status === "rejected" ? [o.reason as { code: string }] : []));
    expect(admitted).toHaveLength(5);
    expect(refused).toHaveLength(45);
    expect(new Set(refused.map((r) => r.code))).toEqual(new Set(["POOL_FULL"]));
    expect(await replicas[0]?.active()).toHaveLength(5);

    await new Promise((r) => setTimeout(r, 200));
    watcher.stop();
    await watching;
    // Admissions queued on one replica share a compare-and-set: far fewer writes than requests.
    expect(seen.length).toBeGreaterThanOrEqual(1);
    expect(seen.length).toBeLessThan(10);
    expect(Math.max(...seen)).toBeLessThanOrEqual(5);
    await nc2.close();
  });

  it("admission is idempotent per run, and a released slot can be taken again", async () => {
    const ledger = new PoolLedger({
      kv: await new Kvm(suite.nc).open(suite.subjects.buckets().pool),
      clock: systemClock,
      random: seededRandom(3),
      maxBytes: ledgerLimit(suite.nc.info?.max_payload),
    });
    const [first] = await ledger.active();
    expect(first).toBeDefined();
    await expect(ledger.acquire(first as string, 5)).resolves.toBe("existing");
    await expect(ledger.acquire("newcomer", 5)).rejects.toMatchObject({ code: "POOL_FULL", retryable: true });
    expect(await ledger.release(first as string)).toBe("released");
    expect(await ledger.release(first as string)).toBe("absent");
    await expect(ledger.acquire("newcomer", 5)).resolves.toBe("admitted");
    expect(await ledger.active()).toHaveLength(5);
  });

  it("a slot taken after a halt is kept from that halt's late release, and counted in the ledger's size", async () => {
    const kv = await new Kvm(suite.nc).open(suite.subjects.buckets().pool);
    await kv.delete(POOL_KEY);
    const stored = JSON.stringify({ active: ["run-r"], resumedAfter: { "run-r": 12345 } });
    const read = async (): Promise<string> => new TextDecoder().decode((await kv.get(POOL_KEY))?.value);
    // The ledger's size is counted with a comma too many in each list; room is left for one more
    // id of 5 characters (8 bytes with its quotes and comma).
    const ledger = new PoolLedger({
      kv,
      clock: systemClock,
      random: seededRandom(4),
      maxBytes: stored.length + 2 + 8,
    });
    await expect(ledger.acquire("run-r", 5)).resolves.toBe("admitted");
    await expect(ledger.acquire("run-r", 5, { after: 12345 })).resolves.toBe("existing");
    expect(await read()).toBe(stored);
    // Nine digits more would not fit: refused, and what is queued with it sees the ledger as it was.
    // (The first change starts a write; the two after it are queued meanwhile, and share the next.)
    const [, refused, admitted] = await Promise.allSettled([
      ledger.release("run-none"),
      ledger.acquire("run-r", 5, { after: 12345678901234 }),
      ledger.acquire("run-t", 5),
    ]);
    expect(refused).toMatchObject({ status: "rejected", reason: { code: "POOL_FULL" } });
    expect(admitted).toEqual({ status: "fulfilled", value: "admitted" });
    expect(await read()).toBe(
      JSON.stringify({ active: ["run-r", "run-t"], resumedAfter: { "run-r": 12345 } }),
    );
    await expect(ledger.release("run-t")).resolves.toBe("released");
    await expect(ledger.release("run-r", 12000)).resolves.toBe("earlier");
    await expect(ledger.release("run-r", 12345)).resolves.toBe("earlier");
    expect(await ledger.active()).toEqual(["run-r"]);
    await expect(ledger.release("run-r", 12346)).resolves.toBe("released");
    expect(decode(PoolState, (await kv.get(POOL_KEY))?.value ?? new Uint8Array())).toEqual({ active: [] });
    await expect(ledger.release("run-r", 12346)).resolves.toBe("absent");
    // A release with no event (a caller that knows none) frees a resumed slot too.
    await ledger.acquire("run-s", 5, { after: 7 });
    await expect(ledger.release("run-s")).resolves.toBe("released");
  });
});
