import { describe, expect, it } from "vitest";
import { markdown, rssTable, targets } from "./report.ts";
import type { Row } from "./row.ts";

const row = (system: string, c: number, rssMiB: Record<string, number>): Row => ({
  system,
  variant: "v",
  c,
  loops: 10,
  failed: 0,
  wallMs: 1_000,
  msPerStep: 1,
  stepsPerSec: 100,
  stepP50: 1,
  stepP99: 2,
  rssMiB,
  bytesPerLoop: 0,
  cpuUsPerStep: { bench: 10 },
});

describe("the benchmark's report", () => {
  it("gives each level's peak RSS per process, largest first, levels in order of C", () => {
    const rows = [
      row("ours", 100, { supervisor: 96, "agent-1": 140, "agent-2": 151 }),
      row("langgraph", 1, { bench: 294 }),
      row("ours", 1, { supervisor: 90, "agent-1": 115, "agent-2": 115 }),
    ];
    const lines = rssTable(rows).split("\n").slice(4);
    expect(lines).toEqual([
      "| langgraph | v | 1 | 294 | bench 294 |",
      "| ours | v | 1 | 320 | agent-1 115, agent-2 115, supervisor 90 |",
      "| ours | v | 100 | 387 | agent-2 151, agent-1 140, supervisor 96 |",
    ]);
    const report = markdown({
      date: "2026-11-26",
      mode: "quick",
      machine: { cpus: 2, node: "v24", natsServer: "v2.9.10" },
      rows,
      findings: [],
    });
    expect(report).toContain("Peak RSS by process (MiB), per level:");
    expect(report).toContain("| ours | v | 100 | 387 | agent-2 151, agent-1 140, supervisor 96 |");
  });

  it("leaves the W1 tables out of a run that measured no W1 level, and names the subset it ran", () => {
    const report = markdown({
      date: "2026-11-26",
      mode: "full",
      machine: { cpus: 2, node: "v24", natsServer: "v2.9.10" },
      rows: [],
      findings: [],
      only: ["paired"],
    });
    expect(report).toContain("## Benchmark 2026-11-26 (full, only paired)");
    expect(report).toContain("No W1 level was measured in this run.");
    expect(report).not.toContain("Infinity");
    expect(report).not.toContain("Peak RSS by process");
  });

  it("judges W1a against LangGraph on the rounds run in alternation when there were, and on the W1 rows otherwise", () => {
    const rows = [
      { ...row("ours", 1, {}), variant: "2 workers", msPerStep: 4 },
      // The fsync row of ours is beside the default, never taken for it.
      { ...row("ours", 1, {}), variant: "2 workers, sync_interval always", msPerStep: 40 },
      { ...row("langgraph", 1, {}), variant: "SqliteSaver", msPerStep: 6 },
    ];
    const vsLanggraph = (findings: Parameters<typeof targets>[1]) =>
      targets(rows, findings).find((t) => t.goal.startsWith("W1a ≥ 3× faster"));
    expect(vsLanggraph([])).toMatchObject({ measured: "1.5×", met: false });
    const paired = (figures: Record<string, number>) => [{ workload: "W1a" as const, label: "-", figures }];
    expect(vsLanggraph(paired({ ratioMedian: 1.2 }))).toMatchObject({ measured: "1.5×" });
    expect(vsLanggraph(paired({ ratioMedian: 1.2, vsLanggraphMedian: 1.1 }))).toMatchObject({
      goal: "W1a ≥ 3× faster than LangGraph + SqliteSaver (loop by loop)",
      measured: "1.1×",
      met: false,
    });
    expect(vsLanggraph(paired({ ratioMedian: 1.2, vsLanggraphMedian: 3.2 }))).toMatchObject({ met: true });
    const messages = (figures: Record<string, number>) =>
      targets(rows, paired(figures)).find((t) => t.goal.startsWith("messages per W1 loop"));
    expect(messages({ ratioMedian: 1.2, traceMessages: 52 })).toMatchObject({ measured: "52", met: false });
    expect(messages({ ratioMedian: 1.2, traceMessages: 50 })).toMatchObject({ met: true });
  });
});
