import { describe, expect, it } from "vitest";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { SubmitRequest } from "../../shared/contracts/cluster.js";
import { startRun, transition } from "../../shared/loop/fsm.js";
import { replay } from "../../shared/loop/replay.js";
import type { LoopConfig, Transition } from "../../shared/loop/state.js";
import { statusOf } from "../../shared/loop/status.js";
import { ActorEnv, parseEnv } from "../../shared/runtime/config.js";
import { AgentError, fromErrorPayload } from "../../shared/runtime/errors.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { describeTool } from "../../shared/tools/tool.js";
import { bar, statusLine } from "../../services/cli/render.js";
import { childRunId } from "../../shared/bus/fanout.js";
import { MAX_RETRY_DELAY_MS, retryDelay } from "../../services/agent/lease-failure.js";
import {
  handedBack as wasHandedBack,
  MAX_OUTAGE_RETRY_DELAY_MS,
  modelFailure,
  retrying,
} from "../../services/agent/model-outage.js";
import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import { initialGuardState, type GuardLimits } from "../../shared/loop/guard.js";
import { jobOfWriter, leaseWriterId, workerOfWriter } from "../../services/agent/writer-id.js";
import { writerOfMessageId } from "../../shared/bus/run-log.js";
import { echoCall, runner, spec, START } from "../helpers/fixtures.js";

const config: LoopConfig = { tools: [describeTool(echoTool)] };

const walOf = (t: Transition): WalRecord[] => t.effects.flatMap((e) => (e.type === "wal" ? [e.record] : []));

/** Feeds answers until the run waits on a model call; `log` collects every WAL record on the way. */
function untilModel(t: Transition, log: WalRecord[] = []): Transition {
  let current = t;
  log.push(...walOf(t));
  for (let i = 0; i < 10 && current.state.pending?.kind !== "model"; i++) {
    current = transition(current.state, { type: "memoryRecalled", at: START, memories: [] }, config);
    log.push(...walOf(current));
  }
  return current;
}

function started(auditSeq?: number): Transition {
  return startRun(
    {
      type: "start",
      at: START,
      spec: RunSpec.parse(spec({ script: [echoCall("x")] })),
      runId: "r1",
      rootRunId: "r1",
      depth: 0,
      ...(auditSeq !== undefined ? { auditSeq } : {}),
    },
    config,
  );
}

describe("taking over a run", () => {
  it("the first audit seq follows the events the supervisor already published", () => {
    const first = started(1).effects.flatMap((e) => (e.type === "audit" ? [e.event.seq] : []));
    expect(first[0]).toBe(2);
    expect(started().effects.find((e) => e.type === "audit")).toMatchObject({ event: { seq: 1 } });
  });

  it("'recovered' logs run.resumed and re-issues the effect the run was waiting on, and is replayable", () => {
    const log: WalRecord[] = [];
    const waiting = untilModel(started(), log);
    const awaited = waiting.effects.find((e) => e.type === "callModel");
    expect(awaited).toBeDefined();
    const taken = transition(waiting.state, { type: "recovered", at: START + 5, by: "agent-2" }, config);
    expect(taken.effects.find((e) => e.type === "audit")).toMatchObject({
      event: { kind: "run.resumed", actor: "agent", data: { by: "agent-2", waitingFor: "model" } },
    });
    expect(taken.effects.find((e) => e.type === "callModel")).toEqual(awaited);
    expect(taken.state.pending).toEqual(waiting.state.pending);
    const replayed = replay([...log, ...walOf(taken)], config);
    expect(replayed.state.transitionHash).toBe(taken.state.transitionHash);
    expect(replayed.unwritten).toEqual([]);
  });

  it("'recovered' is refused when the run waits on nothing", () => {
    const halted = transition(
      untilModel(started()).state,
      { type: "halt", at: START, reason: "r", by: "op" },
      config,
    );
    expect(() => transition(halted.state, { type: "recovered", at: START, by: "w" }, config)).toThrow(
      /does not fit/,
    );
  });

  it("the tree's global cap circuit-breaks a run waiting on a model call, and nothing else", () => {
    const waiting = untilModel(started());
    const capped = transition(
      waiting.state,
      { type: "globalCapReached", at: START, message: "12 used" },
      config,
    );
    expect(capped.state.status).toBe("failed");
    expect(capped.state.terminal?.reason).toBe("globalCap");
    expect(
      capped.effects.find((e) => e.type === "audit" && e.event.kind === "guard.circuit_break"),
    ).toMatchObject({
      event: { data: { guardReason: "globalCap" } },
    });
    expect(() =>
      transition(started().state, { type: "globalCapReached", at: START, message: "x" }, config),
    ).toThrow(/does not fit/);
  });

  it("replay returns the records a crash left unwritten at the end of the last transition", async () => {
    const result = await runner().run(spec({ script: [echoCall("a"), { text: "done" }] }));
    const last = result.wal.at(-1);
    const replayed = replay(result.wal.slice(0, -1), config);
    expect(replayed.unwritten).toEqual([last]);
    expect(replay(result.wal, config).unwritten).toEqual([]);
  });

  it("a run's status carries its tree, terminal output and provenance", async () => {
    const result = await runner().run(spec({ script: [{ text: "hi" }] }));
    const status = statusOf(result.state, START);
    expect(status).toMatchObject({
      status: "committed",
      rootRunId: result.state.runId,
      depth: 0,
      terminal: { kind: "COMMIT", output: "hi", provenance: { runId: result.state.runId } },
    });
  });
});

const LIMITS: GuardLimits = { maxIterations: 20, maxToolCalls: 50, maxCostUsd: 0, maxRepairs: 3 };

describe("cluster helpers", () => {
  it("a failed lease's job waits the base delay when the error is retryable, doubling up to a cap when not", () => {
    const stuck = new AgentError("NONDETERMINISM", "replay diverged");
    expect([1, 2, 3, 4].map((n) => retryDelay(stuck, n, 5_000))).toEqual([5_000, 10_000, 20_000, 40_000]);
    expect(retryDelay(stuck, 9, 5_000)).toBe(MAX_RETRY_DELAY_MS);
    expect(retryDelay(stuck, 10_000, 5_000)).toBe(MAX_RETRY_DELAY_MS);
    expect([1, 50].map((n) => retryDelay(new AgentError("BUS_UNAVAILABLE", "gone"), n, 5_000))).toEqual([
      5_000, 5_000,
    ]);
    // A model provider's outage backs off, up to a minute: a rate limit is not hammered by every run.
    const outage = new AgentError("MODEL_RATE_LIMITED", "429");
    expect([1, 2, 3, 4, 5, 30].map((n) => retryDelay(outage, n, 5_000))).toEqual([
      5_000,
      10_000,
      20_000,
      40_000,
      MAX_OUTAGE_RETRY_DELAY_MS,
      MAX_OUTAGE_RETRY_DELAY_MS,
    ]);
    // A turn an open breaker refused comes back when the breaker lets one try, whatever its delivery.
    const state = { guard: initialGuardState(0), limits: LIMITS };
    const refusedBy = (breaker: { until: number; state?: string }): AgentError => {
      const error = {
        code: "MODEL_UNAVAILABLE",
        message: "not asked",
        retryable: true,
        details: { breaker },
      };
      const verdict = modelFailure(
        { type: "modelFailed", at: 0, requestId: "m-1", error },
        state,
        0,
        600_000,
        40_000,
      );
      if (!("handBack" in verdict)) throw new Error("expected a hand-back");
      return verdict.handBack;
    };
    const refused = refusedBy({ until: 52_000 });
    expect([1, 6].map((n) => retryDelay(refused, n, 5_000, 40_000))).toEqual([12_000, 12_000]);
    expect(retryDelay(refused, 1, 5_000, 51_000)).toBe(5_000);
    expect(retryDelay(refused, 1, 5_000, -100_000)).toBe(MAX_OUTAGE_RETRY_DELAY_MS);
    // Refused while another turn tries the provider: back after the base delay, not the breaker's.
    expect(retryDelay(refusedBy({ until: 52_000, state: "probing" }), 6, 5_000, 40_000)).toBe(5_000);
  });

  it("a model turn failed by an outage hands its run back until it has waited AGENT_MODEL_OUTAGE_MS or the run's deadline passed; other errors fail the run", () => {
    const state = { guard: initialGuardState(0), limits: { ...LIMITS, deadlineMs: 60_000 } };
    const failed = (code: string): Extract<LoopEvent, { type: "modelFailed" }> => ({
      type: "modelFailed",
      at: 0,
      requestId: "model-1",
      error: { code, message: "provider error (503)", retryable: true },
    });
    const handedBack = modelFailure(failed("MODEL_UNAVAILABLE"), state, 1_000, 10_000, 4_000);
    expect(handedBack).toMatchObject({ handBack: { code: "MODEL_UNAVAILABLE", retryable: true } });
    expect("handBack" in handedBack && handedBack.handBack.message).toContain("waiting on it for 3 s");
    // The worker tells a hand-back from a lease that failed (a warning, not an error).
    expect("handBack" in handedBack && wasHandedBack(handedBack.handBack)).toBe(true);
    expect(wasHandedBack(new AgentError("MODEL_UNAVAILABLE", "provider error (503)"))).toBe(false);
    for (const code of ["MODEL_RATE_LIMITED", "MODEL_TIMEOUT", "MODEL_NETWORK", "BUS_UNAVAILABLE"]) {
      expect(modelFailure(failed(code), state, 1_000, 10_000, 4_000), code).toHaveProperty("handBack");
    }
    // Not an outage: the request itself is wrong, asking again would not help.
    for (const code of ["MODEL_REJECTED", "MODEL_AUTH", "MODEL_BAD_RESPONSE", "SCRIPT_EXHAUSTED"]) {
      expect(modelFailure(failed(code), state, 1_000, 10_000, 4_000), code).toEqual({ fail: failed(code) });
    }
    // Waited long enough: the run fails, saying for how long its turn was tried.
    expect(modelFailure(failed("MODEL_UNAVAILABLE"), state, 1_000, 10_000, 11_000)).toMatchObject({
      fail: { error: { code: "MODEL_UNAVAILABLE", message: "provider error (503) (tried for 10 s)" } },
    });
    // The run's deadline (60 s from its start) passed first.
    expect(modelFailure(failed("MODEL_UNAVAILABLE"), state, 55_000, 10_000, 61_000)).toMatchObject({
      fail: { error: { message: "provider error (503) (the run's deadline passed)" } },
    });
    // A critic's review out of reach is handed back the same way.
    const review: Extract<LoopEvent, { type: "criticFailed" }> = {
      type: "criticFailed",
      at: 0,
      error: { code: "BUS_UNAVAILABLE", message: "nobody is serving 'critic.review'", retryable: true },
    };
    const reviewBack = modelFailure(review, state, 1_000, 10_000, 2_000);
    expect("handBack" in reviewBack && reviewBack.handBack.message).toContain(
      "the review is asked again later",
    );
    // AGENT_MODEL_OUTAGE_MS=0: the provider's failure fails the run as it came.
    expect(modelFailure(failed("MODEL_UNAVAILABLE"), state, 1_000, 0, 4_000)).toEqual({
      fail: failed("MODEL_UNAVAILABLE"),
    });
  });

  it("a run handed back for an outage no breaker names says in its status what it retries, until when", () => {
    const failed: Extract<LoopEvent, { type: "modelFailed" }> = {
      type: "modelFailed",
      at: 0,
      requestId: "model-1",
      error: { code: "MODEL_RATE_LIMITED", message: "provider error (429): slow down", retryable: true },
    };
    const iso = (ms: number): string => new Date(ms).toISOString();
    expect(retrying(failed, 1_000, 11_000, 6_000)).toEqual({
      for: "model turn",
      code: "MODEL_RATE_LIMITED",
      reason: "provider error (429): slow down",
      since: iso(1_000),
      nextTry: iso(6_000),
      giveUpAt: iso(11_000),
    });
    // Offered again after it stops waiting: it is tried (and fails) when it stops.
    expect(retrying(failed, 1_000, 11_000, 70_000).nextTry).toBe(iso(11_000));
    const review: Extract<LoopEvent, { type: "criticFailed" }> = {
      type: "criticFailed",
      at: 0,
      error: { code: "BUS_UNAVAILABLE", message: "nobody is serving 'critic.review'", retryable: true },
    };
    const status = { ...statusOf(untilModel(started()).state, START) };
    const line = statusLine({ ...status, retrying: retrying(review, 1_000, 11_000, 6_000) });
    expect(line).toMatch(
      /retrying: review \(BUS_UNAVAILABLE: nobody is serving 'critic\.review'\), since 1970-01-01T00:00:01\.000Z, next try after 1970-01-01T00:00:06\.000Z, until 1970-01-01T00:00:11\.000Z$/,
    );
    expect(statusLine(status)).not.toContain("retrying");
  });

  it("a submit carries an optional parent envelope and still refuses specs without convergence", () => {
    expect(SubmitRequest.safeParse({ ...spec(), parent: { runId: "p", depth: 1 } }).success).toBe(true);
    expect(SubmitRequest.safeParse({ ...spec(), task: { prompt: "p" } }).success).toBe(false);
    expect(RunSpec.parse({ ...spec(), parent: { runId: "p", depth: 1 } })).not.toHaveProperty("parent");
  });

  it("configuration is parsed once with every problem named", () => {
    expect(parseEnv(ActorEnv, {})).toMatchObject({
      NATS_URL: "nats://127.0.0.1:4222",
      AGENTS_PREFIX: "agents",
    });
    expect(() => parseEnv(ActorEnv, { AGENTS_PREFIX: "a.b", LOG_LEVEL: "loud" })).toThrow(
      /AGENTS_PREFIX.*LOG_LEVEL|LOG_LEVEL.*AGENTS_PREFIX/,
    );
  });

  it("errors that crossed the wire keep known codes and wrap unknown ones", () => {
    expect(fromErrorPayload({ code: "POOL_FULL", message: "full" })).toMatchObject({
      code: "POOL_FULL",
      retryable: true,
    });
    expect(fromErrorPayload({ code: "E_WEIRD", message: "boom" }, "TOOL_FAILED")).toMatchObject({
      code: "TOOL_FAILED",
      message: "[E_WEIRD] boom",
    });
  });

  it("child runIds are stable per parent, action and position and stay valid tokens", () => {
    expect(childRunId("p1", "act-2", 0)).toBe("p1-act-2-1");
    const long = childRunId("x".repeat(64), "act-9", 11);
    expect(long).toHaveLength(64);
    expect(long.endsWith("-act-9-12")).toBe(true);
    expect(childRunId("p", "a.b", 0)).toBe("p-a_b-1");
    // Cut to fit, parents alike in their first characters still name children of their own.
    // Cut to fit, two siblings' children (their ids alike but for the end a cut leaves out) still
    // have ids of their own.
    const root = "order-2026-11-27-customer-4411-line-items-batch-7";
    const siblings = [0, 1].map((i) => childRunId(root, "act-1", i));
    expect(siblings).toEqual([`${root}-act-1-1`, `${root}-act-1-2`]);
    const nephews = siblings.map((s) => childRunId(s, "act-2", 0));
    for (const id of nephews)
      expect(id).toMatch(/^order-2026-11-27-customer-4411-line-items-b_[0-9a-f]{12}-act-2-1$/);
    expect(nephews[0]).toHaveLength(64);
    expect(nephews[0]).not.toBe(nephews[1]);
    expect(childRunId(siblings[0]!, "act-2", 0)).toBe(nephews[0]);
  });

  it("watch bars show usage against limits", () => {
    expect(bar(5, 10, 10)).toBe("█████░░░░░ 5/10");
    expect(bar(3, undefined)).toBe("3");
    expect(bar(30, 10, 4)).toBe("████ 30/10");
    const line = statusLine(
      {
        runId: "r",
        status: "running",
        phase: "ACT",
        iteration: 2,
        usage: { inputTokens: 5, outputTokens: 6, costUsd: 0, modelCalls: 2, toolCalls: 1 },
        updatedAt: new Date(START).toISOString(),
      },
      { maxIterations: 4 },
    );
    expect(line).toMatch(/running\s+ACT/);
    expect(line).toContain("2/4");
    expect(line).toContain("tokens 11");
  });
});

describe("a WAL writer names the job it drives the run with", () => {
  it("the job's stream sequence is read back from the writer id, and from the WAL message id that carries it", () => {
    const writer = leaseWriterId("agent-7", 12, "ab12cd34", 4_051);
    expect(writer).toBe("agent-7-12-ab12cd34.j4051");
    expect(jobOfWriter(writer)).toBe(4_051);
    expect(writerOfMessageId(`run-1:38:${writer}`)).toBe(writer);
    expect(jobOfWriter(writerOfMessageId(`run-1:38:${writer}`))).toBe(4_051);
    // The worker to ask whether it still holds the job (see stillHeldBy), dashes in its id and all.
    expect(workerOfWriter(writer)).toBe("agent-7");
    expect(workerOfWriter(leaseWriterId("pod-a1-9", 3, "0f-e-d-c", 7))).toBe("pod-a1-9");
    expect(workerOfWriter("agent-7-12-ab12cd34")).toBeUndefined();
  });

  it("an older build's writer id, or a message id of another shape, names no job", () => {
    expect(jobOfWriter("agent-7-12-ab12cd34")).toBeUndefined();
    expect(jobOfWriter("agent-7-12-ab12cd34.j0")).toBeUndefined();
    expect(jobOfWriter("agent-7-12-ab12cd34.jx")).toBeUndefined();
    expect(jobOfWriter(undefined)).toBeUndefined();
    expect(writerOfMessageId("run-1:start")).toBeUndefined();
    expect(writerOfMessageId(undefined)).toBeUndefined();
  });
});
