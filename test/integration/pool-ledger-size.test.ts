import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kvm, type KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { casChange } from "../../shared/bus/cas.js";
import { connectBus } from "../../shared/bus/connect.js";
import { ledgerLimit, ledgerRoom, PoolLedger } from "../../shared/bus/pool.js";
import { provision } from "../../shared/bus/provision.js";
import { Subjects } from "../../shared/bus/subjects.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";

/** A server whose messages carry at most 4 KiB: the pool's ledger then holds a few dozen runs. */
const MAX_PAYLOAD = 4096;
const ID_LENGTH = 60;
const idOf = (i: number): string => `run-${String(i).padStart(ID_LENGTH - 4, "0")}`;

let dir: string;
let server: TestNats;
let nc: NatsConnection;
let pool: KV;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "pool-ledger-"));
  const configFile = join(dir, "nats.conf");
  await writeFile(configFile, `max_payload: ${MAX_PAYLOAD}\n`);
  server = await startNats({ configFile });
  nc = await connectBus({ servers: server.url, name: "pool-ledger-test", logger: silentLogger });
  const subjects = new Subjects(`pl${process.pid}`);
  await provision(nc, { subjects, replicas: 1 });
  pool = await new Kvm(nc).open(subjects.buckets().pool);
});

afterAll(async () => {
  await nc?.drain();
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe("the pool's ledger within the server's max_payload", () => {
  it("a capacity beyond what one value holds: admissions are refused with POOL_FULL at once, and releases still go through", async () => {
    expect(nc.info?.max_payload).toBe(MAX_PAYLOAD);
    const ledger = PoolLedger.of({ buckets: { pool }, clock: systemClock, random: seededRandom(1), nc });
    const holds = ledgerRoom(ledgerLimit(MAX_PAYLOAD), ID_LENGTH);
    expect(holds).toBeGreaterThan(10);
    expect(holds).toBeLessThan(100);

    const started = performance.now();
    const outcomes = await Promise.allSettled(
      Array.from({ length: holds + 20 }, (_, i) => ledger.acquire(idOf(i), 1_000)),
    );
    const refused = outcomes.flatMap((o) =>
      o.status === "rejected" ? [o.reason as { code: string; message: string }] : [],
    );
    expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(holds);
    expect(refused).toHaveLength(20);
    for (const r of refused) {
      expect(r.code).toBe("POOL_FULL");
      expect(r.message).toMatch(/max_payload/);
    }
    // A write the server can never take used to be retried for about 20 s, then failed as INTERNAL.
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(await ledger.active()).toHaveLength(holds);

    // Changes queued together share one write: a release queued with admissions must not be held up by them.
    const [released, ...admitted] = await Promise.allSettled([
      ledger.release(idOf(0)),
      ledger.acquire(idOf(holds + 100), 1_000),
      ledger.acquire(idOf(holds + 101), 1_000),
    ]);
    expect(released).toEqual({ status: "fulfilled", value: "released" });
    expect(admitted.map((o) => o.status).sort()).toEqual(["fulfilled", "rejected"]);
    expect(await ledger.active()).toHaveLength(holds);
  });

  it("a compare-and-set of a value over max_payload fails at once with PAYLOAD_TOO_LARGE, not after its retries", async () => {
    const deps = { kv: pool, clock: systemClock, random: seededRandom(2) };
    const Blob = z.object({ text: z.string() });
    const started = performance.now();
    await expect(
      casChange(deps, "blob", Blob, { text: "" }, () => ({
        result: 1,
        next: { text: "x".repeat(MAX_PAYLOAD) },
      })),
    ).rejects.toMatchObject({ code: "PAYLOAD_TOO_LARGE", retryable: false });
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});
