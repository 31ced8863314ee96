import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encode } from "../../shared/bus/codec.js";
import { runSpanIds } from "../../shared/bus/trace-context.js";
import { ModelCallReply } from "../../shared/contracts/model.js";
import { settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { echoCall, spec } from "../helpers/fixtures.js";
import { startServer, type RecordedRequest, type TestServer } from "../helpers/http-server.js";
import { until } from "../helpers/until.js";

/** One span as the test reads it from an OTLP/HTTP JSON export. */
interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  service: string;
  attributes: Record<string, unknown>;
  status?: { code?: number; message?: string };
}

type OtlpValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values: OtlpValue[] };
};
type OtlpAttribute = { key: string; value: OtlpValue };
interface OtlpExport {
  resourceSpans: {
    resource: { attributes: OtlpAttribute[] };
    scopeSpans: {
      spans: (Omit<ExportedSpan, "service" | "attributes"> & { attributes?: OtlpAttribute[] })[];
    }[];
  }[];
}

const valueOf = (v: OtlpValue): unknown =>
  v.arrayValue
    ? v.arrayValue.values.map(valueOf)
    : (v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.doubleValue ?? v.boolValue)));
const attributesOf = (list: OtlpAttribute[] = []): Record<string, unknown> =>
  Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));

function spansOf(requests: RecordedRequest[]): ExportedSpan[] {
  return requests.flatMap((request) =>
    (JSON.parse(request.body) as OtlpExport).resourceSpans.flatMap((rs) => {
      const service = String(attributesOf(rs.resource.attributes)["service.name"]);
      return rs.scopeSpans.flatMap((ss) =>
        ss.spans.map((s) => ({ ...s, service, attributes: attributesOf(s.attributes) })),
      );
    }),
  );
}

/** The actors' collector: an OTLP/HTTP receiver on a free port, accepting every export. */
let collector: TestServer;
/** A receiver on the OTLP exporter's default port: an actor with no OTEL_* variable must never post there. */
let defaultPort: TestServer;
const accept = (_req: RecordedRequest, res: ServerResponse): void => {
  res.writeHead(200, { "content-type": "application/json" }).end("{}");
};
/** Filled once the collector listens, before the cluster starts (the suite's launch reads them then). */
const traced: Record<string, string> = {};
const tracedTools: Record<string, string> = { TOOLS: "echo" };

beforeAll(async () => {
  collector = await startServer(accept);
  defaultPort = await startServer(accept, 4318).catch((err: unknown) => {
    throw new Error(
      "port 4318 is taken (a local OpenTelemetry collector or Jaeger?): this suite listens there to prove an actor without OTEL_* variables sends nothing to the exporter's default endpoint",
      { cause: err },
    );
  });
  Object.assign(traced, {
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
    OTEL_EXPORTER_OTLP_HEADERS: "x-collector-token=traces-e2e",
    OTEL_BSP_SCHEDULE_DELAY: "100",
  });
  Object.assign(tracedTools, traced);
});

const suite = useClusterSuite("traces", {
  actors: [
    { kind: "supervisor", env: traced },
    { kind: "tools", env: tracedTools },
    // No OTEL_* variable at all: traces off, whatever the calls it serves carry.
    { kind: "tools", name: "tools-untraced", env: { TOOLS: "memory" } },
    { kind: "critic", env: traced },
    { kind: "agent", name: "agent-1", env: traced },
    { kind: "agent", name: "agent-2", env: traced },
  ],
  // Every tool call goes to a tool service, over NATS.
  env: { AGENT_LOCAL_TOOLS: "", AGENT_RETRY_DELAY_MS: "500" },
});

afterAll(async () => {
  await collector?.close();
  await defaultPort?.close();
});

/** A critic model's verdict as its JSON answer. */
function verdict(passed: boolean): string {
  const s = passed ? 0.95 : 0.5;
  return JSON.stringify({
    scores: { correctness: s, completeness: s, coherence: s, safety: passed ? 1 : 0.5 },
    defects: passed ? [] : [{ severity: "high", rootCause: "incompleteness", description: "too short" }],
    repairHints: passed ? [] : ["say more"],
    passed,
  });
}

/** The spans of `traceId` once its run's root span has come, with `also` holding. */
async function traceOf(
  traceId: string,
  also: (spans: ExportedSpan[]) => boolean = () => true,
): Promise<ExportedSpan[]> {
  let spans: ExportedSpan[] = [];
  await until(
    () => {
      spans = spansOf(collector.requests).filter((s) => s.traceId === traceId);
      return spans.some((s) => s.name === "run") && also(spans);
    },
    20_000,
    { what: () => `the trace ${traceId} (so far: ${spans.map((s) => s.name).join(", ")})` },
  );
  return spans;
}

const SPAN_KIND_SERVER = 2;
const SPAN_KIND_CLIENT = 3;
const STATUS_ERROR = 2;

describe("OpenTelemetry traces of a run, across actor processes", () => {
  it("a run with tool calls and a repair is one trace: the run's root, its phases, and model, tool and critic spans under them, served spans in the tool and critic processes", async () => {
    const { runId } = await suite.client.submit(
      spec({
        script: [
          {
            toolCalls: [
              { name: "echo", input: { text: "green" } },
              { name: "memory", input: { action: "recall", namespace: "traces", query: "green" } },
            ],
          },
          { text: "The service is green, mostly." },
          { toolCalls: [{ name: "finish", input: { answer: "The service is green." } }] },
        ],
        tools: ["echo", "memory"],
        capabilities: ["compute", "memory"],
        verifiers: [],
        critic: {
          model: { provider: "scripted", script: [{ text: verdict(false) }, { text: verdict(true) }] },
        },
      }),
    );
    expect(await suite.waitFor(runId, settled)).toMatchObject({ status: "committed" });
    const { traceId, spanId } = runSpanIds(suite.prefix, { runId, rootRunId: runId });
    const spans = await traceOf(traceId, (all) => all.filter((s) => s.name === "critic.judge").length === 2);
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const parentOf = (s: ExportedSpan): ExportedSpan | undefined => byId.get(s.parentSpanId ?? "");
    const named = (name: string): ExportedSpan[] => spans.filter((s) => s.name === name);

    // One root: the run's span, with the id every job of the run names, made by the worker that committed it.
    const roots = spans.filter((s) => !s.parentSpanId);
    expect(roots.map((s) => s.name)).toEqual(["run"]);
    const [root] = roots;
    expect(root).toMatchObject({ spanId, service: "agents-agent" });
    expect(root?.attributes).toMatchObject({
      "run.id": runId,
      "run.status": "committed",
      "agent.name": "tester",
      "run.repairs": 1,
      "run.model_calls": 3,
      "run.tool_calls": 2,
    });
    // Every phase under the root, the repair's among them.
    const phases = spans.filter((s) => s.name.startsWith("phase "));
    for (const phase of phases) expect(parentOf(phase)?.name, phase.name).toBe("run");
    const count = (name: string): number => phases.filter((s) => s.name === `phase ${name}`).length;
    expect(
      ["PLAN", "DECOMPOSE", "RETRIEVE", "ACT", "VERIFY", "CRITIQUE", "REPAIR", "COMMIT"].map(count),
    ).toEqual([1, 1, 1, 2, 2, 2, 1, 1]);
    expect(phases).toHaveLength(11);
    expect(named("phase REPAIR")[0]?.attributes["phase.reason"]).toBe("1 defect(s)");
    // Model calls in ACT, each its own CLIENT span with the provider and the usage.
    const models = named("model.call");
    expect(models).toHaveLength(3);
    for (const call of models) {
      expect(parentOf(call)?.name).toBe("phase ACT");
      expect(call).toMatchObject({ kind: SPAN_KIND_CLIENT, service: "agents-agent" });
      expect(call.attributes).toMatchObject({ "gen_ai.provider.name": "scripted", "run.id": runId });
    }
    expect(models.map((s) => s.attributes["gen_ai.response.finish_reasons"])).toEqual([
      ["toolUse"],
      ["endTurn"],
      ["toolUse"],
    ]);
    // Both tool calls of the batch, each a span of its own in ACT.
    const tools = named("tool.call");
    expect(tools.map((s) => s.attributes["tool.name"]).sort()).toEqual(["echo", "memory"]);
    for (const call of tools) {
      expect(parentOf(call)?.name).toBe("phase ACT");
      expect(call.attributes["tool.outcome"]).toBe("completed");
    }
    // The echo service, in its own process, served the call inside the caller's span.
    const echo = tools.find((s) => s.attributes["tool.name"] === "echo");
    const served = named("tool.serve");
    expect(served).toHaveLength(1);
    expect(served[0]).toMatchObject({
      parentSpanId: echo?.spanId,
      kind: SPAN_KIND_SERVER,
      service: "agents-tools",
      attributes: { "tool.name": "echo" },
    });
    // The critic's two reviews: sent back once (the repair), then passed; each judged in the critic's process.
    const reviews = named("critic.review");
    expect(reviews.map((s) => s.attributes["critic.passed"])).toEqual([false, true]);
    for (const review of reviews) {
      expect(parentOf(review)?.name).toBe("phase CRITIQUE");
      const judged = named("critic.judge").filter((s) => s.parentSpanId === review.spanId);
      expect(judged).toHaveLength(1);
      expect(judged[0]).toMatchObject({
        kind: SPAN_KIND_SERVER,
        service: "agents-critic",
        attributes: { "critic.passed": review.attributes["critic.passed"] },
      });
    }
    expect(reviews[0]?.attributes["critic.score.correctness"]).toBe(0.5);
    // Nothing of the run outside its trace, and nothing in it without a parent found.
    const elsewhere = spansOf(collector.requests).filter((s) => s.attributes["run.id"] === runId);
    expect(elsewhere.every((s) => s.traceId === traceId)).toBe(true);
    for (const span of spans) if (span !== root) expect(parentOf(span), span.name).toBeDefined();
    // The exports carried the headers OTEL_EXPORTER_OTLP_HEADERS named, to the standard path.
    expect(collector.requests.every((r) => r.url === "/v1/traces" && r.method === "POST")).toBe(true);
    expect(collector.requests[0]?.headers["x-collector-token"]).toBe("traces-e2e");
  });

  it("an actor with no OTEL_* variable exports nothing: the untraced tool service made no span, and nothing went to the exporter's default endpoint", async () => {
    const { runId } = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "memory", input: { action: "recall", namespace: "traces", query: "x" } }] },
          { text: "recalled" },
        ],
        tools: ["memory"],
        capabilities: ["compute", "memory"],
      }),
    );
    expect(await suite.waitFor(runId, settled)).toMatchObject({ status: "committed" });
    const { traceId } = runSpanIds(suite.prefix, { runId, rootRunId: runId });
    const spans = await traceOf(traceId);
    const call = spans.find((s) => s.name === "tool.call");
    expect(call?.attributes["tool.name"]).toBe("memory");
    // The call carried its traceparent; the service that took it had no tracing to continue it.
    expect(spans.filter((s) => s.parentSpanId === call?.spanId)).toEqual([]);
    expect(spans.map((s) => s.service).filter((s) => s !== "agents-agent")).toEqual([]);
    expect(defaultPort.requests).toEqual([]);
    expect(await suite.log("tools-untraced")).not.toMatch(/traces on/);
    expect(await suite.log("agent-1")).toMatch(/traces on: exporting over OTLP\/HTTP/);
  });

  it("a run waiting for a human continues its trace in the decision's job: one root, phases before and after the wait under it", async () => {
    const { runId } = await suite.client.submit(
      spec({ script: [echoCall("to approve"), { text: "approved answer" }], requiresApproval: true }),
    );
    await suite.waitFor(runId, (s) => s.status === "awaiting_approval");
    const { traceId, spanId } = runSpanIds(suite.prefix, { runId, rootRunId: runId });
    // Before the decision: the phases so far, under a root not made yet (the run has not ended).
    await until(
      () => spansOf(collector.requests).some((s) => s.traceId === traceId && s.name === "phase VERIFY"),
      20_000,
      { what: "the phases before the wait" },
    );
    await suite.client.decide(runId, { decision: "approve", by: "traces-test" });
    expect(await suite.waitFor(runId, settled)).toMatchObject({ status: "committed" });
    const spans = await traceOf(traceId, (all) => all.some((s) => s.name === "phase COMMIT"));
    expect(spans.filter((s) => !s.parentSpanId).map((s) => s.spanId)).toEqual([spanId]);
    const phases = spans.filter((s) => s.name.startsWith("phase "));
    for (const phase of phases) expect(phase.parentSpanId).toBe(spanId);
    // Two leases drove it: the one that asked for the decision (its phases were sent before the
    // decision was made) and the one the decision's job started, which made the root: from the
    // run's start, before the first lease's first phase, to its commit.
    const start = (s: ExportedSpan | undefined): bigint => BigInt(s?.startTimeUnixNano ?? 0);
    const end = (s: ExportedSpan | undefined): bigint => BigInt(s?.endTimeUnixNano ?? 0);
    const root = spans.find((s) => s.name === "run");
    const plan = phases.find((s) => s.name === "phase PLAN");
    const commit = phases.find((s) => s.name === "phase COMMIT");
    expect(start(root)).toBeLessThanOrEqual(start(plan));
    expect(end(root)).toBeGreaterThanOrEqual(start(commit));
    expect(start(commit)).toBeGreaterThan(end(plan));
    expect(root?.attributes).toMatchObject({ "run.status": "committed", "run.tool_calls": 1 });
    expect(root?.status?.code).not.toBe(STATUS_ERROR);
  });

  it("a model served by an actor gets the model call's span as its traceparent", async () => {
    const heard: (string | undefined)[] = [];
    const { nc, subjects } = suite.bus;
    // A model actor of the test's own: it answers each turn, and keeps the traceparent it came with.
    const sub = nc.subscribe(subjects.model("traced-model"), {
      callback: (_err, msg) => {
        heard.push(msg.headers?.get("traceparent"));
        const reply: ModelCallReply = {
          schemaVersion: 1,
          ok: true,
          response: {
            text: "from the model actor",
            toolCalls: [],
            stopReason: "endTurn",
            usage: { inputTokens: 3, outputTokens: 4 },
            costUsd: 0,
            model: "traced-model",
          },
        };
        msg.respond(encode(ModelCallReply, reply));
      },
    });
    await nc.flush();
    try {
      const asked = spec({});
      const { runId } = await suite.client.submit({
        ...asked,
        agent: { ...asked.agent, model: { provider: "actor", name: "traced-model" } },
      });
      expect(await suite.waitFor(runId, settled)).toMatchObject({ status: "committed" });
      const { traceId } = runSpanIds(suite.prefix, { runId, rootRunId: runId });
      const spans = await traceOf(traceId);
      const calls = spans.filter((s) => s.name === "model.call");
      expect(calls).toHaveLength(1);
      expect(calls[0]?.attributes).toMatchObject({
        "gen_ai.provider.name": "actor",
        "gen_ai.response.model": "traced-model",
        "gen_ai.usage.output_tokens": 4,
      });
      expect(heard).toEqual([`00-${traceId}-${calls[0]?.spanId}-01`]);
    } finally {
      sub.unsubscribe();
    }
  });
});
