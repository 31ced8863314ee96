import { Kvm } from "@nats-io/kv";
import { describe, expect, it } from "vitest";
import { Reconciler } from "../../services/agent/reconcile.js";
import { encode } from "../../shared/bus/codec.js";
import { IdempotencyRecord, idempotencyBucketKey } from "../../shared/bus/idempotency-record.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { acrossCut } from "../helpers/cutting-proxy.js";
import { bucketStream } from "../../shared/bus/subjects.js";

const suite = useBusSuite("sto");

const status = (runId: string, phase: RunStatus["phase"]): RunStatus => ({
  runId,
  status: "running",
  phase,
  iteration: 2,
  usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 1, toolCalls: 1 },
  updatedAt: "2026-11-27T00:00:00.000Z",
});

describe("a worker's reads and writes of statuses and call records across a lost reply", () => {
  it("a status write whose ack is lost is written again once the connection is back, not failed with the client's timeout", async () => {
    const runId = `run-cut-${Date.now()}`;
    const bucket = suite.subjects.buckets().runs;
    await acrossCut(suite.server, `$KV.${bucket}.${runId}`, async (nc) => {
      const kvm = new Kvm(nc);
      const store = new RunStatusStore(await kvm.open(bucket), {
        clock: systemClock,
        random: seededRandom(1),
      });
      return () => store.put(status(runId, "ACT"));
    });
    expect(await new RunStatusStore(suite.buckets.runs).get(runId)).toMatchObject({ phase: "ACT" });
  }, 30_000);

  it("a reconciliation whose read of a call's record is lost reads it again, and learns the call's outcome", async () => {
    const charge = { ...echoTool, name: "charge_cut", idempotent: false };
    const idempotencyKey = `run-cut:act-${Date.now()}`;
    const key = idempotencyBucketKey(charge.name, idempotencyKey);
    const reply = { ok: true as const, output: { text: "charged" } };
    await suite.buckets.idempotency.put(
      key,
      encode(IdempotencyRecord, { status: "done", idempotencyKey, reply }),
    );
    const bucket = suite.subjects.buckets().idempotency;
    const event = await acrossCut(suite.server, bucketStream(bucket), async (nc) => {
      const kvm = new Kvm(nc);
      const reconciler = new Reconciler({
        idempotency: await kvm.open(bucket),
        clock: systemClock,
        random: seededRandom(2),
        logger: silentLogger,
        tool: (name) => (name === charge.name ? charge : undefined),
      });
      const effect = {
        type: "callTool" as const,
        actionId: "act-1",
        tool: charge.name,
        input: {},
        idempotencyKey,
        purpose: "act" as const,
        timeoutMs: 1_000,
      };
      return () => reconciler.outcome(effect, new AbortController().signal);
    });
    expect(event).toMatchObject({ type: "toolCompleted", output: { text: "charged" } });
  }, 30_000);
});
