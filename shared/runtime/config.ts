import { z } from "zod";
import { AgentError } from "./errors.js";

/** The subject prefix of a cluster that sets no AGENTS_PREFIX (the one the shipped permissions grant). */
export const DEFAULT_PREFIX = "agents";

/** Milliseconds from an environment variable (a string), with a default and sane bounds. */
export const millis = (defaultMs: number) =>
  z.coerce.number().int().min(1).max(86_400_000).default(defaultMs);

/**
 * How many of an agent's most recently stored memories a recall reads (MEMORY_RECALL_WINDOW, for
 * the agent workers and the memory tool); 0 reads them all, however many there are.
 */
export const memoryRecallWindow = z.coerce.number().int().min(0).max(100_000).default(1_000);

/** Settings every actor reads from its environment (documented in docs/running-a-cluster.md's table). */
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

export const ActorEnv = z.object({
  NATS_URL: z.string().min(1).default("nats://127.0.0.1:4222"),
  NATS_USER: z.string().min(1).optional(),
  NATS_PASSWORD: z.string().optional(),
  /** How long an actor starting before its NATS server waits for one (0: one try). */
  NATS_CONNECT_WAIT_MS: z.coerce.number().int().min(0).max(86_400_000).default(60_000),
  AGENTS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/)
    .default(DEFAULT_PREFIX),
  AGENTS_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
  LOG_LEVEL: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]).default("info"),
  /**
   * `/healthz`, `/readyz` and `/metrics`; 0 picks a free port. Unset, 8080, or a free port when 8080
   * is taken (a second actor on one machine); set, the actor stops if it is taken.
   */
  HEALTH_PORT: z.coerce.number().int().min(0).max(65_535).optional(),
  /** Loopback by default; a container sets 0.0.0.0 so the kubelet and Prometheus can reach it. */
  HEALTH_HOST: z.string().min(1).default("127.0.0.1"),
  /**
   * How long JetStream may go unanswered, the connection up, before the actor says so once and its
   * `/readyz` says not ready (see JetStreamWatch); asked every third of it, at most every 5 s.
   */
  // At least a second: the watch asks three times in it, and must not poll JetStream in a loop.
  JETSTREAM_SILENT_MS: z.coerce.number().int().min(1_000).max(86_400_000).default(15_000),
  /** See ModelKeyEnvs: checked here so that a malformed value stops the actor at its start. */
  MODEL_KEY_ENVS: ModelKeyEnvs.optional(),
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
