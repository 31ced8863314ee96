import { describe, expect, it } from "vitest";
import { TickOutcome } from "../../examples/trading/planner/tick.js";
import { tickSpec } from "../../examples/trading/planner/spec.js";
import { controlSpec } from "../../examples/trading/executor/control-spec.js";
import { tradingActors } from "../../examples/trading/actors.js";
import { AGENTCTL, runProcess, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { serveModel } from "../../shared/bus/model-actor.js";
import { readLog } from "../../shared/bus/run-log.js";
import { replay } from "../../shared/loop/replay.js";
import { describeTool } from "../../shared/tools/tool.js";
import { discoverTools } from "../../shared/bus/remote-tool.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { replayModels } from "../../services/cli/model-replay.js";
import { spec } from "../helpers/fixtures.js";

const CONFIG = JSON.stringify({ seed: "e2e-1" });
const SECRET = "sk-live-e2e-planted-0123456789";

/** The trading example on a real cluster: each tick a run, the planner a model actor, the executor a tool service. */
const suite = useClusterSuite("trading", {
  actors: [
    { kind: "supervisor" },
    { kind: "agent", name: "agent-1" },
    ...tradingActors({ TRADING_CONFIG: CONFIG, TRADING_API_KEY: SECRET }),
  ],
});

const task = (n: number) => ({
  decision_id: `d-${n}`,
  tick_id: `t-${n}`,
  as_of: new Date(Date.UTC(2026, 10, 22, 0, n)).toISOString(),
  symbols: ["BTC-USD", "ETH-USD", "DOGE-USD"],
});

describe("trading ticks on the cluster", () => {
  it("each tick runs PLAN → VALIDATE → DRY_RUN → EXECUTE → VERIFY → RECORD as tool calls, commits once recorded, and audits every step with the seed's fields", async () => {
    const outcomes: TickOutcome[] = [];
    for (let n = 1; n <= 3; n++) {
      const reply = await suite.client.submit(tickSpec(task(n), { runId: `tick-${n}` }));
      expect(reply.ok).toBe(true);
      const status = await suite.waitFor(`tick-${n}`, settled, 30_000);
      expect(status.status, JSON.stringify(status.terminal)).toBe("committed");
      outcomes.push(TickOutcome.parse(JSON.parse(status.terminal?.output ?? "{}")));
    }
    expect(outcomes[0]?.outcome).toBe("executed");
    expect(outcomes.map((o) => o.ledger_ref)).toEqual(["ledger-1", "ledger-2", "ledger-3"]);
    const events = await suite.audit("tick-1");
    const reported = events.filter((e) => e.kind === "tool.reported");
    const steps = reported.map((e) => e.data?.step);
    expect(steps).toEqual(
      expect.arrayContaining(["PLAN", "VALIDATE", "DRY_RUN", "EXECUTE", "VERIFY", "RECORD"]),
    );
    expect(steps.indexOf("VALIDATE")).toBeLessThan(steps.indexOf("DRY_RUN"));
    expect(steps.indexOf("DRY_RUN")).toBeLessThan(steps.indexOf("EXECUTE"));
    expect(steps.lastIndexOf("RECORD")).toBe(steps.length - 1);
    for (const e of reported) {
      expect(e.actor).toMatch(/^tool:/);
      expect(e.data).toMatchObject({ decision_id: "d-1", tick_id: "t-1", status: e.status });
      expect(typeof e.data?.audit_id).toBe("string");
    }
    const recorded = reported.find((e) => e.data?.step === "RECORD")?.data?.replay_record;
    expect(recorded).toMatchObject({
      decision_id: "d-1",
      inputs: { state_hash: expect.any(String) as unknown, config_hash: expect.any(String) as unknown },
      timestamps: {
        planned_at: task(1).as_of,
        executed_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown,
      },
    });
    expect((await suite.logs()).includes(SECRET)).toBe(false);
  }, 120_000);

  it("a rogue planner that skips the gates, forges an order, asks for a withdrawal or smuggles a limit change gets refused, and nothing trades", async () => {
    const ids = { decision_id: "rogue-1", tick_id: "t-rogue", idempotency_key: "rogue-exec" };
    const intent = {
      intent_id: "intent-1",
      symbol: "BTC-USD",
      side: "buy",
      order_type: "market",
      qty: 0.1,
      limit_price: null,
      time_in_force: "IOC",
      order_client_id: "oc-forged",
    };
    const reply = await suite.client.submit(
      spec({
        script: [
          {
            toolCalls: [
              {
                name: "execute_plan",
                input: { ...ids, execution_mode: "paper", approved_intents: [intent] },
              },
            ],
          },
          { toolCalls: [{ name: "withdraw", input: { ...ids, idempotency_key: "w", amount: 1_000 } }] },
          {
            toolCalls: [
              {
                name: "validate_plan",
                input: {
                  ...ids,
                  idempotency_key: "v",
                  plan: { intents: [], reason: "x", risk_limits: { max_leverage: 5 } },
                },
              },
            ],
          },
          { text: "done" },
        ],
        tools: ["execute_plan", "validate_plan"],
        resources: { maxIterations: 10 },
      }),
    );
    const status = await suite.waitFor(reply.runId, settled, 30_000);
    expect(status.status, JSON.stringify(status.terminal)).toBe("committed");
    const events = await suite.audit(reply.runId);
    const outcomes = events.filter((e) => ["tool.completed", "tool.aborted", "tool.denied"].includes(e.kind));
    expect(outcomes.map((e) => `${e.kind}:${e.actor}`)).toEqual([
      "tool.completed:tool:execute_plan",
      expect.stringMatching(/^tool\.(denied|aborted)/),
      "tool.aborted:tool:validate_plan",
    ]);
    const refused = events.find((e) => e.kind === "tool.reported" && e.data?.step === "EXECUTE");
    expect(refused?.status).toBe("failed");
    expect(refused?.reason).toMatch(/GATES_MISSING/);
    expect(outcomes[2]?.reason).toMatch(/INVALID_INPUT/);
    expect(
      events.some((e) => e.kind === "tool.reported" && e.data?.step === "EXECUTE" && e.status === "passed"),
    ).toBe(false);
  }, 60_000);

  it("an operator's limit change waits for a human: approved, the executor applies it with the approver recorded and the next tick obeys it; rejected, nothing changes", async () => {
    const limit = {
      fn: "apply_control_change" as const,
      change: { kind: "risk_limits" as const, limits: { max_notional_per_trade: 500 } },
    };
    await suite.client.submit(
      controlSpec(limit, { id: "ctl-1", runId: "ctl-1", reason: "desk review", by: "ops" }),
    );
    const waiting = await suite.waitFor("ctl-1", (s) => s.status === "awaiting_approval", 30_000);
    expect(waiting.phase).toBe("ACT");
    expect(await suite.client.decide("ctl-1", { decision: "approve", by: "alice" })).toMatch(
      /approve recorded/,
    );
    const done = await suite.waitFor("ctl-1", settled, 30_000);
    expect(done.status, JSON.stringify(done.terminal)).toBe("committed");
    const events = await suite.audit("ctl-1");
    const asked = events.find((e) => e.kind === "approval.requested");
    expect(asked).toMatchObject({ actor: "tool:apply_control_change", data: { on: "tool" } });
    expect(asked?.reason).toMatch(/changing hard risk limits/);
    expect(events.find((e) => e.kind === "approval.decided")).toMatchObject({
      actor: "human",
      data: { by: "alice" },
    });
    const applied = events.find((e) => e.kind === "tool.reported");
    expect(applied).toMatchObject({ status: "passed", data: { step: "CONTROL", approved_by: "alice" } });

    const strategy = {
      fn: "apply_control_change" as const,
      change: { kind: "strategy" as const, universe: ["ETH-USD"] },
    };
    await suite.client.submit(
      controlSpec(strategy, { id: "ctl-2", runId: "ctl-2", reason: "narrow", by: "ops" }),
    );
    await suite.waitFor("ctl-2", (s) => s.status === "awaiting_approval", 30_000);
    await suite.client.decide("ctl-2", { decision: "reject", by: "bob", reason: "not now" });
    expect((await suite.waitFor("ctl-2", settled, 30_000)).status).toBe("committed");
    const rejected = await suite.audit("ctl-2");
    expect(rejected.find((e) => e.kind === "approval.decided")).toMatchObject({
      status: "failed",
      reason: "not now",
    });
    expect(rejected.some((e) => e.kind === "tool.reported")).toBe(false);

    await suite.client.submit(tickSpec(task(9), { runId: "tick-9" }));
    const tick = await suite.waitFor("tick-9", settled, 30_000);
    expect(tick.status, JSON.stringify(tick.terminal)).toBe("committed");
    const validation = (await suite.audit("tick-9")).find(
      (e) => e.kind === "tool.reported" && e.data?.step === "VALIDATE",
    );
    expect(validation?.status).toBe("failed");
    expect(validation?.reason).toMatch(/notional [0-9.]+ > max_notional_per_trade 500/);
    expect(validation?.reason).not.toMatch(/universe/);
  }, 120_000);

  it("agentctl replay --models re-derives a recorded tick: the WAL reproduces every transition and the planner, asked again, gives the same plan, validation and execution calls; a planner that answers otherwise is caught", async () => {
    const { stdout } = await runProcess(process.execPath, [AGENTCTL, "replay", "tick-1", "--models"], {
      env: suite.env(),
    });
    expect(stdout).toMatch(/transitions reproduced identically/);
    const asked = Number(/models: (\d+) answers asked again, identical/.exec(stdout)?.[1]);
    expect(asked).toBeGreaterThanOrEqual(7);

    const records = (await readLog(suite.bus, "tick-1")).records.map((r) => r.record);
    const first = records[0];
    if (first?.type !== "EVENT" || first.event.type !== "start") throw new Error("tick-1 has no start");
    const tools = await discoverTools(first.event.spec.agent.tools, { ...suite.bus, logger: silentLogger });
    const replayed = replay(records, { tools: tools.map((t) => describeTool(t)) });
    const liar = serveModel(
      "liar",
      () =>
        Promise.resolve({
          text: "buy everything",
          toolCalls: [],
          stopReason: "endTurn",
          usage: { inputTokens: 0, outputTokens: 0 },
          costUsd: 0,
          model: "liar",
        }),
      { ...suite.bus, logger: silentLogger },
    );
    try {
      await expect(
        replayModels(suite.bus, { provider: "actor", name: "liar" }, records, replayed.modelRequests),
      ).rejects.toMatchObject({ code: "NONDETERMINISM" });
    } finally {
      liar.unsubscribe();
    }
  }, 60_000);
});
