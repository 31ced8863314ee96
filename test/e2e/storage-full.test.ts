import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { StorageType } from "@nats-io/jetstream";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { decode } from "../../shared/bus/codec.js";
import { IdempotencyRecord, idempotencyBucketKey } from "../../shared/bus/idempotency-record.js";
import { isStorageFull } from "../../shared/bus/storage-full.js";
import { defineTool } from "../../shared/tools/tool.js";
import { expectChargesInTrail, serveCharge, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { until } from "../helpers/until.js";
import { readProgress } from "../../shared/bus/run-progress.js";

/** A server whose JetStream store is small enough for a test to fill. */
const configDir = mkdtempSync(join(tmpdir(), "storage-full-"));
const configFile = join(configDir, "nats.conf");
writeFileSync(configFile, "jetstream {\n  max_file_store: 6MB\n}\n");
afterAll(() => rmSync(configDir, { recursive: true, force: true }));

const suite = useClusterSuite("storagefull", {
  configFile,
  actors: [
    { kind: "supervisor" },
    { kind: "tools", env: { TOOLS: "echo" } },
    { kind: "agent", name: "agent-1" },
    { kind: "agent", name: "agent-2" },
  ],
  // A run handed back for a full store is offered again after 0.3 s, 0.6 s, 1.2 s…
  env: { AGENT_RETRY_DELAY_MS: "300" },
});

const FILLER = "FILLER";
const FILLER_MESSAGE = new Uint8Array(64 * 1024);

/** Fills the server's store with a stream of the test's own, until JetStream refuses for room. */
async function fillStore(): Promise<void> {
  const { jsm, js } = suite.bus;
  await jsm.streams.add({ name: FILLER, subjects: [`${suite.prefix}-filler`], storage: StorageType.File });
  for (let i = 0; i < 1_000; i++) {
    try {
      await js.publish(`${suite.prefix}-filler`, FILLER_MESSAGE);
    } catch (err) {
      if (isStorageFull(err)) return;
      throw err;
    }
  }
  throw new Error("the store never filled");
}

/** The operator's fix: the room the filler took is back. */
async function makeRoom(): Promise<void> {
  await suite.bus.jsm.streams.delete(FILLER);
}

describe("a NATS server whose JetStream storage is full", () => {
  it("a submit is refused at once with STORAGE_FULL and recorded nowhere; asked again under its id once there is room, the run is admitted and commits", async () => {
    await fillStore();
    const runId = "sf-named";
    const started = Date.now();
    const refused = await suite.client.submit({ ...spec(), runId }).catch((err: unknown) => err);
    expect(refused).toMatchObject({ code: "STORAGE_FULL", retryable: true });
    expect((refused as Error).message).toMatch(/storage is full.*max_file_store/);
    // Neither retried as contention (200 attempts) nor waited out as an outage (15 s).
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await suite.client.status.read(runId)).toBeUndefined();
    expect(await suite.audit(runId)).toEqual([]);

    await makeRoom();
    const again = await suite.client.submit({ ...spec(), runId });
    expect(again).toMatchObject({ runId, status: "admitted" });
    expect(await suite.waitFor(runId, settled)).toMatchObject({ status: "committed" });
  }, 60_000);

  it("a run the full store stops mid-way is handed back, not failed, and goes on from where it stopped once there is room: every charge once, the trail gapless", async () => {
    // Each charge takes 20 ms: the run is still going when the store fills up under it.
    const charge = serveCharge(suite, 20);
    const steps = Array.from({ length: 36 }, (_, i) =>
      i % 2 === 0
        ? { toolCalls: [{ name: "charge", input: { amount: i + 1 } }] }
        : { toolCalls: [{ name: "echo", input: { text: `${i}`.padEnd(2_000, "x") } }] },
    );
    const { runId } = await suite.client.submit(
      spec({
        script: [...steps, { toolCalls: [{ name: "finish", input: { answer: "paid" } }] }],
        tools: ["charge", "echo"],
        resources: { maxIterations: 50, maxToolCalls: 50 },
      }),
    );
    await suite.waitFor(runId, (s) => s.iteration >= 4);
    await fillStore();
    // Its worker hands it back, saying why.
    await until(
      async () =>
        (await suite.logs()).split("\n").some((l) => l.includes(runId) && l.includes('"STORAGE_FULL"')),
      20_000,
      { what: "the run handed back for a full store", everyMs: 200 },
    );
    // Stopped part-way: its status not finished, its progress (from its log) short of the end.
    expect((await suite.client.status.get(runId))?.status).toMatch(/^(queued|running)$/);
    const stopped = await readProgress(suite.bus, runId);
    expect(stopped?.iteration).toBeGreaterThanOrEqual(4);
    expect(stopped?.iteration).toBeLessThan(steps.length);

    await makeRoom();
    const status = await suite.waitFor(runId, settled, 40_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "paid" } });
    const events = await expectChargesInTrail(suite, runId, "charge", charge.executions);
    expect([...charge.executions.entries()].filter(([key]) => key.startsWith(`${runId}:`))).toHaveLength(18);
    expect([...charge.executions.values()].every((n) => n === 1)).toBe(true);
    // Nothing the full store did is told to the model as a tool's failure.
    expect(events.filter((e) => e.kind === "tool.aborted")).toEqual([]);
    expect(events.filter((e) => e.kind === "run.resumed").length).toBeGreaterThan(0);
  }, 90_000);

  it("a call that ran as the store filled keeps its outcome: its service records it once there is room, and the run goes on from it without calling it again", async () => {
    const executions = new Map<string, number>();
    let entered: (key: string) => void = () => undefined;
    const started = new Promise<string>((resolve) => (entered = resolve));
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    suite.serveTool(
      defineTool({
        name: "book",
        description: "Books a room (a side effect that must happen once).",
        input: z.object({}),
        capability: { kind: "compute" },
        reversibility: "irreversible",
        idempotent: false,
        execute: async (_input, ctx) => {
          executions.set(ctx.idempotencyKey, (executions.get(ctx.idempotencyKey) ?? 0) + 1);
          entered(ctx.idempotencyKey);
          await gate;
          return { output: { booked: true } };
        },
      }),
    );
    const { runId } = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "book", input: {} }] },
          { toolCalls: [{ name: "finish", input: { answer: "booked" } }] },
        ],
        tools: ["book"],
      }),
    );
    const key = await started;
    await fillStore();
    release();
    await until(
      async () =>
        (await suite.logs()).split("\n").some((l) => l.includes(runId) && l.includes('"STORAGE_FULL"')),
      20_000,
      { what: "the run handed back for a full store", everyMs: 200 },
    );
    // The call's claim could not be turned into its outcome yet.
    const claim = await suite.bus.buckets.idempotency.get(idempotencyBucketKey("book", key));
    expect(claim && decode(IdempotencyRecord, claim.value).status).toBe("running");

    await makeRoom();
    const status = await suite.waitFor(runId, settled, 40_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "booked" } });
    expect(executions.get(key)).toBe(1);
    const events = await suite.audit(runId);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.kind === "tool.completed" && e.actor === "tool:book")).toHaveLength(1);
    expect(events.filter((e) => e.kind === "tool.aborted")).toEqual([]);
  }, 90_000);
});
