import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { CriticRequest, CriticVerdict } from "../../shared/contracts/rubric.js";
import type { Critic } from "../../shared/loop/critic.js";
import { canonicalJson } from "../../shared/runtime/canonical-json.js";
import { sha256 } from "../../shared/runtime/hash.js";
import { ScriptedDriver } from "../../shared/models/scripted.js";
import { defineTool } from "../../shared/tools/tool.js";
import type { CommitArtifact, FailureReport } from "../../shared/loop/state.js";
import { echoCall, kinds, registry, runner, spec } from "../helpers/fixtures.js";

const scores = (c: number, s = 1): CriticVerdict => ({
  scores: { correctness: c, completeness: 1, coherence: 1, safety: s },
  defects: [],
  repairHints: [],
  passed: true,
});
const scriptedCritic = {
  model: { provider: "scripted" as const, script: [{ text: JSON.stringify(scores(0.95)) }] },
};

function criticSeq(...verdicts: CriticVerdict[]) {
  const requests: CriticRequest[] = [];
  const critic: Critic = (req) => {
    requests.push(req);
    return Promise.resolve(verdicts[Math.min(requests.length - 1, verdicts.length - 1)] as CriticVerdict);
  };
  return { critic, requests };
}

describe("critic and quality gates", () => {
  it("a scripted critic model passes the gates and the run commits with scores in its provenance", async () => {
    const result = await runner().run(
      spec({ script: [echoCall("evidence-1"), { text: "answer" }], critic: scriptedCritic }),
    );
    expect(result.state.status).toBe("committed");
    expect(kinds(result)).toEqual(expect.arrayContaining(["critic.requested", "critic.verdict"]));
    const artifact = result.state.terminal?.artifact as CommitArtifact;
    expect(artifact.provenance.scores).toMatchObject({ correctness: 0.95 });
  });

  it("the critic gets task, output, evidence and rubric only, never the generator's messages", async () => {
    const { critic, requests } = criticSeq(scores(0.9));
    await runner({ critic }).run(
      spec({
        prompt: "Summarise",
        script: [echoCall("fact A"), { text: "summary" }],
        critic: scriptedCritic,
      }),
    );
    expect(requests).toHaveLength(1);
    expect(Object.keys(requests[0] ?? {}).sort()).toEqual([
      "evidence",
      "output",
      "rubric",
      "runId",
      "schemaVersion",
      "task",
    ]);
    expect(requests[0]).toMatchObject({ task: "Summarise", output: "summary" });
    expect(requests[0]?.evidence.join()).toContain("fact A");
    expect(requests[0]?.rubric.dimensions.map((d) => [d.name, d.weight, d.min])).toEqual([
      ["correctness", 0.4, 0.8],
      ["completeness", 0.25, 0.7],
      ["coherence", 0.2, 0.75],
      ["safety", 0.15, 0.95],
    ]);
  });

  it("a dimension under its minimum fails the gate even when the critic says passed (L∞), and REPAIR follows", async () => {
    const { critic } = criticSeq(scores(1, 0.9), scores(1, 1));
    const driver = new ScriptedDriver({ script: [{ text: "draft one" }, { text: "draft two" }] });
    const result = await runner({ critic, driver }).run(spec({ critic: scriptedCritic }));
    expect(result.state.status).toBe("committed");
    expect(result.state.terminal?.output).toBe("draft two");
    expect(kinds(result).filter((k) => k === "repair.started")).toHaveLength(1);
    const repairMsg = driver.requests[1]?.messages.at(-1);
    expect(repairMsg?.role).toBe("user");
    expect(repairMsg?.content).toContain("safety");
    expect(repairMsg?.content).toContain("fullRegeneration");
  });

  it("the repair request carries the critic's defects and hints, not its context", async () => {
    const verdict: CriticVerdict = {
      ...scores(0.5),
      passed: false,
      defects: [
        { severity: "low", rootCause: "factualError", location: "line 2", description: "the date is wrong" },
      ],
      repairHints: ["use 1969"],
    };
    const { critic } = criticSeq(verdict, scores(1));
    const driver = new ScriptedDriver({
      script: [{ text: "Moon landing: 1970" }, { text: "Moon landing: 1969" }],
    });
    await runner({ critic, driver }).run(spec({ critic: scriptedCritic }));
    const repair = driver.requests[1]?.messages.at(-1)?.content ?? "";
    expect(repair).toContain("minimalEdit");
    expect(repair).toContain("the date is wrong");
    expect(repair).toContain("use 1969");
    expect(repair).not.toContain("RUBRIC");
    expect(repair).not.toContain("independent reviewer");
  });

  it("an unavailable critic sends the run to REPAIR, never to COMMIT", async () => {
    const critic: Critic = () => Promise.reject(new Error("critic down"));
    const result = await runner({ critic }).run(
      spec({ critic: scriptedCritic, script: [{ text: "x" }], loop: true, resources: { maxRepairs: 1 } }),
    );
    expect(result.state.status).toBe("failed");
    expect(kinds(result)).not.toContain("run.committed");
  });
});

describe("repair bounds, approvals and halts", () => {
  it("repairs are bounded by maxRepairs; exhaustion fails with a diagnosis and a failure report", async () => {
    const script = ["alpha", "bravo charlie", "delta echo foxtrot", "golf hotel india juliet", "kilo"].map(
      (t) => ({ text: t }),
    );
    const result = await runner().run(
      spec({ script, verifiers: [{ kind: "regex", pattern: "^never$" }], resources: { maxRepairs: 2 } }),
    );
    expect(result.state.status).toBe("failed");
    expect(result.state.terminal?.reason).toBe("maxRepairs");
    expect(kinds(result).filter((k) => k === "repair.started")).toHaveLength(2);
    const report = result.state.terminal?.artifact as FailureReport;
    expect(report.kind).toBe("failure");
    expect(report.diagnosis).toContain("does not match");
    expect(report.partialOutput).toBe("delta echo foxtrot");
    // The failure report itself is in the WAL, not only its hash: it survives the process.
    expect(result.wal.at(-1)).toMatchObject({ type: "TERMINAL", outcome: "FAIL", artifact: report });
  });

  it("the same output and diagnosis coming back escalates the strategy, then gives up", async () => {
    const result = await runner().run(
      spec({
        script: [{ text: "same answer" }],
        loop: true,
        verifiers: [{ kind: "regex", pattern: "^never$" }],
        resources: { maxRepairs: 10 },
      }),
    );
    const strategies = result.audit.filter((e) => e.kind === "repair.started").map((e) => e.data?.strategy);
    expect(strategies).toEqual(["minimalEdit", "sectionRewrite"]);
    expect(result.state.terminal?.reason).toBe("semanticLoop");
  });

  it("with requiresApproval, exhausted repairs HALT for a human instead of failing; approve then commits", async () => {
    const r = runner();
    const parked = await r.run(
      spec({
        script: [{ text: "maybe" }],
        loop: true,
        verifiers: [{ kind: "regex", pattern: "^never$" }],
        requiresApproval: true,
        resources: { maxRepairs: 0 },
      }),
    );
    expect(parked.state.phase).toBe("HALT");
    expect(parked.state.status).toBe("awaiting_approval");
    expect(kinds(parked).slice(-2)).toEqual(["run.halted", "approval.requested"]);
    const approved = await r.send(parked, {
      type: "approvalDecided",
      at: 1,
      decision: "approve",
      by: "alice",
    });
    expect(approved.state.status).toBe("committed");
    expect(approved.audit.find((e) => e.kind === "approval.decided")).toMatchObject({
      actor: "human",
      data: { by: "alice" },
    });
  });

  it("requiresApproval gates COMMIT: reject fails the run, modify repairs with the feedback", async () => {
    const r = runner();
    const driver = new ScriptedDriver({ script: [{ text: "v1" }, { text: "v2" }], loop: true });
    const parked = await runner({ driver }).run(spec({ requiresApproval: true }));
    expect(parked.state.status).toBe("awaiting_approval");
    expect(parked.state.phase).toBe("VERIFY");
    const rejected = await r.send(parked, {
      type: "approvalDecided",
      at: 1,
      decision: "reject",
      by: "bob",
      feedback: "no",
    });
    expect(rejected.state.status).toBe("failed");
    expect(rejected.state.terminal?.reason).toBe("rejected");
    expect(rejected.audit.find((e) => e.kind === "approval.decided")).toMatchObject({ reason: "no" });

    // `agentctl reject --reason` sends a reason, not feedback: it is kept just the same.
    const withReason = await runner().send(parked, {
      type: "approvalDecided",
      at: 1,
      decision: "reject",
      by: "bob",
      reason: "not today",
    });
    expect(withReason.audit.find((e) => e.kind === "approval.decided")).toMatchObject({
      reason: "not today",
      data: { decision: "reject", by: "bob" },
    });
    expect(JSON.stringify(withReason.wal.at(-1))).toContain("rejected by bob: not today");

    const r2 = runner({ driver });
    const modified = await r2.send(parked, {
      type: "approvalDecided",
      at: 1,
      decision: "modify",
      by: "bob",
      feedback: "be more formal",
    });
    expect(driver.requests.at(-1)?.messages.at(-1)?.content).toContain("be more formal");
    expect(modified.state.status).toBe("awaiting_approval");
  });

  it("a halted run accepts no late answers, and resume re-issues what it was waiting for", async () => {
    const r = runner({ approvals: undefined });
    const parked = await r.run(spec({ requiresApproval: true }));
    const halted = await r.send(parked, { type: "halt", at: 2, reason: "kill switch", by: "ops" });
    expect(halted.state.phase).toBe("HALT");
    expect(halted.state.status).toBe("halted");
    expect(kinds(halted).at(-1)).toBe("run.halted");
    expect(halted.wal.at(-1)).toMatchObject({
      type: "TERMINAL",
      outcome: "HALT",
      artifact: { kind: "halt", reason: "kill switch", by: "ops", phase: "VERIFY" },
    });
    await expect(
      r.send(halted, { type: "approvalDecided", at: 3, decision: "approve", by: "x" }),
    ).rejects.toMatchObject({ code: "INVALID_TRANSITION" });
    const resumed = await r.send(halted, { type: "resume", at: 4, by: "ops" });
    expect(kinds(resumed).slice(-2)).toEqual(["phase.entered", "run.resumed"]);
    expect(resumed.state.pending).toEqual({ kind: "approval", on: "commit" });
    const done = await r.send(resumed, { type: "approvalDecided", at: 5, decision: "approve", by: "x" });
    expect(done.state.status).toBe("committed");
  });
});

describe("saga", () => {
  it("on FAIL after side effects, compensations run in reverse order and irreversible actions need a human", async () => {
    const log: string[] = [];
    const mk = (
      name: string,
      reversibility: "compensable" | "irreversible" | "pure",
      compensation?: string,
    ) =>
      defineTool({
        name,
        description: name,
        input: z.object({ id: z.string() }).or(z.object({ original: z.unknown(), output: z.unknown() })),
        capability: { kind: "compute" },
        reversibility,
        idempotent: false,
        ...(compensation ? { compensation: { tool: compensation } } : {}),
        execute: (input) => {
          log.push(`${name}:${"id" in input ? input.id : (input.original as { id: string }).id}`);
          return Promise.resolve({ output: { done: name } });
        },
      });
    const tools = [
      mk("reserve", "compensable", "release"),
      mk("release", "pure"),
      mk("notify", "irreversible"),
      mk("book", "compensable", "unbook"),
      mk("unbook", "pure"),
    ];
    const script = [
      { toolCalls: [{ name: "reserve", input: { id: "r1" } }] },
      { toolCalls: [{ name: "notify", input: { id: "n1" } }] },
      { toolCalls: [{ name: "book", input: { id: "b1" } }] },
      { toolCalls: [{ name: "reserve", input: { id: "r2" } }] },
    ];
    const result = await runner({ registry: registry(...tools) }).run(
      spec({ tools: ["reserve", "notify", "book"], script, resources: { maxIterations: 4 } }),
    );
    expect(result.state.status).toBe("failed");
    expect(log).toEqual([
      "reserve:r1",
      "notify:n1",
      "book:b1",
      "reserve:r2",
      "release:r2",
      "book:b1".replace("book", "unbook"),
      "release:r1",
    ]);
    const report = result.state.terminal?.artifact as FailureReport;
    expect(report.compensations.map((c) => [c.tool, c.ok])).toEqual([
      ["release", true],
      ["unbook", true],
      ["release", true],
    ]);
    expect(report.manualIntervention).toEqual([
      { actionId: "act-2", tool: "notify", reason: "irreversible: needs manual intervention" },
    ]);
    expect(kinds(result).filter((k) => k.startsWith("compensation."))).toHaveLength(6);
    expect(kinds(result).at(-1)).toBe("run.failed");
    expect(result.wal.filter((r) => r.type === "INTENT" && r.purpose === "compensate")).toHaveLength(3);
  });
});

describe("commit artifact", () => {
  it("carries provenance and a sha256 content hash over output and provenance", async () => {
    const result = await runner().run(spec({ script: [echoCall("p"), { text: "final" }] }));
    const artifact = result.state.terminal?.artifact as CommitArtifact;
    expect(artifact.contentHash).toBe(
      sha256(canonicalJson({ output: artifact.output, provenance: artifact.provenance })),
    );
    expect(artifact.provenance).toMatchObject({
      task: "Say hello",
      modelId: "scripted",
      toolInvocations: [{ actionId: "act-1", tool: "echo", purpose: "act", ok: true }],
      verification: [{ kind: "nonEmpty", passed: true }],
    });
    expect(artifact.provenance.planHash).toMatch(/^[0-9a-f]{64}$/);
    expect(result.audit.find((e) => e.kind === "run.committed")?.artifacts).toEqual([artifact.contentHash]);
    expect(result.wal.at(-1)).toMatchObject({ type: "TERMINAL", outcome: "COMMIT", artifact });
  });

  it("verifiers: jsonSchema and tool verifiers gate the commit", async () => {
    const schema = { type: "object", required: ["n"], properties: { n: { type: "number" } } };
    const good = await runner().run(
      spec({
        script: [{ text: '{"n": 3}' }],
        verifiers: [
          { kind: "jsonSchema", schema },
          { kind: "tool", tool: "echo", input: { text: "ok" }, expect: { text: "ok" } },
        ],
      }),
    );
    expect(good.state.status).toBe("committed");
    expect(good.wal.some((r) => r.type === "INTENT" && r.purpose === "verify")).toBe(true);
    const bad = await runner().run(
      spec({
        script: [{ text: "not json" }, { text: '{"n": "x"}' }, { text: '{"n": 1}' }],
        verifiers: [
          { kind: "jsonSchema", schema },
          { kind: "tool", tool: "echo", input: { text: "ok" }, expect: { text: "different" } },
        ],
        resources: { maxRepairs: 2 },
      }),
    );
    expect(bad.state.status).toBe("failed");
    expect((bad.state.terminal?.artifact as FailureReport).diagnosis).toContain("output differs from expect");
  });

  it("refuses an invalid spec with INVALID_SPEC and the zod issues", async () => {
    await expect(runner().run({ schemaVersion: 1 } as never)).rejects.toMatchObject({ code: "INVALID_SPEC" });
    await expect(runner().run(spec({ tools: ["echo"], name: "" }))).rejects.toThrow(/invalid RunSpec/);
  });
});
