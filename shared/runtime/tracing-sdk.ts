import type { DiagLogger } from "@opentelemetry/api";
import type { IdGenerator } from "@opentelemetry/sdk-trace";
import type { Logger } from "./logger.js";
import { tracingPlan, type TracingEnv } from "./tracing-env.js";
import { useTracing, type SpanIds } from "./tracing.js";

/** An actor's tracing, on or off; `shutdown` sends the spans not sent yet. */
export interface TracingHandle {
  on: boolean;
  shutdown(): Promise<void>;
}

const OFF: TracingHandle = { on: false, shutdown: () => Promise.resolve() };

/**
 * Turns traces on when the environment asks for them (see tracingPlan): the OpenTelemetry SDK is
 * imported only then, so an actor without traces loads none of it and its spans cost nothing.
 * Spans go in batches over OTLP/HTTP (JSON); export failures are logged as warnings, never thrown.
 */
export async function startTracing(env: TracingEnv, actor: string, logger: Logger): Promise<TracingHandle> {
  const plan = tracingPlan(env, actor);
  if (!plan.on) {
    logger.debug({ why: plan.why }, "traces off");
    return OFF;
  }
  const [api, sdk, { OTLPTraceExporter }, { AsyncLocalStorageContextManager }, core, resources] =
    await Promise.all([
      import("@opentelemetry/api"),
      import("@opentelemetry/sdk-trace"),
      import("@opentelemetry/exporter-trace-otlp-http"),
      import("@opentelemetry/context-async-hooks"),
      import("@opentelemetry/core"),
      import("@opentelemetry/resources"),
    ]);
  api.diag.setLogger(diagOf(logger), api.DiagLogLevel.WARN);
  const ids = new PinnableIds(new sdk.RandomIdGenerator());
  const resource = resources
    .resourceFromAttributes({ "service.name": plan.serviceName, "agents.actor": actor })
    .merge(resources.detectResources({ detectors: [resources.resourceAttributesEnvDetector] }));
  const exporter = new OTLPTraceExporter({ url: plan.target });
  const provider = new sdk.TracerProvider({
    resource,
    idGenerator: ids,
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter, scheduledDelayMillis: plan.scheduleDelayMs })],
  });
  api.trace.setGlobalTracerProvider(provider);
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  api.propagation.setGlobalPropagator(new core.W3CTraceContextPropagator());
  const tracer = provider.getTracer("bounded-agents");
  useTracing({
    tracer,
    startWithIds: (name, options, parent, pinned) => {
      ids.pin(pinned);
      try {
        return tracer.startSpan(name, options, parent);
      } finally {
        ids.pin(undefined);
      }
    },
  });
  logger.info({ target: plan.target, serviceName: plan.serviceName }, "traces on: exporting over OTLP/HTTP");
  return {
    on: true,
    shutdown: async () => {
      useTracing(undefined);
      await provider.shutdown();
    },
  };
}

/** Random ids, except for the one span started right after `pin` (see Tracing.startWithIds). */
class PinnableIds implements IdGenerator {
  private pinned: SpanIds | undefined;
  constructor(private readonly random: IdGenerator) {}

  pin(ids: SpanIds | undefined): void {
    this.pinned = ids;
  }

  generateTraceId(): string {
    return this.pinned?.traceId ?? this.random.generateTraceId();
  }

  generateSpanId(): string {
    return this.pinned?.spanId ?? this.random.generateSpanId();
  }
}

/** The SDK's own complaints (an export refused, a collector unreachable) as the actor's log lines. */
function diagOf(logger: Logger): DiagLogger {
  const line =
    (level: "warn" | "debug") =>
    (message: string, ...args: unknown[]): void =>
      logger[level]({ otel: args.length > 0 ? args.map(String) : undefined }, `OpenTelemetry: ${message}`);
  return {
    error: line("warn"),
    warn: line("warn"),
    info: line("debug"),
    debug: line("debug"),
    verbose: line("debug"),
  };
}
