import { describe, expect, it } from "vitest";
import { errors } from "@nats-io/transport-node";
import {
  accessOf,
  basicUser,
  checkBinding,
  hostName,
  hostRefusal,
  isLoopback,
  presented,
} from "../../services/console/access.js";
import { FeedLimit } from "../../services/console/feed-limit.js";
import { httpError } from "../../services/console/http-error.js";
import { LogWindow, parseTimelinePage, TIMELINE_EVENTS } from "../../services/console/log-window.js";
import { budgetsOf, runView, shorten } from "../../services/console/run-view.js";
import { filterRuns, LIST_LIMIT, parseRunsFilter } from "../../services/console/runs-filter.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { spec } from "../helpers/fixtures.js";

const TOKEN = "read-token-0123456789";
const OPERATE = "operate-token-0123456789";
const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

describe("console access: tokens, operate, binding", () => {
  it("reads a bearer token or a basic auth password, nothing else", () => {
    expect(presented(`Bearer ${TOKEN}`)).toBe(TOKEN);
    expect(presented(basic("alice", TOKEN))).toBe(TOKEN);
    expect(presented(basic("alice", "pa:ss"))).toBe("pa:ss");
    expect(presented("Digest abc")).toBeUndefined();
    expect(presented(undefined)).toBeUndefined();
  });

  it("without CONSOLE_TOKEN anyone reads; only the operate token operates", () => {
    expect(accessOf({}, {})).toEqual({ read: true, operate: false });
    expect(accessOf({ operateToken: OPERATE }, { operateToken: OPERATE })).toEqual({
      read: true,
      operate: true,
    });
    expect(accessOf({ operateToken: OPERATE }, { operateToken: "x" })).toEqual({
      read: true,
      operate: false,
    });
    // No operate token configured: nothing operates, whatever is sent.
    expect(accessOf({}, { operateToken: "" })).toEqual({ read: true, operate: false });
  });

  it("with CONSOLE_TOKEN: UNAUTHORIZED without it or with a wrong one; the operate token reads too", () => {
    const config = { token: TOKEN, operateToken: OPERATE };
    const none = accessOf(config, {});
    expect(none.read).toBe(false);
    if (!none.read) expect(none.error.code).toBe("UNAUTHORIZED");
    expect(accessOf(config, { authorization: "Bearer nope" }).read).toBe(false);
    expect(accessOf(config, { authorization: `Bearer ${TOKEN}` })).toEqual({ read: true, operate: false });
    expect(accessOf(config, { authorization: basic("bob", TOKEN), operateToken: OPERATE })).toEqual({
      read: true,
      operate: true,
    });
    // The operate token as a bearer token is no read token either.
    expect(accessOf(config, { authorization: `Bearer ${OPERATE}` }).read).toBe(false);
  });

  it("counts the operate token only in X-Operate-Token, never as a bearer token or basic auth password", () => {
    const config = { operateToken: OPERATE };
    // A browser sends basic auth with every request, a cross-site form post too.
    expect(accessOf(config, { authorization: basic("alice", OPERATE) })).toEqual({
      read: true,
      operate: false,
    });
    expect(accessOf(config, { authorization: `Bearer ${OPERATE}` })).toEqual({ read: true, operate: false });
    expect(accessOf(config, { operateToken: OPERATE })).toEqual({ read: true, operate: true });
    expect(accessOf(config, { operateToken: `${OPERATE}x` })).toEqual({ read: true, operate: false });
    expect(accessOf(config, { operateToken: OPERATE.slice(0, 8) })).toEqual({ read: true, operate: false });
  });

  it("names the basic auth user, if any", () => {
    expect(basicUser(basic("alice", TOKEN))).toBe("alice");
    expect(basicUser(basic("", TOKEN))).toBeUndefined();
    expect(basicUser(`Bearer ${TOKEN}`)).toBeUndefined();
    expect(basicUser(undefined)).toBeUndefined();
  });

  it("without a token answers only loopback Host names and CONSOLE_ALLOWED_HOSTS (HOST_NOT_ALLOWED, 421)", () => {
    expect(hostName("LocalHost:8090")).toBe("localhost");
    expect(hostName("[::1]:8090")).toBe("[::1]");
    expect(hostName("127.0.0.1")).toBe("127.0.0.1");
    for (const host of ["localhost:8090", "127.0.0.1:1", "[::1]:8090", "localhost"])
      expect(hostRefusal({}, host), host).toBeUndefined();
    for (const host of ["evil.example:8090", "127.0.0.1.evil.example", "", undefined]) {
      const refused = hostRefusal({}, host);
      expect(refused?.code, String(host)).toBe("HOST_NOT_ALLOWED");
      expect(httpError(refused).status).toBe(421);
    }
    expect(hostRefusal({ allowedHosts: ["console.internal"] }, "console.internal:8090")).toBeUndefined();
    // A token guards the console: a rebinding page cannot send it.
    expect(hostRefusal({ token: TOKEN }, "evil.example")).toBeUndefined();
  });

  it("holds at most CONSOLE_MAX_FEEDS live feeds: one more is TOO_MANY_FEEDS (503) until one leaves", () => {
    const feeds = new FeedLimit(2);
    const first = feeds.enter();
    feeds.enter();
    let refused: unknown;
    try {
      feeds.enter();
    } catch (err) {
      refused = err;
    }
    expect(httpError(refused)).toMatchObject({ status: 503, body: { error: { code: "TOO_MANY_FEEDS" } } });
    first();
    first();
    expect(feeds.size).toBe(1);
    expect(() => feeds.enter()).not.toThrow();
  });

  it("refuses to bind beyond loopback without a token, with INVALID_INPUT naming the fix", () => {
    for (const host of ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
      expect(isLoopback(host), host).toBe(true);
    for (const host of ["0.0.0.0", "::", "10.0.0.5", "console.example"])
      expect(isLoopback(host), host).toBe(false);
    expect(() => checkBinding("127.0.0.1", {})).not.toThrow();
    expect(() => checkBinding("0.0.0.0", { token: TOKEN })).not.toThrow();
    expect(() => checkBinding("0.0.0.0", {})).toThrow(/set CONSOLE_TOKEN/);
  });

  it("maps error codes to HTTP statuses, with the structured error as the body", () => {
    expect(httpError(new AgentError("NOT_FOUND", "x")).status).toBe(404);
    expect(httpError(new AgentError("UNAUTHORIZED", "x")).status).toBe(401);
    expect(httpError(new AgentError("FORBIDDEN", "x")).status).toBe(403);
    expect(httpError(new AgentError("INVALID_INPUT", "x")).status).toBe(400);
    expect(httpError(new AgentError("RUN_CHANGED", "x")).status).toBe(409);
    expect(httpError(new AgentError("POOL_FULL", "x")).status).toBe(503);
    expect(httpError(new AgentError("UNSUPPORTED_MEDIA_TYPE", "x")).status).toBe(415);
    // NATS out of reach: BUS_UNAVAILABLE (503, retryable), not INTERNAL.
    for (const down of [new errors.ClosedConnectionError(), new errors.NoRespondersError("$JS.API.INFO")]) {
      const { status, body } = httpError(down);
      expect(status).toBe(503);
      expect(body.error).toMatchObject({ code: "BUS_UNAVAILABLE", retryable: true });
    }
    expect(httpError(new Error("x", { cause: new errors.TimeoutError() })).body.error.code).toBe(
      "BUS_UNAVAILABLE",
    );
    expect(httpError(new Error("boom"))).toEqual({
      status: 503,
      body: { error: { code: "INTERNAL", message: "boom", retryable: true } },
    });
  });
});

const status = (runId: string, over: Partial<RunStatus> = {}): RunStatus => ({
  runId,
  status: "running",
  phase: "ACT",
  iteration: 1,
  usage: { inputTokens: 10, outputTokens: 5, costUsd: 0.5, modelCalls: 1, toolCalls: 1 },
  updatedAt: "2026-01-01T00:00:00.000Z",
  ...over,
});

describe("console runs filter", () => {
  it("parses statuses, agent and runId search; an unknown status is INVALID_INPUT naming the known ones", () => {
    expect(parseRunsFilter({ status: "running, failed", agent: " a ", q: "" })).toEqual({
      statuses: new Set(["running", "failed"]),
      agent: "a",
      q: undefined,
    });
    expect(() => parseRunsFilter({ status: "sleeping" })).toThrow(/unknown status 'sleeping': one of queued/);
  });

  it("keeps what the filter names, the most recently changed first, at most LIST_LIMIT", () => {
    const runs = [
      status("a-1", { updatedAt: "2026-01-01T00:00:01.000Z" }),
      status("b-2", { status: "failed", updatedAt: "2026-01-01T00:00:03.000Z" }),
      status("a-3", { updatedAt: "2026-01-01T00:00:02.000Z" }),
    ];
    const agents = new Map([
      ["a-1", "alpha"],
      ["b-2", "beta"],
      ["a-3", "alpha"],
    ]);
    const all = parseRunsFilter({});
    expect(filterRuns(runs, agents, all).runs.map((r) => r.runId)).toEqual(["b-2", "a-3", "a-1"]);
    expect(filterRuns(runs, agents, parseRunsFilter({ agent: "alpha" })).runs.map((r) => r.runId)).toEqual([
      "a-3",
      "a-1",
    ]);
    expect(filterRuns(runs, agents, parseRunsFilter({ q: "-3" })).runs.map((r) => r.runId)).toEqual(["a-3"]);
    expect(filterRuns(runs, agents, parseRunsFilter({ status: "failed" })).runs.map((r) => r.runId)).toEqual([
      "b-2",
    ]);
    const many = Array.from({ length: LIST_LIMIT + 5 }, (_, i) => status(`r-${i}`));
    expect(filterRuns(many, agents, all)).toMatchObject({ more: 5 });
  });
});

const event = (seq: number, kind: AuditEvent["kind"], over: Partial<AuditEvent> = {}): AuditEvent => ({
  schemaVersion: 1,
  auditId: `r:${seq}`,
  runId: "r",
  rootRunId: "r",
  seq,
  iteration: 1,
  phase: "ACT",
  kind,
  actor: "agent",
  status: "passed",
  artifacts: [],
  timestamp: "2026-01-01T00:00:00.000Z",
  ...over,
});

describe("console run view", () => {
  const runSpec = RunSpec.parse({
    ...spec({ name: "checker", tools: ["echo"], resources: { maxIterations: 8, maxCostUsd: 2 } }),
    task: { prompt: "check", verifiers: [] },
    critic: { model: { provider: "scripted", script: [{ text: "{}" }] } },
  });
  const at = 1;
  const records: WalRecord[] = [
    {
      schemaVersion: 1,
      runId: "r",
      iteration: 0,
      at,
      type: "EVENT",
      event: { type: "start", at, spec: runSpec, runId: "r", rootRunId: "r" },
    } as WalRecord,
    {
      schemaVersion: 1,
      runId: "r",
      iteration: 1,
      at,
      type: "INTENT",
      actionId: "act-1",
      tool: "echo",
      input: { text: "x".repeat(500) },
      idempotencyKey: "r:act-1",
      purpose: "act",
    },
    {
      schemaVersion: 1,
      runId: "r",
      iteration: 1,
      at,
      type: "COMPLETE",
      event: { type: "toolCompleted", at, actionId: "act-1", output: { text: "ok" } },
    },
  ];

  it("pairs a tool call's events with its input and output (shortened), and scores a verdict against the rubric", () => {
    const view = runView(
      "r",
      {
        records,
        events: [
          event(1, "run.admitted", { data: { agent: "checker" } }),
          event(2, "tool.intent", { actor: "tool:echo", status: "started", data: { actionId: "act-1" } }),
          event(3, "tool.completed", { actor: "tool:echo", data: { actionId: "act-1" } }),
          event(4, "critic.verdict", {
            actor: "critic",
            status: "failed",
            data: {
              scores: { correctness: 0.9, completeness: 0.5, coherence: 0.8 },
              gates: { weighted: 0.71 },
              defects: 1,
            },
          }),
        ],
      },
      status("r"),
    );
    expect(view.agent).toBe("checker");
    const [, intent, done, verdict] = view.timeline;
    expect(intent?.tool?.name).toBe("echo");
    expect(intent?.tool?.input).toHaveLength(240);
    expect(intent?.tool?.input?.endsWith("…")).toBe(true);
    expect(done?.tool?.output).toBe('{"text":"ok"}');
    expect(verdict?.summary).toBe("weighted 0.710, 1 defects");
    expect(verdict?.scores).toEqual({
      threshold: 0.8,
      passed: false,
      rows: [
        { name: "correctness", score: 0.9, min: 0.8, weight: 0.4, passed: true },
        { name: "completeness", score: 0.5, min: 0.7, weight: 0.25, passed: false },
        { name: "coherence", score: 0.8, min: 0.75, weight: 0.2, passed: true },
        { name: "safety", score: null, min: 0.95, weight: 0.15, passed: false },
      ],
    });
  });

  it("says why a review gave no verdict, which budget a guard trip names, and who decided an approval", () => {
    const view = runView(
      "r",
      {
        records,
        events: [
          event(1, "critic.verdict", { status: "failed", reason: "critic verdict is malformed" }),
          event(2, "guard.blocked", {
            status: "failed",
            reason: "over budget",
            data: { guardReason: "toolCalls" },
          }),
          event(3, "approval.decided", {
            actor: "human",
            reason: "checked",
            data: { decision: "approve", by: "alice" },
          }),
        ],
      },
      undefined,
    );
    expect(view.timeline.map((item) => item.summary)).toEqual([
      "critic verdict is malformed",
      "toolCalls over budget",
      "approve by alice: checked",
    ]);
    expect(view.timeline[0]?.scores).toBeUndefined();
  });

  it("shows usage against the spec's budgets: unlimited where it sets none", () => {
    expect(budgetsOf(runSpec, status("r", { iteration: 3 }))).toEqual([
      { name: "iterations", used: 3, limit: 8 },
      { name: "toolCalls", used: 1, limit: 50 },
      { name: "tokens", used: 15, limit: undefined },
      { name: "costUsd", used: 0.5, limit: 2 },
    ]);
    expect(budgetsOf(runSpec, undefined)).toEqual([]);
    expect(shorten("abc", 10)).toBe("abc");
  });
});

describe("console run view: a page of the log", () => {
  const event = (seq: number): AuditEvent =>
    ({
      seq,
      timestamp: "2026-01-01T00:00:00.000Z",
      kind: "phase.entered",
      phase: "ACT",
      iteration: 1,
      actor: "agent",
      status: "ok",
    }) as unknown as AuditEvent;

  it("keeps the newest `limit` events after `afterSeq`, counting those left out, and the tool calls shortened", () => {
    const window = new LogWindow(2, 3);
    const start = { type: "EVENT", event: { type: "start" } } as unknown as WalRecord;
    const intent = {
      type: "INTENT",
      actionId: "a1",
      tool: "echo",
      input: "x".repeat(10_000),
    } as unknown as WalRecord;
    const checkpoint = { type: "CHECKPOINT", state: "y".repeat(10_000) } as unknown as WalRecord;
    window.add({ records: [start, intent, checkpoint], events: [1, 2, 3, 4].map(event) });
    for (let seq = 5; seq <= 10; seq += 1) window.add({ records: [], events: [event(seq)] });
    const read = window.read();
    expect(read.events.map((e) => e.seq)).toEqual([8, 9, 10]);
    expect(window.more).toBe(5);
    expect(window.messages).toBe(7);
    expect(read.records.map((r) => r.type)).toEqual(["EVENT", "INTENT"]);
    expect(String((read.records[1] as { input: unknown }).input).length).toBeLessThanOrEqual(240);
  });

  it("parses ?afterSeq= and ?limit=, INVALID_INPUT for a bad one", () => {
    expect(parseTimelinePage({})).toEqual({ afterSeq: 0, limit: TIMELINE_EVENTS });
    expect(parseTimelinePage({ afterSeq: "12", limit: "50" })).toEqual({ afterSeq: 12, limit: 50 });
    const bad: Record<string, string>[] = [
      { limit: "0" },
      { limit: "100000" },
      { afterSeq: "-1" },
      { afterSeq: "x" },
    ];
    for (const query of bad)
      expect(() => parseTimelinePage(query), JSON.stringify(query)).toThrow(/INVALID_INPUT|limit|afterSeq/);
  });
});
