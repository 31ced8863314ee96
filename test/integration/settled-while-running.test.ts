import { Kvm, type KV } from "@nats-io/kv";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { decode, encode } from "../../shared/bus/codec.js";
import { IdempotencyRecord, idempotencyBucketKey } from "../../shared/bus/idempotency-record.js";
import { settleCall } from "../../shared/bus/tool-settle.js";
import { serveTool } from "../../shared/bus/tool-service.js";
import type { SettleReply, SettleRequest } from "../../shared/contracts/tool-settle.js";
import { ToolCallReply, ToolCallRequest } from "../../shared/contracts/tool.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { ToolInvoker } from "../../shared/tools/invoke.js";
import { defineTool } from "../../shared/tools/tool.js";
import { useBusSuite } from "../helpers/bus-suite.js";

const suite = useBusSuite("sw");
let idempotency: KV;

/** The calls of `gated` under way, each waiting for the test to say how it ends. */
const open: ((ending: "ok" | "retryable") => void)[] = [];
let runs = 0;
/** A side effect that ends when the test says, so that a human can settle it while it runs. */
const gated = defineTool({
  name: "gated",
  description: "a non-idempotent side effect the test finishes",
  input: z.object({ cents: z.number() }),
  capability: { kind: "compute" },
  reversibility: "irreversible",
  idempotent: false,
  timeoutMs: 20_000,
  execute: async (input) => {
    const run = ++runs;
    const ending = await new Promise<"ok" | "retryable">((resolve) => open.push(resolve));
    if (ending === "retryable") throw new AgentError("TOOL_UNAVAILABLE", "the gateway said try later");
    return { output: { charged: input.cents, run } };
  },
});

beforeAll(async () => {
  idempotency = await new Kvm(suite.nc).open(suite.subjects.buckets().idempotency);
  serveTool(gated, {
    nc: suite.nc,
    subjects: suite.subjects,
    idempotency,
    invoker: new ToolInvoker({ clock: systemClock, random: seededRandom(1), policy: { retries: 0 } }),
    clock: systemClock,
    random: seededRandom(2),
    logger: silentLogger,
  });
  await suite.nc.flush();
});

/**
 * Makes a call of `gated` and waits until it runs (it has claimed its key); its reply comes later
 * (wrapped: an async function returning a promise would wait for it).
 */
async function started(idempotencyKey: string, cents: number): Promise<{ reply: Promise<ToolCallReply> }> {
  const before = open.length;
  const request: ToolCallRequest = {
    schemaVersion: 1,
    runId: "r1",
    actionId: "a1",
    idempotencyKey,
    input: { cents },
    deadline: Date.now() + 20_000,
  };
  const reply = suite.nc
    .request(suite.subjects.tool("gated"), encode(ToolCallRequest, request), { timeout: 20_000 })
    .then((msg) => decode(ToolCallReply, msg.data));
  await expect.poll(() => open.length, { timeout: 5_000 }).toBe(before + 1);
  return { reply };
}

/** Ends the oldest call still open. */
function finish(ending: "ok" | "retryable"): void {
  const end = open.shift();
  if (!end) throw new Error("no call is open");
  end(ending);
}

function settle(
  idempotencyKey: string,
  decision: SettleRequest["decision"],
  output?: unknown,
): Promise<SettleReply> {
  return settleCall(
    suite.nc,
    suite.subjects,
    "gated",
    {
      schemaVersion: 1,
      runId: "r1",
      actionId: "a1",
      idempotencyKey,
      by: "oncall",
      reason: "the worker lost the call",
      decision,
      ...(output === undefined ? {} : { output }),
    },
    5_000,
  );
}

async function recorded(idempotencyKey: string): Promise<IdempotencyRecord | undefined> {
  const entry = await idempotency.get(idempotencyBucketKey("gated", idempotencyKey));
  return entry?.operation === "PUT" ? decode(IdempotencyRecord, entry.value) : undefined;
}

describe("a call settled by a human while it still runs", () => {
  it("'ran': the human's record stands when the call ends, and every answer for the key is the record's", async () => {
    const key = `r1:ran-while-running:${Math.random()}`;
    const { reply: late } = await started(key, 5);
    const byHand = { charged: 5, checkedBy: "oncall" };
    expect(await settle(key, "ran", byHand)).toEqual({ outcome: "recorded" });
    finish("ok");
    // The late reply is the record's, as the run that went on from the human's answer saw it.
    expect(await late).toEqual({ ok: true, output: byHand });
    expect(await recorded(key)).toMatchObject({ status: "done", reply: { ok: true, output: byHand } });
  });

  it("'ran', then the call fails in a way worth retrying: the human's record stays, not freed for a retry", async () => {
    const key = `r1:ran-then-retryable:${Math.random()}`;
    const { reply: late } = await started(key, 6);
    expect(await settle(key, "ran", { charged: 6 })).toEqual({ outcome: "recorded" });
    finish("retryable");
    expect(await late).toMatchObject({ ok: false, error: { code: "TOOL_UNAVAILABLE" } });
    expect(await recorded(key)).toMatchObject({
      status: "done",
      reply: { ok: true, output: { charged: 6 } },
    });
  });

  it("'not run', then the call ends: its outcome is recorded, and the call made again is answered from it, not run twice", async () => {
    const key = `r1:not-run-while-running:${Math.random()}`;
    const { reply: first } = await started(key, 7);
    expect(await settle(key, "notRun")).toEqual({ outcome: "freed" });
    finish("ok");
    const truth = await first;
    expect(truth).toMatchObject({ ok: true, output: { charged: 7 } });
    const before = runs;
    const again = await suite.nc.request(
      suite.subjects.tool("gated"),
      encode(ToolCallRequest, {
        schemaVersion: 1,
        runId: "r1",
        actionId: "a1",
        idempotencyKey: key,
        input: { cents: 7 },
        deadline: Date.now() + 10_000,
      }),
      { timeout: 5_000 },
    );
    expect(decode(ToolCallReply, again.data)).toEqual(truth);
    expect(runs).toBe(before);
  });

  it("'not run', and the call made again claims the key before the first ends: the first's outcome does not replace the second's claim", async () => {
    const key = `r1:not-run-then-again:${Math.random()}`;
    const { reply: first } = await started(key, 8);
    expect(await settle(key, "notRun")).toEqual({ outcome: "freed" });
    const { reply: second } = await started(key, 8);
    finish("ok");
    expect(await first).toMatchObject({ ok: true, output: { charged: 8 } });
    // The second still runs: its claim is the record, not the first's outcome.
    expect(await recorded(key)).toMatchObject({ status: "running" });
    finish("ok");
    const secondReply = await second;
    expect(await recorded(key)).toEqual({ status: "done", idempotencyKey: key, reply: secondReply });
  });
});
