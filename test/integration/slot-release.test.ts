import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openActorBus, type ActorBus } from "../../shared/bus/actor.js";
import { publishAudit } from "../../shared/bus/audit.js";
import { POOL_KEY, PoolLedger } from "../../shared/bus/pool.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { RELEASE_CONSUMER, releaseSlots } from "../../services/supervisor/control.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { ActorEnv } from "../../shared/runtime/config.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";

let server: TestNats;
let bus: ActorBus;

beforeAll(async () => {
  server = await startNats();
  bus = await openActorBus(
    ActorEnv.parse({
      NATS_URL: server.url,
      AGENTS_PREFIX: `sr${process.pid}x${Date.now().toString(36)}`,
      ...(server.user ? { NATS_USER: server.user, NATS_PASSWORD: server.pass ?? "" } : {}),
    }),
    "slot-release-test",
    { clock: systemClock, random: seededRandom(5), logger: silentLogger },
  );
}, 30_000);

afterAll(async () => {
  await bus?.nc.drain();
  await server?.stop();
});

function settled(runId: string, kind: "run.committed" | "run.failed" | "run.halted"): AuditEvent {
  return {
    schemaVersion: 1,
    auditId: `${runId}:9`,
    runId,
    rootRunId: runId,
    seq: 9,
    iteration: 1,
    phase: "COMMIT",
    kind,
    actor: "agent",
    status: kind === "run.committed" ? "passed" : "failed",
    artifacts: [],
    timestamp: new Date().toISOString(),
  };
}

/** The ledger key's revision: one per write of the ledger. */
async function ledgerRevision(): Promise<number> {
  return (await bus.buckets.pool.get(POOL_KEY))?.revision ?? 0;
}

describe("the supervisor's slot release loop", () => {
  it("frees the slots of 300 settled runs in a few writes of the ledger, and leaves running runs their slots", async () => {
    const pool = PoolLedger.of(bus);
    const ids = Array.from({ length: 320 }, (_, i) => `run-rel-${i}`);
    await Promise.all(ids.map((id) => pool.acquire(id, 1_000)));
    expect(await pool.active()).toHaveLength(320);

    // A first start creates the loop's durable consumer (it delivers what is published after it):
    // the events then wait for the second start as one backlog, as after a burst of settling runs.
    const first = new AbortController();
    const starting = releaseSlots(bus, pool, first.signal);
    const stream = bus.subjects.streams().audit;
    await expect
      .poll(() => bus.jsm.consumers.info(stream, RELEASE_CONSUMER).catch(() => null), { interval: 20 })
      .toBeTruthy();
    first.abort();
    await starting;
    const kinds = ["run.committed", "run.failed", "run.halted"] as const;
    for (const [i, id] of ids.slice(0, 300).entries()) await publishAudit(bus, settled(id, kinds[i % 3]!));
    const before = await ledgerRevision();
    const stopping = new AbortController();
    const loop = releaseSlots(bus, pool, stopping.signal);

    await expect.poll(async () => (await pool.active()).length, { timeout: 15_000 }).toBe(20);
    stopping.abort();
    await loop;

    expect(new Set(await pool.active())).toEqual(new Set(ids.slice(300)));
    // One write per release when each waits for the one before; queued together they share writes.
    const writes = (await ledgerRevision()) - before;
    expect(writes).toBeGreaterThan(0);
    expect(writes).toBeLessThan(100);
  });
});
