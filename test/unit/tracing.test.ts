import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterEach, describe, expect, it } from "vitest";
import {
  contextOf,
  jobTraceHeaders,
  runSpanIds,
  servedInSpan,
  traceHeaders,
} from "../../shared/bus/trace-context.js";
import { ActorEnv } from "../../shared/runtime/config.js";
import { TracingEnv, tracingPlan } from "../../shared/runtime/tracing-env.js";
import { useTracing } from "../../shared/runtime/tracing.js";

const plan = (env: Record<string, string>) => tracingPlan(TracingEnv.parse(env), "agent");

describe("tracingPlan: traces are off unless configured", () => {
  it("is off with no OTEL_* variable, with OTEL_SDK_DISABLED=true whatever else is set, and with OTEL_TRACES_EXPORTER=none", () => {
    expect(plan({})).toEqual({ on: false, why: "no OTLP endpoint is set" });
    expect(plan({ OTEL_SERVICE_NAME: "x", OTEL_EXPORTER_OTLP_HEADERS: "a=b" }).on).toBe(false);
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" };
    expect(plan({ ...endpoint, OTEL_SDK_DISABLED: "TRUE" })).toMatchObject({ on: false });
    expect(plan({ ...endpoint, OTEL_TRACES_EXPORTER: "none" })).toMatchObject({ on: false });
    // Disabled wins even over values that would be refused when on.
    expect(plan({ ...endpoint, OTEL_SDK_DISABLED: "true", OTEL_TRACES_EXPORTER: "zipkin" }).on).toBe(false);
  });

  it("is on with an endpoint: the base URL gets /v1/traces, the traces endpoint is taken as it is, otlp alone posts to the default", () => {
    expect(plan({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" })).toEqual({
      on: true,
      serviceName: "agents-agent",
      target: "http://collector:4318/v1/traces",
      scheduleDelayMs: 5_000,
    });
    expect(
      plan({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://tempo.example/otlp/v1/traces",
        OTEL_SERVICE_NAME: "checkout-agents",
        OTEL_BSP_SCHEDULE_DELAY: "250",
      }),
    ).toEqual({
      on: true,
      serviceName: "checkout-agents",
      target: "https://tempo.example/otlp/v1/traces",
      scheduleDelayMs: 250,
    });
    expect(plan({ OTEL_TRACES_EXPORTER: "otlp" })).toMatchObject({
      on: true,
      target: "http://localhost:4318/v1/traces",
    });
  });

  it("refuses, with INVALID_INPUT naming the fix, an exporter or a protocol it cannot honour once traces are on", () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" };
    const refusal = (env: Record<string, string>): unknown => {
      try {
        plan(env);
      } catch (err) {
        return err;
      }
      return undefined;
    };
    expect(refusal({ ...endpoint, OTEL_TRACES_EXPORTER: "zipkin" })).toMatchObject({
      code: "INVALID_INPUT",
      message:
        "OTEL_TRACES_EXPORTER 'zipkin' is not built in: set it to otlp (traces over OTLP/HTTP) or none, or unset it",
    });
    expect(refusal({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toMatchObject({
      code: "INVALID_INPUT",
    });
    expect(String(refusal({ ...endpoint, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf" }))).toMatch(
      /'http\/protobuf' is not built in: set OTEL_EXPORTER_OTLP_PROTOCOL .* to http\/json/,
    );
    expect(plan({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }).on).toBe(true);
    // Traces off: a shell set up for another program's traces is no reason to refuse anything.
    expect(plan({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }).on).toBe(false);
    const parsed = ActorEnv.safeParse({
      OTEL_TRACES_EXPORTER: "console",
      OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
    });
    expect(parsed.success).toBe(true);
    expect(ActorEnv.safeParse({ OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" }).success).toBe(false);
  });
});

describe("a run's place in its trace", () => {
  it("derives the trace from the root run and the span from the run, under the cluster's prefix", () => {
    const root = runSpanIds("agents", { runId: "order-1", rootRunId: "order-1" });
    expect(root.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(root.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(root.parentSpanId).toBeUndefined();
    expect(runSpanIds("agents", { runId: "order-1", rootRunId: "order-1" })).toEqual(root);
    const child = runSpanIds("agents", { runId: "order-1-c0", rootRunId: "order-1", parentRunId: "order-1" });
    expect(child).toMatchObject({ traceId: root.traceId, parentSpanId: root.spanId });
    expect(child.spanId).not.toBe(root.spanId);
    expect(runSpanIds("staging", { runId: "order-1", rootRunId: "order-1" }).traceId).not.toBe(root.traceId);
  });
});

describe("trace context in NATS headers", () => {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  const on = (): void => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    const tracer = provider.getTracer("test");
    useTracing({ tracer, startWithIds: (name, options, parent) => tracer.startSpan(name, options, parent) });
  };
  afterEach(() => {
    useTracing(undefined);
    propagation.disable();
    context.disable();
    exporter.reset();
  });

  it("makes no header while tracing is off, even for a context that has a span", () => {
    const ctx = trace.setSpanContext(context.active(), {
      traceId: "0af7651916cd43dd8448eb211c80319c",
      spanId: "b7ad6b7169203331",
      traceFlags: 1,
    });
    expect(traceHeaders(ctx)).toBeUndefined();
    expect(jobTraceHeaders("agents", { runId: "r1", rootRunId: "r1" })).toBeUndefined();
  });

  it("a job names its run's span as its traceparent; a served request continues the span its headers name", async () => {
    on();
    const run = { runId: "r1", rootRunId: "r1" };
    const ids = runSpanIds("agents", run);
    const job = jobTraceHeaders("agents", run);
    expect(job?.get("traceparent")).toBe(`00-${ids.traceId}-${ids.spanId}-01`);
    expect(trace.getSpanContext(contextOf(job) ?? context.active())).toMatchObject({
      traceId: ids.traceId,
      spanId: ids.spanId,
      isRemote: true,
    });
    const answer = await servedInSpan("tool.serve", { headers: job }, { "tool.name": "echo" }, () =>
      // Inside, the served span is the active one: a request made here carries it on.
      Promise.resolve(traceHeaders()?.get("traceparent")),
    );
    await provider.forceFlush();
    const [served] = exporter.getFinishedSpans();
    expect(served).toMatchObject({ name: "tool.serve", attributes: { "tool.name": "echo" } });
    expect(served?.parentSpanContext?.spanId).toBe(ids.spanId);
    expect(served?.spanContext().traceId).toBe(ids.traceId);
    expect(answer).toBe(`00-${ids.traceId}-${served?.spanContext().spanId}-01`);
    // A request with no traceparent starts a trace of its own.
    await servedInSpan("tool.serve", { headers: undefined }, {}, () => Promise.resolve());
    await provider.forceFlush();
    expect(exporter.getFinishedSpans()[1]?.parentSpanContext).toBeUndefined();
  });
});
