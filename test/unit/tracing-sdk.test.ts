import { ROOT_CONTEXT } from "@opentelemetry/api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../shared/runtime/logger.js";
import { TracingEnv } from "../../shared/runtime/tracing-env.js";
import { startTracing } from "../../shared/runtime/tracing-sdk.js";
import { activeTracing } from "../../shared/runtime/tracing.js";
import { startServer, type TestServer } from "../helpers/http-server.js";

let collector: TestServer;
beforeAll(async () => {
  collector = await startServer((_req, res) =>
    res.writeHead(200, { "content-type": "application/json" }).end("{}"),
  );
});
afterAll(() => collector.close());

interface Exported {
  resourceSpans: {
    resource: { attributes: { key: string; value: { stringValue?: string } }[] };
    scopeSpans: { spans: { name: string; traceId: string; spanId: string; parentSpanId?: string }[] }[];
  }[];
}

describe("startTracing: the SDK behind an actor's traces", () => {
  it("stays off, with nothing installed, when no endpoint is set", async () => {
    const handle = await startTracing(TracingEnv.parse({}), "agent", silentLogger);
    expect(handle.on).toBe(false);
    expect(activeTracing()).toBeUndefined();
    await handle.shutdown();
  });

  it("sends what is left at shutdown, a span started with chosen ids under those ids, in the service's name", async () => {
    const env = TracingEnv.parse({
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_SERVICE_NAME: "unit-agents",
      // Far longer than the test: only the shutdown sends.
      OTEL_BSP_SCHEDULE_DELAY: "600000",
    });
    const handle = await startTracing(env, "agent", silentLogger);
    expect(handle.on).toBe(true);
    const tracing = activeTracing();
    if (!tracing) throw new Error("tracing is not on");
    const ids = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7" };
    const root = tracing.startWithIds("run", {}, ROOT_CONTEXT, ids);
    // The ids were for that span only: the next one gets random ones.
    const other = tracing.tracer.startSpan("other", {}, ROOT_CONTEXT);
    root.end();
    other.end();
    expect(collector.requests).toEqual([]);
    await handle.shutdown();
    expect(activeTracing()).toBeUndefined();
    expect(collector.requests.map((r) => r.url)).toEqual(["/v1/traces"]);
    const body = JSON.parse(collector.requests[0]?.body ?? "{}") as Exported;
    const resource = body.resourceSpans[0]?.resource.attributes ?? [];
    expect(resource.find((a) => a.key === "service.name")?.value.stringValue).toBe("unit-agents");
    const spans = body.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans));
    expect(spans.find((s) => s.name === "run")).toMatchObject(ids);
    const second = spans.find((s) => s.name === "other");
    expect(second?.traceId).not.toBe(ids.traceId);
    expect(second?.spanId).not.toBe(ids.spanId);
    expect(second?.spanId).toMatch(/^[0-9a-f]{16}$/);
  });
});
