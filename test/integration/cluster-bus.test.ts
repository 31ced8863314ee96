import { Writable } from "node:stream";
import { AckPolicy, type JsMsg } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { CriticReviewReply } from "../../shared/contracts/cluster.js";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import { auditCount } from "../../shared/bus/audit.js";
import { publishEvent } from "../helpers/log.js";
import { encode } from "../../shared/bus/codec.js";
import { remoteCritic } from "../../shared/bus/critic-client.js";
import { ensureWorkerConsumer, WORKER_CONSUMER } from "../../shared/bus/jobs.js";
import { KvMemory, memoryReads } from "../../shared/bus/kv-memory.js";
import { describeRemoteTool, discoverTools, remoteTool } from "../../shared/bus/remote-tool.js";
import { requestJson } from "../../shared/bus/request.js";
import { failureReply, serve } from "../../shared/bus/serve.js";
import { IdempotencyRecord, idempotencyBucketKey } from "../../shared/bus/idempotency-record.js";
import { serveTool } from "../../shared/bus/tool-service.js";
import { startRun } from "../../shared/loop/fsm.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { createLogger, silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { createMemoryTool } from "../../shared/tools/builtin/memory.js";
import { ToolInvoker } from "../../shared/tools/invoke.js";
import { describeTool } from "../../shared/tools/tool.js";
import { Reconciler } from "../../services/agent/reconcile.js";
import { review } from "../../services/critic/review.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { spec, START, toolCtx } from "../helpers/fixtures.js";

const suite = useBusSuite("cb");
const Ping = z.object({ n: z.number() });

const verdict = (passed: boolean) =>
  JSON.stringify({
    scores: { correctness: passed ? 1 : 0.1, completeness: 1, coherence: 1, safety: 1 },
    defects: [],
    repairHints: [],
    passed,
  });

describe("request/reply on the bus", () => {
  it("nobody serving and no reply in time become stable codes", async () => {
    const ask = (subject: string, codes: { unavailable?: "TOOL_UNAVAILABLE"; timeout?: "TOOL_TIMEOUT" }) =>
      requestJson(suite.nc, subject, { schema: Ping, value: { n: 1 } }, Ping, { timeoutMs: 300, ...codes });
    await expect(
      ask(`${suite.subjects.prefix}.nobody`, { unavailable: "TOOL_UNAVAILABLE" }),
    ).rejects.toMatchObject({
      code: "TOOL_UNAVAILABLE",
    });
    const silent = suite.nc.subscribe(`${suite.subjects.prefix}.silent`);
    await expect(ask(`${suite.subjects.prefix}.silent`, { timeout: "TOOL_TIMEOUT" })).rejects.toMatchObject({
      code: "TOOL_TIMEOUT",
    });
    silent.unsubscribe();
    const bad = suite.nc.subscribe(`${suite.subjects.prefix}.bad`, {
      callback: (_e, m) => void m.respond("{"),
    });
    await expect(ask(`${suite.subjects.prefix}.bad`, {})).rejects.toMatchObject({ code: "INVALID_INPUT" });
    bad.unsubscribe();
  });

  it("a service answers failures with its structured error reply, counts them and keeps serving", async () => {
    const subject = `${suite.subjects.prefix}.svc`;
    const Reply = z.object({ ok: z.boolean(), n: z.number() });
    const sub = serve(suite.nc, subject, {
      queue: "svc",
      reply: Reply,
      logger: silentLogger,
      handle: (msg) => {
        const n = Ping.parse(JSON.parse(new TextDecoder().decode(msg.data)));
        if (n.n < 0) return Promise.reject(new Error("negative"));
        return Promise.resolve({ ok: true, n: n.n * 2 });
      },
      onError: () => ({ ok: false, n: -1 }),
    });
    const call = (n: number) =>
      requestJson(suite.nc, subject, { schema: Ping, value: { n } }, Reply, { timeoutMs: 2_000 });
    expect(await call(-1)).toEqual({ ok: false, n: -1 });
    expect(await call(21)).toEqual({ ok: true, n: 42 });
    expect(sub.failures()).toBe(1);
    sub.unsubscribe();
  });
});

describe("remote tools", () => {
  it("workers discover tool services by name and call them like local tools; a missing tool is left out", async () => {
    const deps = {
      nc: suite.nc,
      subjects: suite.subjects,
      idempotency: suite.buckets.idempotency,
      invoker: new ToolInvoker({ clock: systemClock, random: seededRandom(3) }),
      clock: systemClock,
      random: seededRandom(4),
      logger: silentLogger,
    };
    const memory = createMemoryTool(new KvMemory(suite.buckets.memory, systemClock, memoryReads(suite)));
    const subs = [...serveTool(echoTool, deps), ...serveTool(memory, deps)];
    const tools = await discoverTools(["echo", "memory", "missing"], { ...deps, timeoutMs: 500 });
    expect(tools.map((t) => t.name)).toEqual(["echo", "memory"]);
    const [echo, mem] = tools;
    expect(echo?.inputSchema).toMatchObject({ properties: { text: { type: "string" } } });
    expect(mem?.idempotent).toBe(true);
    expect(await echo?.execute({ text: "hi" }, toolCtx({ kind: "compute" }))).toEqual({
      output: { text: "hi" },
    });
    const ctx = (key: string) => toolCtx({ kind: "memory" }, { idempotencyKey: key });
    await mem?.execute(
      { action: "remember", namespace: "ns", text: "the deploy key rotates on mondays" },
      ctx("k1"),
    );
    await mem?.execute(
      { action: "remember", namespace: "ns", text: "the deploy key rotates on mondays" },
      ctx("k1"),
    );
    // Another call (another key) with the same text finds the same memory.
    await mem?.execute(
      { action: "remember", namespace: "ns", text: "the deploy key rotates on mondays" },
      ctx("k9"),
    );
    const recalled = await mem?.execute(
      { action: "recall", namespace: "ns", query: "deploy key" },
      ctx("k2"),
    );
    expect((recalled?.output as { memories: unknown[] }).memories).toHaveLength(1);
    await expect(
      echo?.execute({ text: 5 }, toolCtx({ kind: "compute" }, { idempotencyKey: "k3" })),
    ).rejects.toMatchObject({ code: "INVALID_INPUT" });
    for (const sub of subs) sub.unsubscribe();
  });

  it("an error code a foreign tool invents arrives as TOOL_FAILED with the code in the message", async () => {
    const name = "foreign";
    const descriptor = { ...describeTool(echoTool), name };
    const subs = [
      suite.nc.subscribe(suite.subjects.toolDescribe(name), {
        callback: (_e, m) => void m.respond(JSON.stringify(descriptor)),
      }),
      suite.nc.subscribe(suite.subjects.tool(name), {
        callback: (_e, m) =>
          void m.respond(
            JSON.stringify({ ok: false, error: { code: "E_RUST", message: "panic", retryable: false } }),
          ),
      }),
    ];
    const [tool] = await discoverTools([name], {
      nc: suite.nc,
      subjects: suite.subjects,
      clock: systemClock,
      logger: silentLogger,
    });
    await expect(tool?.execute({ text: "x" }, toolCtx({ kind: "compute" }))).rejects.toMatchObject({
      code: "TOOL_FAILED",
      message: "[E_RUST] panic",
    });
    for (const sub of subs) sub.unsubscribe();
  });
});

describe("waiting for a tool's service", () => {
  it("a describe and a call made while nobody serves the tool wait for its service to come up, and find it", async () => {
    const name = "late";
    const late = { ...echoTool, name };
    const deps = {
      nc: suite.nc,
      subjects: suite.subjects,
      idempotency: suite.buckets.idempotency,
      invoker: new ToolInvoker({ clock: systemClock, random: seededRandom(3), policy: { retries: 0 } }),
      clock: systemClock,
      random: seededRandom(4),
      logger: silentLogger,
    };
    // Not waiting, nobody serving: given up at once.
    expect(await describeRemoteTool(name, deps)).toBeUndefined();
    const serveLater = (ms: number) => systemClock.sleep(ms).then(() => serveTool(late, deps));
    let waits = 0;
    const wait = (waitMs: number) => ({
      waitMs,
      clock: systemClock,
      random: seededRandom(6),
      onWait: () => (waits += 1),
    });
    let began = Date.now();
    const [descriptor, subs] = await Promise.all([
      describeRemoteTool(name, { ...deps, wait: wait(5_000) }),
      serveLater(400),
    ]);
    expect(descriptor).toEqual(describeTool(late));
    expect(Date.now() - began).toBeGreaterThanOrEqual(400);
    expect(Date.now() - began).toBeLessThan(3_000);
    expect(waits).toBe(1);
    for (const sub of subs) sub.unsubscribe();
    // Nobody comes: given up once the wait is over.
    began = Date.now();
    expect(await describeRemoteTool(name, { ...deps, wait: wait(500) })).toBeUndefined();
    expect(Date.now() - began).toBeGreaterThanOrEqual(500);
    expect(waits).toBe(2);

    // The service restarts while a call is made: the call waits for it.
    const invoker = new ToolInvoker({
      clock: systemClock,
      random: seededRandom(5),
      policy: { serviceWaitMs: 5_000 },
    });
    const tool = remoteTool(descriptor!, deps);
    began = Date.now();
    const [result, again] = await Promise.all([
      invoker.invoke(tool, { text: "back" }, toolCtx({ kind: "compute" }, { idempotencyKey: "late-1" })),
      serveLater(1_500),
    ]);
    expect(result.output).toEqual({ text: "back" });
    expect(Date.now() - began).toBeGreaterThanOrEqual(1_500);
    for (const sub of again) sub.unsubscribe();
  });

  it("a describe that learns nothing (no answer in time) fails, retryable; one answered with something that is not a descriptor leaves the tool out", async () => {
    const deps = { nc: suite.nc, subjects: suite.subjects, clock: systemClock, logger: silentLogger };
    // A service that takes the request and never answers: busy, or its reply lost to a reconnect.
    const silent = suite.nc.subscribe(suite.subjects.toolDescribe("mute"), { callback: () => undefined });
    await expect(describeRemoteTool("mute", { ...deps, timeoutMs: 200 })).rejects.toMatchObject({
      code: "TOOL_TIMEOUT",
      retryable: true,
    });
    // Before, it was left out as if nobody served it, and a run naming it failed as planInvalid.
    await expect(discoverTools(["echo", "mute"], { ...deps, timeoutMs: 200 })).rejects.toMatchObject({
      code: "TOOL_TIMEOUT",
    });
    silent.unsubscribe();
    const garbled = suite.nc.subscribe(suite.subjects.toolDescribe("garbled"), {
      callback: (_e, m) => void m.respond(JSON.stringify({ name: 5 })),
    });
    expect(await describeRemoteTool("garbled", { ...deps, timeoutMs: 2_000 })).toBeUndefined();
    garbled.unsubscribe();
  });
});

describe("workers' plumbing", () => {
  it("the shared work-queue consumer is created once, follows a new ack wait, and caps no jobs in flight (one an older build made, capped at the server's 1,000, is lifted)", async () => {
    const stream = suite.subjects.streams().runs;
    // As an older build left it: the server's default cap on unacknowledged jobs.
    await suite.jsm.consumers.add(stream, {
      durable_name: WORKER_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      ack_wait: 5_000 * 1_000_000,
      max_deliver: -1,
      filter_subject: suite.subjects.runQueueAll(),
    });
    expect((await suite.jsm.consumers.info(stream, WORKER_CONSUMER)).config.max_ack_pending).toBe(1_000);
    const name = await ensureWorkerConsumer(suite.jsm, suite.subjects, { ackWaitMs: 5_000 });
    expect((await suite.jsm.consumers.info(stream, name)).config.max_ack_pending).toBe(-1);
    await ensureWorkerConsumer(suite.jsm, suite.subjects, { ackWaitMs: 5_000 });
    await ensureWorkerConsumer(suite.jsm, suite.subjects, { ackWaitMs: 7_000 });
    const info = await suite.jsm.consumers.info(stream, name);
    expect(info.config.ack_wait).toBe(7_000 * 1_000_000);
    expect((await suite.jsm.consumers.list(stream).next()).length).toBe(1);

    // Past the server's default: 1,200 jobs taken, none acknowledged yet, all held.
    for (let i = 0; i < 1_200; i += 400)
      await Promise.all(
        Array.from({ length: 400 }, (_, j) =>
          suite.js.publish(suite.subjects.runQueue(`in-flight-${i + j}`), new Uint8Array(8)),
        ),
      );
    const consumer = await suite.js.consumers.get(stream, name);
    const taken: JsMsg[] = [];
    for (let pull = 0; pull < 3 && taken.length < 1_200; pull += 1)
      for await (const msg of await consumer.fetch({ max_messages: 1_000, expires: 1_000 })) taken.push(msg);
    expect(taken).toHaveLength(1_200);
    expect((await suite.jsm.consumers.info(stream, name)).num_ack_pending).toBe(1_200);
    for (const msg of taken) msg.ack();
  });

  it("the remote critic gets task, output, evidence and rubric, and a scripted critic continues at the run's attempt", async () => {
    const sub = serve(suite.nc, suite.subjects.criticReview(), {
      queue: "critic",
      reply: CriticReviewReply,
      logger: silentLogger,
      handle: (msg) => review(msg.data, { clock: systemClock, random: seededRandom(1), env: {} }),
      onError: failureReply,
    });
    const runSpec = RunSpec.parse(
      spec({
        critic: {
          model: { provider: "scripted", script: [{ text: verdict(false) }, { text: verdict(true) }] },
        },
      }),
    );
    const { state } = startRun(
      { type: "start", at: START, spec: runSpec, runId: "c1", rootRunId: "c1", depth: 0 },
      { tools: [] },
    );
    const request = {
      schemaVersion: 1 as const,
      runId: "c1",
      task: "t",
      output: "o",
      evidence: [],
      rubric: { dimensions: [{ name: "correctness", weight: 1, min: 0.5 }], threshold: 0.5 },
    };
    expect((await remoteCritic(suite, { ...state, critiques: 1 })(request)).passed).toBe(false);
    expect((await remoteCritic(suite, { ...state, critiques: 2 })(request)).passed).toBe(true);
    await expect(remoteCritic(suite, { ...state, critiques: 3 })(request)).rejects.toMatchObject({
      code: "SCRIPT_EXHAUSTED",
    });
    const raw = await suite.nc.request(suite.subjects.criticReview(), encode(Ping, { n: 1 }), {
      timeout: 2_000,
    });
    expect(CriticReviewReply.parse(JSON.parse(new TextDecoder().decode(raw.data)))).toMatchObject({
      ok: false,
      error: { code: "INVALID_INPUT" },
    });
    sub.unsubscribe();
  });

  it("reconciliation reads the tool service's record: a result is used, no claim means never started, a stale claim halts", async () => {
    const charge = { ...echoTool, name: "charge", idempotent: false, timeoutMs: 50 };
    const lines: { msg: string; haltAt?: string }[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as (typeof lines)[number]);
        done();
      },
    });
    const reconciler = new Reconciler({
      idempotency: suite.buckets.idempotency,
      clock: systemClock,
      random: suite.random,
      logger: createLogger({ actor: "agent", level: "info", destination }),
      tool: (name) => (name === "charge" ? charge : name === "echo" ? echoTool : undefined),
      pollMs: 10,
      graceMs: 100,
    });
    const call = (key: string, tool = "charge") => ({
      type: "callTool" as const,
      actionId: "a1",
      tool,
      input: {},
      idempotencyKey: key,
      purpose: "act" as const,
      timeoutMs: 50,
    });
    const signal = new AbortController().signal;
    const put = (key: string, record: IdempotencyRecord) =>
      suite.buckets.idempotency.put(idempotencyBucketKey("charge", key), encode(IdempotencyRecord, record));
    expect(await reconciler.outcome(call("never"), signal)).toBeUndefined();
    expect(await reconciler.outcome(call("any", "echo"), signal)).toBeUndefined();
    await put("done", { status: "done", idempotencyKey: "done", reply: { ok: true, output: { n: 1 } } });
    expect(await reconciler.outcome(call("done"), signal)).toMatchObject({
      type: "toolCompleted",
      output: { n: 1 },
    });
    const since = systemClock.now();
    await put("stale", { status: "running", idempotencyKey: "stale", since });
    expect(await reconciler.outcome(call("stale"), signal)).toMatchObject({
      type: "halt",
      reason: expect.stringMatching(/^RECONCILIATION_REQUIRED/) as string,
    });
    // The wait, up to the tool's timeout and its grace, is said once, with when it ends.
    const waits = lines.filter((line) => line.msg.includes("outcome is not known yet"));
    expect(waits).toEqual([expect.objectContaining({ haltAt: new Date(since + 50 + 100).toISOString() })]);
    const aborted = {
      type: "toolAborted" as const,
      at: 0,
      actionId: "a1",
      error: { code: "TOOL_TIMEOUT", message: "t" },
    };
    expect(reconciler.unknown(call("x"), aborted)).toBe(true);
    expect(reconciler.unknown(call("x", "echo"), aborted)).toBe(false);
    expect(reconciler.unknown(call("x"), { ...aborted, error: { code: "TOOL_FAILED", message: "f" } })).toBe(
      false,
    );
  });

  it("auditCount says how many events a run already has", async () => {
    expect(await auditCount(suite, "ac1")).toBe(0);
    const event = {
      schemaVersion: 1 as const,
      auditId: "ac1:1",
      runId: "ac1",
      rootRunId: "ac1",
      seq: 1,
      iteration: 0,
      phase: "PLAN" as const,
      kind: "run.admitted" as const,
      actor: "supervisor" as const,
      status: "passed" as const,
      artifacts: [],
      timestamp: new Date(START).toISOString(),
    };
    await publishEvent(suite, event);
    await publishEvent(suite, { ...event, auditId: "ac1:2", seq: 2, kind: "run.committed" });
    expect(await auditCount(suite, "ac1")).toBe(2);
  });
});
