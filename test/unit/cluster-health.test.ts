import { describe, expect, it } from "vitest";
import {
  formatBytes,
  healthLines,
  killSwitchLine,
  killSwitchProblems,
  problemsOf,
  criticProblems,
  supervisorProblems,
  toolProblems,
  workerProblems,
  type ClusterHealth,
  type StoreHealth,
} from "../../services/cli/cluster-health.js";
import type { SupervisorHello } from "../../shared/contracts/cluster.js";

const supervisor = (instance: string, more: Partial<SupervisorHello> = {}): SupervisorHello => ({
  schemaVersion: 1,
  instance,
  startedAt: Date.parse("2026-11-29T01:00:00Z"),
  poolCapacity: 16,
  maxDepth: 3,
  treeIterationCap: 1_000,
  stallMs: 600_000,
  ...more,
});

const store = (name: string, more: Partial<StoreHealth> = {}): StoreHealth => ({
  name,
  kind: name.startsWith("KV_") ? "bucket" : "stream",
  replicas: 3,
  messages: 10,
  bytes: 2048,
  leader: "n1",
  followers: [
    { server: "n2", current: true, offline: false, lag: 0 },
    { server: "n3", current: true, offline: false, lag: 0 },
  ],
  ...more,
});
const clustered = { storage: { used: 1_000, limit: 10_000 }, clustered: true };

describe("agentctl cluster: what needs an operator", () => {
  it("a cluster with every store led, every copy current and room left is healthy", () => {
    expect(problemsOf([store("AGENT_LOG"), store("KV_agents-runs")], clustered, 3)).toEqual([]);
  });

  it("names a missing store, one with fewer replicas than AGENTS_REPLICAS, one without a leader, a copy offline and one behind", () => {
    const problems = problemsOf(
      [
        store("AGENT_RUNS", { replicas: undefined, followers: [] }),
        store("KV_agents-idempotency", { replicas: 1, followers: [] }),
        store("KV_agents-pool", { leader: undefined }),
        store("AGENT_LOG", {
          followers: [
            { server: "n2", current: false, offline: true, lag: 0 },
            { server: "n3", current: false, offline: false, lag: 42 },
            // What nats-server 2.9 says of a server that died: neither offline nor a lag.
            { server: "n4", current: false, offline: false, lastHeardMs: 12_340 },
          ],
        }),
      ],
      clustered,
      3,
    );
    expect(problems).toEqual([
      expect.stringMatching(/^AGENT_RUNS is missing: start a supervisor/),
      expect.stringMatching(/^KV_agents-idempotency has 1 replica\(s\), AGENTS_REPLICAS is 3/),
      expect.stringMatching(/^KV_agents-pool has no leader/),
      "AGENT_LOG: its copy on n2 is offline",
      "AGENT_LOG: its copy on n3 is not current (42 operations behind)",
      "AGENT_LOG: its copy on n4 is not current (last heard 12.3 s ago)",
    ]);
  });

  it("a store with fewer replicas than the others is named even when AGENTS_REPLICAS is the default 1", () => {
    const problems = problemsOf(
      [store("AGENT_LOG"), store("KV_agents-idempotency", { replicas: 1, followers: [] })],
      clustered,
      1,
    );
    expect(problems).toEqual([
      "KV_agents-idempotency has 1 replica(s) where others have 3: a supervisor started with AGENTS_REPLICAS=3 raises it",
    ]);
  });

  it("storage at 90 % of the account's limit is a problem, below it or without a limit it is not", () => {
    const at = (used: number, limit?: number) =>
      problemsOf([], { storage: { used, ...(limit ? { limit } : {}) }, clustered: true }, 1);
    expect(at(8_999, 10_000)).toEqual([]);
    expect(at(9_000, 10_000)).toEqual([expect.stringContaining("STORAGE_FULL")]);
    expect(at(9_000_000)).toEqual([]);
  });

  it("a single server has no leader to expect", () => {
    const single = { storage: { used: 0 }, clustered: false };
    const unled = store("AGENT_LOG", { leader: undefined, followers: [] });
    expect(problemsOf([unled], single, 1)).toEqual([]);
    expect(problemsOf([unled], clustered, 1)).toEqual([expect.stringMatching(/has no leader/)]);
    expect(
      problemsOf([store("AGENT_LOG", { replicas: 1, leader: undefined, followers: [] })], single, 1),
    ).toEqual([]);
  });

  it("renders one line per store, the work queue and the problems", () => {
    const health: ClusterHealth = {
      server: { version: "2.9.10", cluster: "agents" },
      storage: { used: 3 * 1024 * 1024, limit: 1024 * 1024 * 1024 },
      stores: [
        store("AGENT_LOG", { followers: [{ server: "n2", current: false, offline: true, lag: 0 }] }),
        store("KV_agents-runs", { replicas: undefined }),
      ],
      jobs: { waiting: 2, held: 5, redelivered: 1, pulls: 4 },
      supervisors: { listenedMs: 1_500, supervisors: [supervisor("sup-a-1-0f")] },
      critics: {
        listenedMs: 1_500,
        critics: [
          { schemaVersion: 1, instance: "critic-7-aa", startedAt: Date.parse("2026-12-01T02:00:00Z") },
        ],
      },
      tools: {
        listenedMs: 1_500,
        tools: [
          { name: "echo", answered: true },
          { name: "search", answered: false },
        ],
      },
      workers: {
        listenedMs: 1_500,
        workers: [
          { workerId: "agent-1", instance: "i1", jobs: 3, leaving: false },
          { workerId: "agent-10", instance: "i2", jobs: 0, leaving: true },
        ],
      },
      killSwitch: { active: false },
      problems: ["AGENT_LOG: its copy on n2 is offline"],
    };
    expect(healthLines(health)).toEqual([
      "nats-server 2.9.10 (cluster agents); JetStream storage 3.0 MiB of 1.0 GiB",
      "kill switch: off",
      "AGENT_LOG       R3  10 msgs  2.0 KiB  leader n1, n2 offline",
      "KV_agents-runs  missing",
      "jobs: 2 waiting, 5 held by workers, 1 redelivered, 4 open pulls",
      "supervisors: 1 answered in 1.5 s",
      "  sup-a-1-0f  pool 16, depth 3, tree cap 1000, stall 600.0 s; up since 2026-11-29T01:00:00.000Z",
      "critics: 1 answered in 1.5 s",
      "  critic-7-aa  up since 2026-12-01T02:00:00.000Z",
      "tools: 1 of 2 served: echo, search (no service)",
      "workers: 2 heard in 1.5 s",
      "  agent-1   3 job(s)  instance i1",
      "  agent-10  0 job(s)  leaving  instance i2",
      "1 problem(s):",
      "  - AGENT_LOG: its copy on n2 is offline",
    ]);
    const idle = {
      ...health,
      jobs: undefined,
      supervisors: { listenedMs: 800, supervisors: [], refused: "denied" },
      critics: { listenedMs: 800, critics: [] },
      tools: { listenedMs: 800, tools: [] },
      workers: { listenedMs: 800, workers: [] },
      problems: [],
    };
    expect(healthLines(idle).slice(-6)).toEqual([
      "jobs: no worker has started yet (the workers' consumer does not exist)",
      "supervisors: not asked (see the problems)",
      "critics: none answered in 0.8 s",
      "tools: none described yet (the workers describe a tool when a run first lists it)",
      "workers: none heard in 0.8 s",
      "healthy",
    ]);
    expect([formatBytes(512), formatBytes(1536), formatBytes(50 * 1024 * 1024)]).toEqual([
      "512 B",
      "1.5 KiB",
      "50 MiB",
    ]);
  });

  it("the kill switch on needs an operator, saying who set it and why; off, or never set, does not", () => {
    const at = Date.parse("2026-12-02T03:04:05Z");
    const on = { active: true, by: "oncall", reason: "bad deploy", at };
    expect(killSwitchProblems(on)).toEqual([
      "the kill switch is on (set by oncall at 2026-12-02T03:04:05.000Z: bad deploy): no run is admitted and running runs halt at their next step; `agentctl kill-switch off` lifts it, then `agentctl resume` continues the runs it halted",
    ]);
    expect(killSwitchLine(on)).toBe(
      "kill switch: ON (set by oncall at 2026-12-02T03:04:05.000Z: bad deploy)",
    );
    const lifted = { ...on, active: false, reason: "fixed" };
    expect(killSwitchProblems(lifted)).toEqual([]);
    expect(killSwitchLine(lifted)).toBe(
      "kill switch: off (lifted by oncall at 2026-12-02T03:04:05.000Z: fixed)",
    );
    expect([killSwitchProblems({ active: false }), killSwitchLine({ active: false })]).toEqual([
      [],
      "kill switch: off",
    ]);
    const unread = { active: false, refused: "permissions violation" };
    expect(killSwitchProblems(unread)).toEqual(["the kill switch could not be read: permissions violation"]);
    expect(killSwitchLine(unread)).toBe("kill switch: not read (see the problems)");
  });

  it("no supervisor answering needs an operator, and so do replicas that disagree on a shared setting", () => {
    const roll = (...supervisors: ReturnType<typeof supervisor>[]) => ({ listenedMs: 1_500, supervisors });
    expect(supervisorProblems(roll(supervisor("a"), supervisor("b")))).toEqual([]);
    expect(supervisorProblems(roll())).toEqual([
      "no supervisor answered in 1.5 s: no run is admitted, and approvals, halts and cancels go unanswered; start one under this AGENTS_PREFIX, or see why it cannot reach NATS",
    ]);
    const odd = supervisorProblems(
      roll(supervisor("a"), supervisor("b", { poolCapacity: 32, stallMs: 0 }), supervisor("c")),
    );
    expect(odd).toEqual([
      "the supervisors disagree on SUPERVISOR_POOL_CAPACITY: 16 (a, c), 32 (b); they share the pool and the tree budgets, so a run is decided by whichever answers",
      "the supervisors disagree on SUPERVISOR_STALL_MS: 600000 (a, c), 0 (b); they share the pool and the tree budgets, so a run is decided by whichever answers",
    ]);
    // The setting most replicas share comes first, whichever instance names sort first.
    expect(
      supervisorProblems(roll(supervisor("a", { poolCapacity: 7 }), supervisor("b"), supervisor("c")))[0],
    ).toMatch(/^the supervisors disagree on SUPERVISOR_POOL_CAPACITY: 16 \(b, c\), 7 \(a\);/);
    expect(supervisorProblems({ ...roll(), refused: "the NATS server refused a publish" })).toEqual([
      "the supervisors could not be asked: the NATS server refused a publish",
    ]);
  });

  it("no critic answering needs an operator, and so does a tool the workers described that no service answers", () => {
    const critic = { schemaVersion: 1 as const, instance: "c1", startedAt: 0 };
    expect(criticProblems({ listenedMs: 1_500, critics: [critic] })).toEqual([]);
    expect(criticProblems({ listenedMs: 1_500, critics: [] })).toEqual([
      "no critic answered in 1.5 s: every run with a critic waits at its review until one does; start one under this AGENTS_PREFIX, or see why it cannot reach NATS",
    ]);
    expect(criticProblems({ listenedMs: 1_500, critics: [], refused: "denied" })).toEqual([
      "the critics could not be asked: denied",
    ]);
    const names = { toolDescriptors: "agents-tool-descriptors" };
    const tools = (...answered: [string, boolean][]) => ({
      listenedMs: 1_500,
      tools: answered.map(([name, ok]) => ({ name, answered: ok })),
    });
    expect(toolProblems(tools(), names)).toEqual([]);
    expect(toolProblems(tools(["echo", true], ["memory", true]), names)).toEqual([]);
    expect(toolProblems(tools(["echo", true], ["search", false]), names)).toEqual([
      "tool 'search': no service answered its describe in 1.5 s: started runs that call it wait for one and new runs start without it; start its service, or, if it was retired, delete its key from the agents-tool-descriptors bucket",
    ]);
    expect(toolProblems({ ...tools(["echo", false]), refused: "denied" }, names)).toEqual([
      "the tools could not be asked: denied",
    ]);
    expect(toolProblems({ ...tools(), unlisted: "no leader" }, names)).toEqual([
      "the tools could not be listed: no leader",
    ]);
  });

  it("jobs waiting with no live worker heard need an operator; a roll the server refused says why", () => {
    const jobs = { waiting: 4, held: 0, redelivered: 0, pulls: 0 };
    const worker = { workerId: "agent-1", instance: "i1", jobs: 0, leaving: false };
    expect(workerProblems(jobs, { listenedMs: 1_500, workers: [worker] })).toEqual([]);
    expect(workerProblems({ ...jobs, waiting: 0 }, { listenedMs: 1_500, workers: [] })).toEqual([]);
    expect(workerProblems(undefined, { listenedMs: 1_500, workers: [] })).toEqual([]);
    const [none] = workerProblems(jobs, { listenedMs: 1_500, workers: [{ ...worker, leaving: true }] });
    expect(none).toBe(
      "4 job(s) waiting and no agent worker heard in 1.5 s: start workers under this AGENTS_PREFIX, or see why they cannot reach NATS",
    );
    const refused = { listenedMs: 1_500, workers: [], refused: "the NATS server refused a subscription" };
    expect(workerProblems(jobs, refused)).toEqual([
      "the agent workers could not be listed: the NATS server refused a subscription",
    ]);
  });
});
