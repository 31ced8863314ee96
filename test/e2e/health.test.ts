import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LocalCluster } from "../../services/local/cluster.js";
import { alertRules, metricsRead } from "../helpers/alert-rules.js";
import { credentials, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { startNats } from "../helpers/nats-server.js";

const suite = useClusterSuite("health", {
  actors: [
    { kind: "supervisor" },
    { kind: "tools", env: { TOOLS: "echo" } },
    { kind: "critic" },
    // Every tool remote: the tools actor's metrics count the echo call.
    { kind: "agent", name: "agent-1", env: { AGENT_LOCAL_TOOLS: "" } },
  ],
});

async function get(port: number | undefined, path: string): Promise<{ status: number; text: string }> {
  if (port === undefined) throw new Error("the actor did not report its health port");
  const response = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: response.status, text: await response.text() };
}

/** One sample's value from Prometheus text, e.g. `agents_steps_total{actor="agent"}`; 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split("\n")) {
    const match = /^([a-z_:]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = new Map([...(match[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) return Number(match[3]);
  }
  return 0;
}

const portOf = (name: string): number | undefined => suite.cluster.actors.get(name)?.healthPort;

describe("health and metrics endpoints of every actor", () => {
  it("each actor answers /healthz and /readyz, and 404 elsewhere", async () => {
    for (const name of ["supervisor", "tools", "critic", "agent-1"]) {
      expect(await get(portOf(name), "/healthz"), name).toEqual({ status: 200, text: "ok\n" });
      expect(await get(portOf(name), "/readyz"), name).toEqual({ status: 200, text: "ready\n" });
      expect((await get(portOf(name), "/nope")).status, name).toBe(404);
    }
  });

  it("/metrics counts admissions, refusals, steps, tool calls, critic verdicts and phase latency", async () => {
    const before = (await get(portOf("supervisor"), "/metrics")).text;
    const reply = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "echo", input: { text: "up" } }] },
          { toolCalls: [{ name: "finish", input: { answer: "It is up." } }] },
        ],
        verifiers: [],
        critic: { checks: [{ kind: "nonEmpty" }] },
      }),
    );
    expect(await suite.waitFor(reply.runId, settled)).toMatchObject({ status: "committed" });
    // Straight onto the subject: the client would refuse this spec before sending it.
    const refused = await suite.bus.nc.request(suite.bus.subjects.runsSubmit(), JSON.stringify({ spec: {} }));
    expect(refused.json()).toMatchObject({ ok: false, error: { code: "INVALID_SPEC" } });

    const supervisor = (await get(portOf("supervisor"), "/metrics")).text;
    expect(
      sample(supervisor, "agents_runs_admitted_total") - sample(before, "agents_runs_admitted_total"),
    ).toBe(1);
    expect(sample(supervisor, "agents_runs_rejected_total", { code: "INVALID_SPEC" })).toBe(1);
    expect(sample(supervisor, "process_resident_memory_bytes")).toBeGreaterThan(0);

    const agent = (await get(portOf("agent-1"), "/metrics")).text;
    expect(sample(agent, "agents_steps_total", { actor: "agent" })).toBeGreaterThanOrEqual(4);
    expect(sample(agent, "agents_tool_calls_total", { tool: "echo", outcome: "completed" })).toBe(1);
    expect(sample(agent, "agents_critic_verdicts_total", { passed: "true" })).toBe(1);
    expect(sample(agent, "agents_phase_seconds_count", { phase: "model" })).toBe(2);
    expect(sample(agent, "agents_phase_seconds_count", { phase: "tool" })).toBe(1);

    const tools = (await get(portOf("tools"), "/metrics")).text;
    expect(sample(tools, "agents_tool_calls_total", { tool: "echo", outcome: "ok" })).toBe(1);
    const critic = (await get(portOf("critic"), "/metrics")).text;
    expect(sample(critic, "agents_critic_verdicts_total", { passed: "true" })).toBe(1);
  });

  it("every metric the shipped alert rules read is on an actor's /metrics", async () => {
    const exported = new Set<string>();
    for (const name of ["supervisor", "tools", "critic", "agent-1"])
      for (const match of (await get(portOf(name), "/metrics")).text.matchAll(/^# HELP (\S+) /gm))
        if (match[1]) exported.add(match[1]);
    const rules = alertRules();
    expect(rules.length).toBeGreaterThan(0);
    for (const rule of rules) {
      expect(metricsRead(rule).length, rule.alert).toBeGreaterThan(0);
      for (const metric of metricsRead(rule))
        expect(exported, `${rule.alert} reads ${metric}`).toContain(metric);
    }
  });

  it("/readyz turns 503 while NATS is gone, /healthz stays 200, and the actor keeps running", async () => {
    const server = await startNats({ own: true });
    const cluster = new LocalCluster({
      natsUrl: server.url,
      useConfUsers: false,
      logDir: await mkdtemp(join(tmpdir(), "health-")),
      env: { AGENTS_PREFIX: `ready${process.pid}`, ...credentials(server) },
    });
    try {
      const critic = await cluster.start("critic");
      expect((await get(critic.healthPort, "/readyz")).status).toBe(200);
      await server.stop();
      let ready = 200;
      for (let i = 0; i < 50 && ready === 200; i++) {
        await new Promise((r) => setTimeout(r, 100));
        ready = (await get(critic.healthPort, "/readyz")).status;
      }
      expect(ready).toBe(503);
      expect((await get(critic.healthPort, "/healthz")).status).toBe(200);
      expect(critic.child.exitCode).toBeNull();
    } finally {
      await cluster.stop(2_000);
      await server.stop();
    }
  });
});
