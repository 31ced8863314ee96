import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect } from "vitest";
import { z } from "zod";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import type { ModelRequest, ModelResponse } from "../../shared/contracts/model.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { openActorBus, type ActorBus } from "../../shared/bus/actor.js";
import { serveTool, type ToolServiceDeps } from "../../shared/bus/tool-service.js";
import { followRun } from "../../shared/bus/run-progress.js";
import { readLog, type StoredRecord } from "../../shared/bus/run-log.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { ActorEnv } from "../../shared/runtime/config.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { ToolInvoker } from "../../shared/tools/invoke.js";
import { defineTool, type AnyTool } from "../../shared/tools/tool.js";
import { ClusterClient } from "../../services/cli/client.js";
import { LocalCluster, type ActorLaunch } from "../../services/local/cluster.js";
import type { RunSpecInput } from "../../shared/contracts/run-spec.js";
import { spec } from "./fixtures.js";
import { startNats, type TestNats } from "./nats-server.js";

export interface ClusterSuite {
  server: TestNats;
  cluster: LocalCluster;
  bus: ActorBus;
  client: ClusterClient;
  prefix: string;
  logDir: string;
  /** Resolves with the run's status once `until` holds (or rejects after `timeoutMs`). */
  waitFor(runId: string, until: (s: RunStatus) => boolean, timeoutMs?: number): Promise<RunStatus>;
  audit(runId: string): Promise<AuditEvent[]>;
  wal(runId: string): Promise<StoredRecord[]>;
  /** The worker (actor name) that wrote a run's last WAL record: its writer id is in the message id. */
  lastWriter(runId: string): Promise<string | undefined>;
  logs(): Promise<string>;
  /** One actor's log. */
  log(name: string): Promise<string>;
  /** Serves a tool from the test process (a service the cluster discovers like any other). */
  serveTool(tool: AnyTool): { stop(): void };
  /** The environment agentctl (or any client process) needs to reach this suite's cluster. */
  env(): NodeJS.ProcessEnv;
}

export const settled = (s: { status: string }): boolean =>
  ["committed", "failed", "halted"].includes(s.status);
/** Whether a run has ended for good: committed or failed (a halted run may resume). */
export const ended = (s: { status: string }): boolean => s.status === "committed" || s.status === "failed";
export const AGENTCTL = fileURLToPath(new URL("../../dist/services/cli/main.js", import.meta.url));
export const runProcess = promisify(execFile);

/**
 * agentctl against a suite's cluster: `run` answers its output (and rejects when it fails);
 * `refusal` answers the structured error it printed when it failed, undefined when it did not.
 */
export function agentctlOf(suite: Pick<ClusterSuite, "env">): {
  run: (...args: string[]) => Promise<{ stdout: string; stderr: string }>;
  refusal: (...args: string[]) => Promise<{ code: string; message: string } | undefined>;
} {
  return {
    run: (...args) => runProcess(process.execPath, [AGENTCTL, ...args], { env: suite.env() }),
    refusal: async (...args) => (await agentctlFails(suite, args)).error,
  };
}

/** agentctl run against a suite's cluster, expected to fail: its exit code and the structured error it printed last. */
export async function agentctlFails(
  suite: Pick<ClusterSuite, "env">,
  args: string[],
): Promise<{ code: number; error?: { code: string; message: string } }> {
  const failed = await runProcess(process.execPath, [AGENTCTL, ...args], { env: suite.env() }).then(
    () => ({ stderr: "", code: 0 }),
    (err: { stderr: string; code: number }) => err,
  );
  const printed = JSON.parse(failed.stderr.trim().split("\n").at(-1) ?? "{}") as {
    error?: { code: string; message: string };
  };
  return { code: failed.code, ...(printed.error ? { error: printed.error } : {}) };
}

export interface ClusterSuiteOptions {
  actors: ActorLaunch[];
  env?: Record<string, string>;
  /** A server of the suite's own, which its tests may restart (TestNats.restart). */
  own?: boolean;
  /** A server of the suite's own, started with this nats-server configuration file too. */
  configFile?: string;
}

/**
 * The cluster the operator-command suites (halt, cancel, reconciliation) run on: a supervisor, the
 * echo tool service and two agent workers, which hand a job back 500 ms after a failed lease.
 */
export const OPERATOR_CLUSTER: ClusterSuiteOptions = {
  actors: [
    { kind: "supervisor" },
    { kind: "tools", env: { TOOLS: "echo" } },
    { kind: "agent", name: "agent-1" },
    { kind: "agent", name: "agent-2" },
  ],
  env: { AGENT_RETRY_DELAY_MS: "500" },
};

/** The tree iteration cap of FULL_CLUSTER. */
export const FULL_CLUSTER_TREE_CAP = 12;

/**
 * Every kind of actor (cluster.test.ts, cluster-trees.test.ts): a supervisor allowing trees two
 * deep and FULL_CLUSTER_TREE_CAP iterations a tree, the echo and memory tools, a critic, and two
 * agent workers with a 2 s ack wait.
 */
export const FULL_CLUSTER: ClusterSuiteOptions = {
  actors: [
    { kind: "supervisor" },
    { kind: "tools", env: { TOOLS: "echo,memory" } },
    { kind: "critic" },
    { kind: "agent", name: "agent-1" },
    { kind: "agent", name: "agent-2" },
  ],
  env: {
    AGENT_ACK_WAIT_MS: "2000",
    AGENT_RETRY_DELAY_MS: "500",
    SUPERVISOR_MAX_DEPTH: "2",
    SUPERVISOR_TREE_ITERATION_CAP: String(FULL_CLUSTER_TREE_CAP),
  },
};

/**
 * A real cluster for one suite: a nats-server, and each actor as its own OS process under a
 * prefix of the suite's own, plus a client connection for the test itself.
 */
export function useClusterSuite(name: string, options: ClusterSuiteOptions): ClusterSuite {
  const prefix = `${name}${process.pid}x${Date.now().toString(36)}`;
  const suite = { prefix } as ClusterSuite;
  beforeAll(async () => {
    suite.server = await startNats({
      own: options.own ?? false,
      ...(options.configFile ? { configFile: options.configFile } : {}),
    });
    suite.logDir = await mkdtemp(join(tmpdir(), `cluster-${name}-`));
    suite.cluster = new LocalCluster({
      natsUrl: suite.server.url,
      useConfUsers: false,
      logDir: suite.logDir,
      env: { AGENTS_PREFIX: prefix, LOG_LEVEL: "info", ...credentials(suite.server), ...options.env },
    });
    const [first, ...rest] = options.actors;
    if (first) await suite.cluster.launch(first);
    await Promise.all(rest.map((a) => suite.cluster.launch(a)));
    suite.bus = await openActorBus(
      ActorEnv.parse({ NATS_URL: suite.server.url, AGENTS_PREFIX: prefix, ...credentials(suite.server) }),
      `${name}-test`,
      { clock: systemClock, random: systemRandom, logger: silentLogger },
    );
    suite.client = new ClusterClient(suite.bus);
  }, 60_000);
  afterAll(async () => {
    await suite.cluster?.stop(5_000);
    await suite.bus?.nc.drain();
    await suite.server?.stop();
  }, 30_000);
  suite.waitFor = async (runId, until, timeoutMs = 20_000) => {
    const stop = AbortSignal.timeout(timeoutMs);
    let last: RunStatus | undefined;
    for await (const status of followRun(suite.bus, runId, stop)) {
      last = status;
      if (until(status)) return status;
    }
    throw new Error(
      `run ${runId} did not reach the expected status in ${timeoutMs} ms (last: ${JSON.stringify(last)})`,
    );
  };
  suite.audit = (runId) => suite.client.audit(runId);
  suite.wal = async (runId) => (await readLog(suite.bus, runId)).records;
  suite.lastWriter = async (runId) => {
    const last = await suite.bus.jsm.streams.getMessage(suite.bus.subjects.streams().log, {
      last_by_subj: suite.bus.subjects.logAll(runId),
    });
    return /^[^:]+:\d+:(agent-\w+)-/.exec(last?.header?.get("Nats-Msg-Id") ?? "")?.[1];
  };
  suite.logs = async () => {
    const files = await readdir(suite.logDir);
    const texts = await Promise.all(files.map((f) => readFile(join(suite.logDir, f), "utf8")));
    return texts.join("\n");
  };
  suite.log = (actor) => readFile(join(suite.logDir, `${actor}.log`), "utf8");
  suite.serveTool = (tool) => {
    const { bus } = suite;
    return serveFromTest(tool, { nc: bus.nc, subjects: bus.subjects, idempotency: bus.buckets.idempotency });
  };
  suite.env = () => ({
    ...process.env,
    NATS_URL: suite.server.url,
    AGENTS_PREFIX: prefix,
    ...credentials(suite.server),
  });
  return suite;
}

/** The environment an actor or agentctl needs to reach the suite's server. */
export function credentials(server: TestNats): Record<string, string> {
  return server.user ? { NATS_USER: server.user, NATS_PASSWORD: server.pass ?? "" } : {};
}

/**
 * Serves a tool from a test process on the given connection, configured as the tools actor is:
 * the worker retries, so the service runs each call once.
 */
export function serveFromTest(
  tool: AnyTool,
  deps: Pick<ToolServiceDeps, "nc" | "subjects" | "idempotency">,
): { stop(): void } {
  const subs = serveTool(tool, {
    ...deps,
    invoker: new ToolInvoker({ clock: systemClock, random: systemRandom, policy: { retries: 0 } }),
    clock: systemClock,
    random: systemRandom,
    logger: silentLogger,
  });
  return { stop: () => subs.forEach((sub) => sub.unsubscribe()) };
}

/** A non-idempotent tool with a visible side effect, and its executions counted per idempotency key. */
export interface ChargeTool {
  tool: AnyTool;
  executions: Map<string, number>;
  /** The idempotency key of the first execution, once it started. */
  started: Promise<string>;
}

/**
 * A charge tool taking `delayMs` per call, to serve where a test wants it. With `approvalToken`, it
 * charges only with a human's approval (APPROVAL_REQUIRED with that token until it has one).
 */
export function chargeTool(delayMs: number, name = "charge", approvalToken?: string): ChargeTool {
  const executions = new Map<string, number>();
  let onStart: (key: string) => void = () => undefined;
  const started = new Promise<string>((resolve) => (onStart = resolve));
  const tool = defineTool({
    name,
    description: "Charges an amount (a side effect that must happen once).",
    input: z.object({ amount: z.number() }),
    capability: { kind: "compute" },
    reversibility: "irreversible",
    idempotent: false,
    execute: async (input, ctx) => {
      if (approvalToken && ctx.approval?.token !== approvalToken)
        throw new AgentError("APPROVAL_REQUIRED", `a ${name} needs a human`, {
          details: { token: approvalToken, reason: `${name} ${input.amount}` },
        });
      executions.set(ctx.idempotencyKey, (executions.get(ctx.idempotencyKey) ?? 0) + 1);
      onStart(ctx.idempotencyKey);
      await systemClock.sleep(delayMs);
      return { output: { charged: input.amount } };
    },
  });
  return { tool, executions, started };
}

/** A charge tool served from the test process on the suite's connection. */
export function serveCharge(
  suite: ClusterSuite,
  delayMs: number,
  name = "charge",
  approvalToken?: string,
): { executions: Map<string, number>; started: Promise<string> } {
  const { tool, executions, started } = chargeTool(delayMs, name, approvalToken);
  suite.serveTool(tool);
  return { executions, started };
}

/**
 * What a run's audit trail must show after faults: gapless, committed once, and every execution of
 * the charge tool `tool` for this run in it as `tool.completed`, and nothing else (no outcome lost
 * or invented). Returns the events.
 */
export async function expectChargesInTrail(
  suite: ClusterSuite,
  runId: string,
  tool: string,
  executions: ReadonlyMap<string, number>,
): Promise<AuditEvent[]> {
  const events = await suite.audit(runId);
  expect(
    events.map((e) => e.seq),
    runId,
  ).toEqual(events.map((_, i) => i + 1));
  expect(
    events.filter((e) => e.kind === "run.committed"),
    runId,
  ).toHaveLength(1);
  const charged = [...executions.keys()].filter((key) => key.startsWith(`${runId}:`)).length;
  const completed = events.filter((e) => e.kind === "tool.completed" && e.actor === `tool:${tool}`);
  expect(completed, runId).toHaveLength(charged);
  return events;
}

/** A RunSpec whose model calls the charge tool `tool` `payments` times (amounts 1, 2, …), then answers. */
export function payingRun(tool: string, payments: number, answer: string): RunSpecInput {
  const calls = Array.from({ length: payments }, (_, i) => ({
    toolCalls: [{ name: tool, input: { amount: i + 1 } }],
  }));
  return spec({ script: [...calls, { text: answer }], tools: [tool] });
}

/** Submits a run that calls the charge tool `tool` once, then finishes with "charged <amount>". */
export function chargeRun(suite: ClusterSuite, tool: string, amount: number): Promise<{ runId: string }> {
  return suite.client.submit(
    spec({
      script: [
        { toolCalls: [{ name: tool, input: { amount } }] },
        { toolCalls: [{ name: "finish", input: { answer: `charged ${amount}` } }] },
      ],
      tools: [tool],
    }),
  );
}

/** A payingRun whose turns a model actor named `model` answers (see payingPlanner), asked `prompt`. */
export function payingActorRun(tool: string, payments: number, model: string, prompt: string): RunSpecInput {
  const scripted = payingRun(tool, payments, "");
  return {
    ...scripted,
    task: { ...scripted.task, prompt },
    agent: { ...scripted.agent, model: { provider: "actor", name: model } },
  };
}

/**
 * A model actor's turns for payingActorRun's runs, reading each run's progress from the messages it
 * is sent, as the scripted model reads its script: it calls `tool` until the run has `payments`
 * results, then answers `answer(prompt)`, each turn after `turnMs`. `asked` counts the turns asked,
 * by prompt and results so far: a turn asked again has the same key.
 */
export function payingPlanner(
  tool: string,
  payments: number,
  answer: (prompt: string) => string,
  turnMs: number,
): { complete: (request: ModelRequest) => Promise<ModelResponse>; asked: Map<string, number> } {
  const asked = new Map<string, number>();
  const complete = async (request: ModelRequest): Promise<ModelResponse> => {
    const paid = request.messages.filter((m) => m.role === "tool").length;
    const prompt = request.messages.find((m) => m.role === "user")?.content ?? "";
    const key = `${prompt}#${paid}`;
    asked.set(key, (asked.get(key) ?? 0) + 1);
    await systemClock.sleep(turnMs);
    const base = { usage: { inputTokens: 1, outputTokens: 1 }, costUsd: 0, model: "planner" };
    return paid < payments
      ? {
          ...base,
          text: "",
          stopReason: "toolUse",
          toolCalls: [{ id: `c${paid}`, name: tool, input: { amount: paid + 1 } }],
        }
      : { ...base, text: answer(prompt), stopReason: "endTurn", toolCalls: [] };
  };
  return { complete, asked };
}

/** Submits `count` runs each answering "Hello from run <i>", which a critic's regex check passes. */
export async function submitReviewedRuns(suite: ClusterSuite, count: number): Promise<string[]> {
  const runIds: string[] = [];
  for (let run = 0; run < count; run += 1) {
    const runSpec = spec({
      script: [{ text: `Hello from run ${run}` }],
      tools: [],
      critic: { checks: [{ kind: "regex", pattern: "^Hello" }] },
    });
    runIds.push((await suite.client.submit(runSpec)).runId);
  }
  return runIds;
}

/** Each of submitReviewedRuns' runs commits with its own answer, passed at its first review. */
export async function expectFirstReviewsPassed(suite: ClusterSuite, runIds: string[]): Promise<void> {
  const statuses = await Promise.all(runIds.map((id) => suite.waitFor(id, settled, 30_000)));
  for (const [i, runId] of runIds.entries()) {
    expect(statuses[i], runId).toMatchObject({
      status: "committed",
      terminal: { output: `Hello from run ${i}` },
    });
    const verdicts = (await suite.audit(runId)).filter((e) => e.kind === "critic.verdict");
    expect(
      verdicts.map((e) => e.status),
      runId,
    ).toEqual(["passed"]);
  }
}
