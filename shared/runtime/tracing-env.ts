import { z } from "zod";
import { AgentError } from "./errors.js";

/** A standard OTel boolean: `true` in any case is true, anything else (unset included) false. */
const otelBoolean = z
  .string()
  .optional()
  .transform((text) => text?.trim().toLowerCase() === "true");

const url = z.url({ error: "an absolute URL, such as http://otel-collector:4318" });

/**
 * The standard OpenTelemetry variables an actor reads for its traces. Tracing is off unless an
 * endpoint is set (or OTEL_TRACES_EXPORTER asks for `otlp`): an actor never sends anything nobody
 * asked it to send, and loads no SDK when off. The exporter and protocol are checked by
 * tracingPlan, when an actor starts its traces: agentctl, which sends none, must not refuse to run
 * in a shell set up for another program's traces.
 */
export const TracingEnv = z.object({
  OTEL_SDK_DISABLED: otelBoolean.describe(
    "`true`: no traces, whatever else is set (the OpenTelemetry SDK is not even loaded).",
  ),
  OTEL_TRACES_EXPORTER: z
    .string()
    .optional()
    .describe(
      "`otlp`: export traces over OTLP/HTTP (to `http://localhost:4318/v1/traces` when no endpoint is set); `none`: no traces; another value stops the actor (`INVALID_INPUT`). Unset: traces are on when an OTLP endpoint is set. See [Traces](traces.md).",
    ),
  OTEL_EXPORTER_OTLP_ENDPOINT: url
    .optional()
    .describe(
      "The OTLP/HTTP collector's base URL (traces go to `<it>/v1/traces`, e.g. `http://otel-collector:4318`); setting it turns traces on.",
    ),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url
    .optional()
    .describe(
      "The full URL traces are posted to, over `OTEL_EXPORTER_OTLP_ENDPOINT`; setting it turns traces on.",
    ),
  OTEL_EXPORTER_OTLP_HEADERS: z
    .string()
    .optional()
    .describe(
      "Headers sent with each export, `key=value` comma-separated (an API key of a hosted backend). `OTEL_EXPORTER_OTLP_TRACES_HEADERS` adds to it; `OTEL_EXPORTER_OTLP_TIMEOUT`, `_COMPRESSION` and `_CERTIFICATE` are read as the OpenTelemetry exporter reads them.",
    ),
  OTEL_EXPORTER_OTLP_PROTOCOL: z
    .string()
    .optional()
    .describe(
      "Only `http/json`, which the OpenTelemetry collector, Jaeger and Tempo accept on their OTLP/HTTP port (4318); another value stops an actor whose traces are on (`INVALID_INPUT`).",
    ),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z
    .string()
    .optional()
    .describe("As `OTEL_EXPORTER_OTLP_PROTOCOL`, for traces only (over it)."),
  OTEL_SERVICE_NAME: z
    .string()
    .min(1)
    .optional()
    .describe(
      "The traces' `service.name`; unset: `agents-<actor>` (`agents-agent`, `agents-critic`, `agents-supervisor`, `agents-tools`). `OTEL_RESOURCE_ATTRIBUTES` adds attributes.",
    ),
  OTEL_BSP_SCHEDULE_DELAY: z.coerce
    .number()
    .int()
    .min(1)
    .max(3_600_000)
    .default(5_000)
    .describe(
      "How often, in milliseconds, finished spans are sent in a batch; whatever is left is sent when the actor stops.",
    ),
});
export type TracingEnv = z.infer<typeof TracingEnv>;

/** Whether, and where, an actor exports its traces: the decision, made from its environment alone. */
export type TracingPlan =
  { on: false; why: string } | { on: true; serviceName: string; target: string; scheduleDelayMs: number };

/** The exporter's own default when `OTEL_TRACES_EXPORTER=otlp` names no endpoint. */
const DEFAULT_TRACES_URL = "http://localhost:4318/v1/traces";

/**
 * Whether an actor's traces are on, and where they go. A value the built-in exporter cannot
 * honour (another exporter, another protocol) is refused with INVALID_INPUT rather than ignored.
 */
export function tracingPlan(env: TracingEnv, actor: string): TracingPlan {
  if (env.OTEL_SDK_DISABLED) return { on: false, why: "OTEL_SDK_DISABLED is true" };
  const exporter = env.OTEL_TRACES_EXPORTER?.trim() || undefined;
  if (exporter === "none") return { on: false, why: "OTEL_TRACES_EXPORTER is none" };
  if (exporter !== undefined && exporter !== "otlp")
    throw new AgentError(
      "INVALID_INPUT",
      `OTEL_TRACES_EXPORTER '${exporter}' is not built in: set it to otlp (traces over OTLP/HTTP) or none, or unset it`,
    );
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.replace(/\/+$/, "");
  const target =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
    (base === undefined ? undefined : `${base}/v1/traces`) ??
    (exporter === "otlp" ? DEFAULT_TRACES_URL : undefined);
  if (target === undefined) return { on: false, why: "no OTLP endpoint is set" };
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL)?.trim();
  if (protocol && protocol !== "http/json")
    throw new AgentError(
      "INVALID_INPUT",
      `OTLP protocol '${protocol}' is not built in: set OTEL_EXPORTER_OTLP_PROTOCOL (and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL) to http/json, which the OpenTelemetry collector, Jaeger and Tempo accept on their OTLP/HTTP port (4318), or unset it`,
    );
  return {
    on: true,
    serviceName: env.OTEL_SERVICE_NAME ?? `agents-${actor}`,
    target,
    scheduleDelayMs: env.OTEL_BSP_SCHEDULE_DELAY,
  };
}
