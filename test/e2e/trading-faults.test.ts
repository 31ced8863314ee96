import { describe, expect, it } from "vitest";
import { TickOutcome } from "../../examples/trading/planner/tick.js";
import { tickSpec } from "../../examples/trading/planner/spec.js";
import { tradingActors } from "../../examples/trading/actors.js";
import type { ActorLaunch } from "../../services/local/cluster.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { type ClusterSuite, settled, useClusterSuite } from "../helpers/cluster-suite.js";

const actors = (faults: Record<string, number>): ActorLaunch[] => [
  { kind: "supervisor" },
  { kind: "agent", name: "agent-1" },
  ...tradingActors({ TRADING_CONFIG: JSON.stringify({ seed: "faults-1", faults }) }),
];

const task = (n: number) => ({
  decision_id: `d-${n}`,
  tick_id: `t-${n}`,
  as_of: new Date(Date.UTC(2026, 10, 23, 0, n)).toISOString(),
  symbols: ["BTC-USD", "ETH-USD"],
});

async function tick(suite: ClusterSuite, n: number): Promise<{ outcome: TickOutcome; notes: AuditEvent[] }> {
  await suite.client.submit(tickSpec(task(n), { runId: `tick-${n}` }));
  const status = await suite.waitFor(`tick-${n}`, settled, 30_000);
  expect(status.status, JSON.stringify(status.terminal)).toBe("committed");
  const outcome = TickOutcome.parse(JSON.parse(status.terminal?.output ?? "{}"));
  const notes = (await suite.audit(`tick-${n}`)).filter((e) => e.kind === "tool.reported");
  return { outcome, notes };
}

const reasons = (notes: AuditEvent[], step: string): string =>
  notes
    .filter((e) => e.data?.step === step)
    .map((e) => e.reason ?? "")
    .join(" | ");

describe("a submit that times out with an unknown outcome, on a real cluster", () => {
  const suite = useClusterSuite("tfaults", { actors: actors({ timeout_rate: 1, timeout_landed_rate: 0 }) });

  it("timeout → unknown → verify → safe recovery (new entries halted) → next tick reconciles before anything else", async () => {
    const first = await tick(suite, 1);
    expect(reasons(first.notes, "EXECUTE")).toMatch(/timeout/);
    expect(first.outcome.outcome).toBe("safe_recovery");
    const critical = first.notes.find((e) => /SAFE_RECOVERY/.test(e.reason ?? ""));
    expect(critical?.data).toMatchObject({ severity: "critical", step: "VERIFY" });
    const second = await tick(suite, 2);
    const steps = second.notes.map((e) => e.data?.step);
    // Reconciliation comes first: the tick verifies before it plans anything new.
    expect(steps.filter((step) => step !== "PLAN")[0]).toBe("VERIFY");
    expect(reasons(second.notes, "VERIFY")).toMatch(/reconciled: new entries allowed again/);
  }, 90_000);
});

describe("a fill far from the quote, on a real cluster", () => {
  const suite = useClusterSuite("tdrift", { actors: actors({ drift_rate: 1 }) });

  it("drift → safe recovery: the tick says so, a critical event is raised and new entries are held", async () => {
    const first = await tick(suite, 1);
    expect(reasons(first.notes, "EXECUTE")).toMatch(/acked/);
    expect(first.outcome.outcome).toBe("safe_recovery");
    expect(reasons(first.notes, "VERIFY")).toMatch(
      /bps from the quote .*SAFE_RECOVERY: drift; new entries halted/,
    );
    expect(first.notes.some((e) => e.data?.severity === "critical")).toBe(true);
  }, 90_000);
});
