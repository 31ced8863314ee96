import { z } from "zod";
import { AgentError } from "./errors.js";
import { TracingEnv } from "./tracing-env.js";

/** The subject prefix of a cluster that sets no AGENTS_PREFIX (the one the shipped permissions grant). */
export const DEFAULT_PREFIX = "agents";

/** A whole number from an environment variable (a string), in [min, max], `fallback` when unset. */
export const whole = (min: number, max: number, fallback: number) =>
  z.coerce.number().int().min(min).max(max).default(fallback);

/** Milliseconds from an environment variable (a string), with a default and sane bounds. */
export const millis = (defaultMs: number) => whole(1, 86_400_000, defaultMs);

/** MEMORY_RECALL_WINDOW, for the agent workers and the memory tool. */
export const memoryRecallWindow = whole(0, 100_000, 1_000).describe(
  "How many of an agent's most recently stored memories a recall reads (at a run's start, and by the `memory` tool), without reading older ones; 0: every memory, however many.",
);

/**
 * MODEL_KEY_ENVS: the environment variables a spec's model may name as its key (`apiKeyEnv`),
 * comma-separated, `*` matching any run of name characters (`TEAM_*_KEY`); see key-envs.ts.
 */
export const ModelKeyEnvs = z
  .string()
  .regex(
    /^\s*[A-Za-z0-9_*]+(\s*,\s*[A-Za-z0-9_*]+)*\s*$/,
    "comma-separated variable names, `*` for any characters",
  )
  .transform((text) => text.split(",").map((name) => name.trim()));

/**
 * Settings every actor reads from its environment. Each `.describe` is the user's documentation:
 * docs/configuration.md is generated from it.
 */
export const ActorEnv = z.object({
  NATS_URL: z
    .string()
    .min(1)
    .default("nats://127.0.0.1:4222")
    .describe("The NATS servers to connect to: one URL, or several comma-separated."),
  NATS_USER: z
    .string()
    .min(1)
    .optional()
    .describe(
      "The NATS user to log in as (the shipped `nats.conf` has one per actor kind); unset: no login.",
    ),
  NATS_PASSWORD: z.string().optional().describe("The password of `NATS_USER`."),
  NATS_NKEY_SEED_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "A file holding the NKey seed (`SU…`) this actor logs in with, instead of `NATS_USER`: the server's config names its public key (`U…`). Read again at each reconnect, so a replaced seed takes effect without a restart.",
    ),
  NATS_CREDS_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "A NATS credentials file (a user JWT and its NKey seed, from `nsc`) to log in with, for a server in operator (JWT) mode; instead of `NATS_USER` or `NATS_NKEY_SEED_FILE`. Read again at each reconnect.",
    ),
  NATS_TLS_CA: z
    .string()
    .min(1)
    .optional()
    .describe(
      "A PEM file of the certificate authorities the NATS server's certificate must chain to (unset: the system's). Setting it, `NATS_TLS_CERT`, or a `tls://` URL in `NATS_URL` requires TLS: a server that offers none is refused (`BUS_TLS`). Read again at each reconnect.",
    ),
  NATS_TLS_CERT: z
    .string()
    .min(1)
    .optional()
    .describe(
      "A PEM file of this actor's client certificate, for a server that verifies clients (`verify: true`); with `NATS_TLS_KEY`. Read again at each reconnect, so a renewed certificate is used without a restart.",
    ),
  NATS_TLS_KEY: z
    .string()
    .min(1)
    .optional()
    .describe("A PEM file of the private key of `NATS_TLS_CERT`. Read again at each reconnect."),
  NATS_CONNECT_WAIT_MS: whole(0, 86_400_000, 60_000).describe(
    "How long, in milliseconds, an actor started before its NATS server answers (or while its JetStream does not) tries again, every second and with a warning, before it exits with `BUS_UNAVAILABLE`; 0: one try. A server that refuses the login is not waited for.",
  ),
  AGENTS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/)
    .default(DEFAULT_PREFIX)
    .describe(
      "The prefix of the cluster's subjects, streams and buckets (streams are `AGENT_*` under the default, `<PREFIX>_*` otherwise); the shipped permissions grant the default only.",
    ),
  AGENTS_REPLICAS: whole(1, 5, 1).describe(
    "How many copies of each stream and bucket an actor asks for when it provisions them (3 in production): an existing store is raised to it, never lowered; above 1 needs a JetStream cluster of at least that many servers up.",
  ),
  LOG_LEVEL: z
    .enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"])
    .default("info")
    .describe(
      "The least severe log lines an actor writes (pino JSON lines on stdout): `trace`, `debug`, `info`, `warn`, `error`, `fatal` or `silent`.",
    ),
  HEALTH_PORT: z.coerce
    .number()
    .int()
    .min(0)
    .max(65_535)
    .optional()
    .describe(
      "The port of `/healthz`, `/readyz` and `/metrics`; unset: 8080, or a free port (logged) when 8080 is taken; 0: a free port. A port set here that is taken stops the actor.",
    ),
  HEALTH_HOST: z
    .string()
    .min(1)
    .default("127.0.0.1")
    .describe(
      "The address the health server listens on: loopback, or `0.0.0.0` in a container so that the kubelet and Prometheus reach it.",
    ),
  // At least a second: the watch asks three times in it, and must not poll JetStream in a loop.
  JETSTREAM_SILENT_MS: whole(1_000, 86_400_000, 15_000).describe(
    "How long, in milliseconds, JetStream may go unanswered while the connection is up (a cluster without its quorum) before the actor logs an error, turns `/readyz` not ready and `agents_jetstream_answering` to 0, until it answers again; asked every third of it, and at least every 5 s.",
  ),
  // Checked here so that a malformed value stops the actor at its start, not at a run's first model call.
  MODEL_KEY_ENVS: ModelKeyEnvs.optional().describe(
    "The variables a spec's model may name as its key (`apiKeyEnv`), comma-separated, `*` for any name characters (`TEAM_*_KEY`); unset: `*_API_KEY`. Another is refused with `MODEL_KEY_DENIED`, so a spec cannot have any other variable (the NATS password) sent to its endpoint; a provider's own (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`) is always allowed.",
  ),
  // Traces: the standard OTEL_* variables (see tracing-env.ts and docs/traces.md).
  ...TracingEnv.shape,
});
export type ActorEnv = z.infer<typeof ActorEnv>;

/**
 * Parses an actor's configuration once, at start-up. A bad value stops the actor with every
 * problem listed (INVALID_INPUT), rather than failing later on first use.
 */
export function parseEnv<S extends z.ZodType>(
  schema: S,
  env: Readonly<Record<string, string | undefined>>,
): z.output<S> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    throw new AgentError("INVALID_INPUT", `invalid configuration: ${problems}`, {
      details: parsed.error.issues,
    });
  }
  return parsed.data;
}
