import { Kvm, type KV } from "@nats-io/kv";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { decode, encode } from "../../shared/bus/codec.js";
import { IdempotencyRecord, idempotencyBucketKey } from "../../shared/bus/idempotency-record.js";
import { settleCall } from "../../shared/bus/tool-settle.js";
import { serveTool } from "../../shared/bus/tool-service.js";
import { SettleReply, type SettleRequest } from "../../shared/contracts/tool-settle.js";
import { ToolCallReply, ToolCallRequest } from "../../shared/contracts/tool.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { httpFetchTool } from "../../shared/tools/builtin/http-fetch.js";
import { ToolInvoker } from "../../shared/tools/invoke.js";
import { defineTool } from "../../shared/tools/tool.js";
import { useBusSuite } from "../helpers/bus-suite.js";

const suite = useBusSuite("ts");
let sideEffects = 0;
const charge = defineTool({
  name: "charge",
  description: "a non-idempotent side effect",
  input: z.object({ cents: z.number() }),
  capability: { kind: "compute" },
  reversibility: "irreversible",
  idempotent: false,
  execute: async (input) => {
    sideEffects++;
    // Long enough that a concurrent duplicate always finds the claim still running.
    await new Promise((r) => setTimeout(r, 200));
    return { output: { charged: input.cents, n: sideEffects } };
  },
});

let lookups = 0;
/**
 * A pure tool whose answer changes from call to call (a price, a search), to tell runs apart: not
 * idempotent, since a repeated call would not get the same answer.
 */
const quote = defineTool({
  name: "quote",
  description: "a pure lookup",
  input: z.object({ symbol: z.string() }),
  capability: { kind: "compute" },
  idempotent: false,
  execute: async () => {
    const n = ++lookups;
    await new Promise((r) => setTimeout(r, 50));
    return { output: { n } };
  },
});
let flakyRuns = 0;
/** A side effect whose first run fails in a way worth retrying (its claim is then freed). */
const flaky = defineTool({
  name: "flaky",
  description: "fails once, then works",
  input: z.object({ n: z.number() }),
  capability: { kind: "compute" },
  reversibility: "irreversible",
  execute: (input) => {
    flakyRuns += 1;
    if (flakyRuns === 1) return Promise.reject(new AgentError("TOOL_UNAVAILABLE", "not yet"));
    return Promise.resolve({ output: { n: input.n, runs: flakyRuns } });
  },
});
let idempotency: KV;
const metrics = new ActorMetrics("tools");

beforeAll(async () => {
  idempotency = await new Kvm(suite.nc).open(suite.subjects.buckets().idempotency);
  const deps = {
    nc: suite.nc,
    subjects: suite.subjects,
    idempotency,
    invoker: new ToolInvoker({ clock: systemClock, random: seededRandom(1), policy: { retries: 0 } }),
    clock: systemClock,
    random: seededRandom(2),
    logger: silentLogger,
    metrics,
  };
  for (const tool of [echoTool, charge, httpFetchTool, quote, flaky]) serveTool(tool, deps);
  await suite.nc.flush();
});

const request = (over: Partial<ToolCallRequest> = {}): ToolCallRequest => ({
  schemaVersion: 1,
  runId: "r1",
  actionId: "a1",
  idempotencyKey: `r1:a1:${Math.random()}`,
  input: { text: "hi" },
  deadline: Date.now() + 10_000,
  ...over,
});

async function call(tool: string, body: Uint8Array): Promise<ToolCallReply> {
  const msg = await suite.nc.request(suite.subjects.tool(tool), body, { timeout: 5_000 });
  return decode(ToolCallReply, msg.data);
}

describe("tools as NATS services", () => {
  it("answers a valid call with the tool's output", async () => {
    expect(await call("echo", encode(ToolCallRequest, request()))).toEqual({
      ok: true,
      output: { text: "hi" },
    });
  });

  it("a repeated idempotency key returns the recorded result and never runs the side effect again", async () => {
    const req = request({ input: { cents: 500 }, idempotencyKey: "r1:charge-1" });
    const [a, b] = await Promise.all([
      call("charge", encode(ToolCallRequest, req)),
      call("charge", encode(ToolCallRequest, req)),
    ]);
    // One call ran; the concurrent one was told it is still running (retryable), not run twice.
    const done = [a, b].filter((r) => r.ok);
    expect(done).toEqual([{ ok: true, output: { charged: 500, n: 1 } }]);
    expect([a, b].find((r) => !r.ok)).toMatchObject({
      ok: false,
      error: { code: "TOOL_IN_PROGRESS", retryable: true },
    });
    expect(await call("charge", encode(ToolCallRequest, req))).toEqual({
      ok: true,
      output: { charged: 500, n: 1 },
    });
    expect(sideEffects).toBe(1);
  });

  it("a retryable failure frees the key's claim: the retry claims the deleted key again, runs, and is recorded", async () => {
    const key = "r1:flaky-1";
    const req = encode(ToolCallRequest, request({ input: { n: 7 }, idempotencyKey: key }));
    expect(await call("flaky", req)).toMatchObject({
      ok: false,
      error: { code: "TOOL_UNAVAILABLE", retryable: true },
    });
    expect((await idempotency.get(idempotencyBucketKey("flaky", key)))?.operation).toBe("DEL");
    expect(await call("flaky", req)).toEqual({ ok: true, output: { n: 7, runs: 2 } });
    expect(await call("flaky", req)).toEqual({ ok: true, output: { n: 7, runs: 2 } });
    expect(flakyRuns).toBe(2);
  });

  it("a call that finds the key claimed by itself (its create landed, its ack was lost in an outage) runs; a twin's claim is still 'in progress'", async () => {
    let runs = 0;
    const once = defineTool({
      name: "claim_once",
      description: "a side effect",
      input: z.object({}),
      capability: { kind: "compute" },
      reversibility: "irreversible",
      idempotent: false,
      execute: () => Promise.resolve({ output: { run: ++runs } }),
    });
    // The service's first draw from its random is the claim's id: known here from the same seed.
    serveTool(once, {
      nc: suite.nc,
      subjects: suite.subjects,
      idempotency,
      invoker: new ToolInvoker({ clock: systemClock, random: seededRandom(1), policy: { retries: 0 } }),
      clock: systemClock,
      random: seededRandom(77),
      logger: silentLogger,
    });
    await suite.nc.flush();
    const ownId = Math.floor(seededRandom(77).next() * 2 ** 52).toString(36);
    const claimed = (idempotencyKey: string, claimId: string): Uint8Array =>
      encode(IdempotencyRecord, { status: "running", idempotencyKey, since: Date.now(), claimId });
    await idempotency.put(idempotencyBucketKey("claim_once", "r1:own"), claimed("r1:own", ownId));
    const own = request({ input: {}, idempotencyKey: "r1:own" });
    expect(await call("claim_once", encode(ToolCallRequest, own))).toEqual({ ok: true, output: { run: 1 } });
    await idempotency.put(idempotencyBucketKey("claim_once", "r1:twin"), claimed("r1:twin", "someone-else"));
    const twin = request({ input: {}, idempotencyKey: "r1:twin" });
    expect(await call("claim_once", encode(ToolCallRequest, twin))).toMatchObject({
      ok: false,
      error: { code: "TOOL_IN_PROGRESS" },
    });
    expect(runs).toBe(1);
  });

  it("a pure tool runs without a claim, records its reply once, and every answer for a key is the recorded one", async () => {
    const key = "r1:quote-1";
    const req = request({ input: { symbol: "ACME" }, idempotencyKey: key });
    const bucketKey = idempotencyBucketKey("quote", key);
    const first = call("quote", encode(ToolCallRequest, req));
    // No claim while it runs: the only write is the recorded reply.
    await new Promise((r) => setTimeout(r, 20));
    expect(await idempotency.get(bucketKey)).toBeNull();
    // A twin arriving while the first runs runs too (harmless: no side effect) but gets the first's reply.
    const twin = call("quote", encode(ToolCallRequest, req));
    const [a, b] = await Promise.all([first, twin]);
    expect(a).toEqual({ ok: true, output: { n: 1 } });
    expect(b).toEqual(a);
    expect(lookups).toBe(2);
    const entry = await idempotency.get(bucketKey);
    expect(entry?.revision).toBeDefined();
    expect(decode(IdempotencyRecord, entry?.value ?? new Uint8Array())).toMatchObject({
      status: "done",
      reply: { ok: true, output: { n: 1 } },
    });
    // A retry after the record exists gets the recorded reply as well.
    expect(await call("quote", encode(ToolCallRequest, req))).toEqual({ ok: true, output: { n: 1 } });
  });

  it("a pure, idempotent tool keeps no record: a repeated key runs again, and the bucket has nothing of it", async () => {
    const key = "r1:echo-again";
    const req = encode(ToolCallRequest, request({ input: { text: "again" }, idempotencyKey: key }));
    const ran = async (): Promise<number> =>
      (await metrics.toolCalls.get()).values.find(
        (v) => v.labels.tool === "echo" && v.labels.outcome === "ok",
      )?.value ?? 0;
    const before = await ran();
    expect(await call("echo", req)).toEqual({ ok: true, output: { text: "again" } });
    expect(await call("echo", req)).toEqual({ ok: true, output: { text: "again" } });
    expect((await ran()) - before).toBe(2);
    expect(await idempotency.get(idempotencyBucketKey("echo", key))).toBeNull();
  });

  it("malformed JSON and schema-invalid payloads get INVALID_INPUT and the service keeps serving", async () => {
    const garbage = await call("echo", new TextEncoder().encode("{nope"));
    expect(garbage).toMatchObject({ ok: false, error: { code: "INVALID_INPUT", retryable: false } });
    const wrongShape = await call(
      "echo",
      new TextEncoder().encode(JSON.stringify({ schemaVersion: 1, runId: "bad id" })),
    );
    expect(wrongShape).toMatchObject({ ok: false, error: { code: "INVALID_INPUT" } });
    const badInput = await call("echo", encode(ToolCallRequest, request({ input: { text: 42 } })));
    expect(badInput).toMatchObject({ ok: false, error: { code: "INVALID_INPUT" } });
    expect(await call("echo", encode(ToolCallRequest, request()))).toMatchObject({ ok: true });
  });

  it("a call past its deadline is refused without running", async () => {
    const before = sideEffects;
    const late = await call(
      "charge",
      encode(ToolCallRequest, request({ input: { cents: 1 }, deadline: Date.now() - 1 })),
    );
    expect(late).toMatchObject({ ok: false, error: { code: "TOOL_TIMEOUT", retryable: true } });
    expect(sideEffects).toBe(before);
  });

  it("an allowlist tool runs only under the caller's grant", async () => {
    const none = await call(
      "http_fetch",
      encode(ToolCallRequest, request({ input: { url: "http://127.0.0.1:9/" } })),
    );
    expect(none).toMatchObject({ ok: false, error: { code: "CAPABILITY_DENIED" } });
    expect(JSON.stringify(none)).toContain("carries none");
    const blocked = await call(
      "http_fetch",
      encode(
        ToolCallRequest,
        request({
          input: { url: "http://blocked.invalid/" },
          grant: { kind: "network", allowedHosts: ["127.0.0.1"] },
        }),
      ),
    );
    expect(blocked).toMatchObject({ ok: false, error: { code: "HOST_NOT_ALLOWED" } });
    expect(JSON.stringify(blocked)).toContain("not in allowed_hosts");
  });
});

describe("settling the call a halted run waited on", () => {
  const settle = (
    idempotencyKey: string,
    decision: SettleRequest["decision"] = "abandon",
    output?: unknown,
  ): Promise<SettleReply> =>
    settleCall(
      suite.nc,
      suite.subjects,
      "charge",
      {
        schemaVersion: 1,
        runId: "r1",
        actionId: "a1",
        idempotencyKey,
        by: "oncall",
        reason: "wrong order",
        decision,
        ...(output === undefined ? {} : { output }),
      },
      5_000,
    );
  const charge = (idempotencyKey: string, cents: number): Promise<ToolCallReply> =>
    call("charge", encode(ToolCallRequest, request({ input: { cents }, idempotencyKey })));
  /** A claim left running, as a service that died mid-call (or a call that hung) leaves it. */
  const claimed = async (idempotencyKey: string): Promise<void> => {
    const claim = { status: "running", idempotencyKey, since: Date.now() - 60_000 } as const;
    await idempotency.create(
      idempotencyBucketKey("charge", idempotencyKey),
      encode(IdempotencyRecord, claim),
    );
  };

  it("abandoned, a call that never ran never will; one that ran, or is running, is told as it is", async () => {
    const before = sideEffects;
    const never = `r1:abandon-never:${Math.random()}`;
    expect(await settle(never)).toEqual({ outcome: "abandoned" });
    // Its copy still in flight from the halted worker arrives late: answered, not run.
    expect(await charge(never, 9)).toMatchObject({
      ok: false,
      error: {
        code: "RUN_CANCELLED",
        message: "the run was cancelled by oncall before this call ran: wrong order",
      },
    });
    expect(sideEffects).toBe(before);
    expect(await settle(never)).toMatchObject({ outcome: "done", reply: { ok: false } });

    const ran = `r1:abandon-ran:${Math.random()}`;
    const reply = await charge(ran, 3);
    expect(reply.ok).toBe(true);
    expect(await settle(ran)).toEqual({ outcome: "done", reply });

    const running = `r1:abandon-running:${Math.random()}`;
    const slow = charge(running, 4);
    await new Promise((r) => setTimeout(r, 80));
    expect(await settle(running)).toMatchObject({ outcome: "running", since: expect.any(Number) as unknown });
    const done = await slow;
    expect(done).toMatchObject({ ok: true, output: { charged: 4 } });
    expect(await settle(running)).toEqual({ outcome: "done", reply: done });
    expect(sideEffects).toBe(before + 2);
  });

  it("a human's 'ran' records the output as the call's result and 'not run' frees its claim; a finished call's record is never replaced", async () => {
    const before = sideEffects;
    const ran = `r1:by-hand-ran:${Math.random()}`;
    await claimed(ran);
    expect(await charge(ran, 5)).toMatchObject({ ok: false, error: { code: "TOOL_IN_PROGRESS" } });
    expect(await settle(ran, "ran", { charged: 5, checkedBy: "oncall" })).toEqual({ outcome: "recorded" });
    // The call made again is answered from the record, and runs nothing.
    expect(await charge(ran, 5)).toEqual({ ok: true, output: { charged: 5, checkedBy: "oncall" } });

    const notRun = `r1:by-hand-not-run:${Math.random()}`;
    await claimed(notRun);
    expect(await settle(notRun, "notRun")).toEqual({ outcome: "freed" });
    expect(await settle(notRun, "notRun")).toEqual({ outcome: "freed" });
    // Made again, it runs.
    expect(await charge(notRun, 6)).toMatchObject({ ok: true, output: { charged: 6 } });
    expect(sideEffects).toBe(before + 1);

    const key = `r1:by-hand-done:${Math.random()}`;
    const truth = await charge(key, 8);
    expect(truth.ok).toBe(true);
    expect(await settle(key, "ran", { charged: 0 })).toEqual({ outcome: "done", reply: truth });
    expect(await settle(key, "notRun")).toEqual({ outcome: "done", reply: truth });
    expect(await charge(key, 8)).toEqual(truth);
  });

  it("a settle asked while nobody serves the tool yet (its service restarting) waits for one, when told to", async () => {
    const later = defineTool({
      name: "later",
      description: "served a moment after it is asked",
      input: z.object({}),
      capability: { kind: "compute" },
      reversibility: "irreversible",
      execute: () => Promise.resolve({ output: {} }),
    });
    const request = {
      schemaVersion: 1,
      runId: "r1",
      actionId: "a1",
      idempotencyKey: `r1:later:${Math.random()}`,
      by: "oncall",
      reason: "r",
      decision: "abandon",
    } as const;
    await expect(settleCall(suite.nc, suite.subjects, "later", request, 1_000)).rejects.toMatchObject({
      code: "TOOL_UNAVAILABLE",
    });
    const wait = { waitMs: 5_000, clock: systemClock, random: seededRandom(3) };
    const settled = settleCall(suite.nc, suite.subjects, "later", request, 1_000, wait);
    await new Promise((r) => setTimeout(r, 300));
    const subs = serveTool(later, {
      nc: suite.nc,
      subjects: suite.subjects,
      idempotency,
      invoker: new ToolInvoker({ clock: systemClock, random: seededRandom(4), policy: { retries: 0 } }),
      clock: systemClock,
      random: seededRandom(5),
      logger: silentLogger,
    });
    expect(await settled).toEqual({ outcome: "abandoned" });
    for (const sub of subs) sub.unsubscribe();
  });

  it("a bad settle request is refused with INVALID_INPUT, and the service keeps serving", async () => {
    const msg = await suite.nc.request(
      suite.subjects.toolSettle("charge"),
      new TextEncoder().encode("{nope"),
      {
        timeout: 5_000,
      },
    );
    expect(decode(SettleReply, msg.data)).toMatchObject({
      outcome: "refused",
      error: { code: "INVALID_INPUT" },
    });
    const counted = (await metrics.badRequests.get()).values;
    expect(counted).toEqual([{ value: 1, labels: { subject: suite.subjects.toolSettle("charge") } }]);
    expect(await settle(`r1:after-bad:${Math.random()}`)).toEqual({ outcome: "abandoned" });
  });
});
