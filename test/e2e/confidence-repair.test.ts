import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import type { CriticVerdict } from "../../shared/contracts/rubric.js";
import type { RunSpecInput } from "../../shared/contracts/run-spec.js";
import { WORKER_CONSUMER } from "../../shared/bus/jobs.js";
import { serveModel } from "../../shared/bus/model-actor.js";
import type { ModelRequest } from "../../shared/contracts/model.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { AGENTCTL, ended, runProcess, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

// Confidence and disposition (CTL-2) and the PID repair controller (CTL-3) on a cluster of
// processes: the critic's scripted verdicts give the scores, the runtime decides the rest.

const suite = useClusterSuite("controls", {
  actors: [
    { kind: "supervisor" },
    { kind: "tools", env: { TOOLS: "echo" } },
    { kind: "critic" },
    { kind: "agent", name: "agent-1" },
  ],
  env: { AGENT_ACK_WAIT_MS: "2000", AGENT_RETRY_DELAY_MS: "500" },
});

/** A critic model's answer scoring the one rubric dimension; a failing score names a defect. */
function verdict(score: number, threshold: number): { text: string } {
  const passed = score >= threshold;
  const body: CriticVerdict = {
    scores: { correctness: score },
    defects: passed ? [] : [{ severity: "low", rootCause: "incompleteness", description: `scored ${score}` }],
    repairHints: [],
    passed,
  };
  return { text: JSON.stringify(body) };
}

/** Distinct answers, so no two look alike to the semantic-loop check. */
const ANSWERS = ["alpha one", "bravo two three", "charlie four five six", "delta seven", "echo eight nine"];

interface Options {
  scores: number[];
  threshold: number;
  exit?: RunSpecInput["task"]["exit"];
  requiresApproval?: boolean;
  resources?: NonNullable<RunSpecInput["agent"]["resources"]>;
  escalationModel?: RunSpecInput["agent"]["model"];
}

function judged(o: Options): RunSpecInput {
  const s = spec({
    script: ANSWERS.map((text) => ({ text })),
    critic: {
      rubric: { dimensions: [{ name: "correctness", weight: 1, min: 0 }], threshold: o.threshold },
      model: { provider: "scripted", script: o.scores.map((v) => verdict(v, o.threshold)) },
    },
    ...(o.requiresApproval ? { requiresApproval: true } : {}),
    ...(o.resources ? { resources: o.resources } : {}),
  });
  return {
    ...s,
    task: { ...s.task, ...(o.exit ? { exit: o.exit } : {}) },
    agent: { ...s.agent, ...(o.escalationModel ? { escalationModel: o.escalationModel } : {}) },
  };
}

const of = (events: AuditEvent[], kind: AuditEvent["kind"]): AuditEvent[] =>
  events.filter((e) => e.kind === kind);

/** Whether the worker consumer has a job queued or being worked on. */
async function busyJobs(): Promise<number> {
  const info = await suite.bus.jsm.consumers.info(suite.bus.subjects.streams().runs, WORKER_CONSUMER);
  return info.num_pending + info.num_ack_pending;
}

const BANDS = { autoCommitAt: 0.9, reviewAt: 0.7 };

describe("CTL-2 confidence and disposition, on a cluster of processes", () => {
  it("CTL-2 confidence at or above autoCommitAt commits at once, and confidence.assessed records its inputs", async () => {
    const { runId } = await suite.client.submit(judged({ scores: [0.95], threshold: 0.5, exit: BANDS }));
    const status = await suite.waitFor(runId, ended);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "alpha one" } });
    const events = await suite.audit(runId);
    expect(of(events, "confidence.assessed")).toEqual([
      expect.objectContaining({
        status: "passed",
        data: {
          confidence: 0.95,
          inputs: { critic: 0.95 },
          disposition: "commit",
          autoCommitAt: 0.9,
          reviewAt: 0.7,
        },
      }),
    ]);
    expect(of(events, "approval.requested")).toHaveLength(0);
  }, 60_000);

  it("CTL-2 confidence in the review band parks the run holding no worker; approving it on the approvals subject commits", async () => {
    const { runId } = await suite.client.submit(judged({ scores: [0.8], threshold: 0.5, exit: BANDS }));
    await suite.waitFor(runId, (s) => s.status === "awaiting_approval");
    const asked = of(await suite.audit(runId), "approval.requested");
    expect(asked).toHaveLength(1);
    expect(asked[0]?.data).toMatchObject({
      on: "commit",
      trigger: "confidence",
      confidence: 0.8,
      scores: { correctness: 0.8 },
      risk: { level: "medium", factors: ["confidence 0.8 is below autoCommitAt 0.9"] },
      recommendation: "approve",
      output: "alpha one",
    });
    // Parked, the run holds no job: nothing queued or being worked on once the worker let it go.
    await expect.poll(busyJobs, { timeout: 10_000 }).toBe(0);
    // The same subject agentctl approve publishes on (ClusterClient.decide is what agentctl calls).
    expect(await suite.client.decide(runId, { decision: "approve", by: "alice" })).toMatch(
      /approve recorded/,
    );
    const status = await suite.waitFor(runId, ended);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "alpha one" } });
    expect(of(await suite.audit(runId), "approval.decided")[0]?.data).toMatchObject({
      decision: "approve",
      by: "alice",
    });
  }, 60_000);

  it("CTL-2 confidence below reviewAt repairs a candidate whose gates passed, and fails once repairs are spent", async () => {
    const repaired = await suite.client.submit(judged({ scores: [0.6, 0.95], threshold: 0.5, exit: BANDS }));
    const spent = await suite.client.submit(
      judged({ scores: [0.6, 0.6], threshold: 0.5, exit: BANDS, resources: { maxRepairs: 1 } }),
    );
    const committed = await suite.waitFor(repaired.runId, ended);
    expect(committed).toMatchObject({ status: "committed", terminal: { output: "bravo two three" } });
    const trail = await suite.audit(repaired.runId);
    expect(of(trail, "confidence.assessed").map((e) => [e.status, e.data?.disposition])).toEqual([
      ["failed", "repair"],
      ["passed", "commit"],
    ]);
    expect(of(trail, "critic.verdict")[0]?.data).toMatchObject({ gates: { passed: true } });
    expect(of(trail, "repair.started")).toHaveLength(1);

    const failed = await suite.waitFor(spent.runId, ended);
    expect(failed).toMatchObject({ status: "failed", terminal: { reason: "maxRepairs" } });
    const spentTrail = await suite.audit(spent.runId);
    expect(of(spentTrail, "confidence.assessed").map((e) => e.data?.disposition)).toEqual([
      "repair",
      "repair",
    ]);
    expect(of(spentTrail, "approval.requested")).toHaveLength(0);
  }, 60_000);
});

describe("CTL-3 the PID repair controller, on a cluster of processes", () => {
  const control = { maxRepairs: 5, repair: { stallWindow: 2, noiseFloor: 0.02 } };

  it("CTL-3 a critic whose scores improve is repaired at the controller's intensity until the gate passes, and the run commits", async () => {
    const { runId } = await suite.client.submit(
      judged({ scores: [0.3, 0.5, 0.7, 0.9], threshold: 0.8, resources: control }),
    );
    const status = await suite.waitFor(runId, ended);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "delta seven" } });
    const events = await suite.audit(runId);
    const repairs = of(events, "repair.started").map((e) => e.data);
    expect(repairs.map((d) => (d?.control as { error: number }).error)).toEqual([
      expect.closeTo(0.5),
      expect.closeTo(0.3),
      expect.closeTo(0.1),
    ]);
    // A gap of 0.5 asks for a new answer, 0.1 (improving) for an edit.
    expect(repairs.map((d) => d?.strategy)).toEqual(["fullRegeneration", "sectionRewrite", "minimalEdit"]);
    expect(of(events, "repair.stalled")).toHaveLength(0);
  }, 60_000);

  it("CTL-3 flat scores escalate after stallWindow repairs, not maxRepairs: the run switches to escalationModel, commits, and replays identically", async () => {
    // The stronger model is an actor the test serves: it records what it was asked, and a replay
    // with --models must ask it (not the run's first model) again for the answers after the switch.
    const asked: ModelRequest[] = [];
    const strong = serveModel(
      "strong",
      (request) => {
        asked.push(request);
        return Promise.resolve({
          text: "the stronger model's answer",
          toolCalls: [],
          stopReason: "endTurn",
          usage: { inputTokens: 0, outputTokens: 0 },
          costUsd: 0,
          model: "strong",
        });
      },
      { ...suite.bus, logger: silentLogger },
    );
    try {
      const { runId } = await suite.client.submit(
        judged({
          scores: [0.5, 0.5, 0.51, 0.9],
          threshold: 0.8,
          resources: control,
          escalationModel: { provider: "actor", name: "strong" },
        }),
      );
      const status = await suite.waitFor(runId, ended);
      expect(status).toMatchObject({
        status: "committed",
        terminal: { output: "the stronger model's answer" },
      });
      expect(asked).toHaveLength(1);
      // It sees the repair request the stall led to, with the earlier answers in the transcript.
      expect(asked[0]?.messages.at(-1)).toMatchObject({
        role: "user",
        content: expect.stringMatching(/^Repair/) as string,
      });
      const events = await suite.audit(runId);
      const kinds = events.map((e) => e.kind);
      // Two repairs, then the stall: the switch comes before a third repair, with three of five left.
      expect(of(events, "repair.stalled")[0]?.data).toMatchObject({ cycles: 2, stallWindow: 2 });
      expect(kinds.indexOf("repair.stalled")).toBeGreaterThan(kinds.indexOf("repair.started"));
      expect(of(events, "repair.escalated")[0]).toMatchObject({
        data: { to: "model", from: "scripted", model: "actor:strong", atStep: 3 },
      });
      expect(kinds.indexOf("repair.escalated")).toBeLessThan(kinds.lastIndexOf("repair.started"));
      expect(of(events, "repair.started")).toHaveLength(3);
      // The switch is in the log: a replay re-derives every transition, the switch with them, and
      // asks the escalation model again for its answer.
      const { stdout } = await runProcess(process.execPath, [AGENTCTL, "replay", runId, "--models"], {
        env: suite.env(),
      });
      expect(stdout).toMatch(/reproduced identically/);
      expect(stdout).toMatch(/models: 1 answers asked again, identical to the record/);
      expect(asked).toHaveLength(2);
    } finally {
      strong.unsubscribe();
    }
  }, 60_000);

  it("CTL-3 flat scores without an escalation model: a human reviews when the spec has one, else the run fails repairStalled", async () => {
    const flat = [0.5, 0.5, 0.5, 0.5];
    const reviewed = await suite.client.submit(
      judged({ scores: flat, threshold: 0.8, resources: control, requiresApproval: true }),
    );
    const stalled = await suite.client.submit(judged({ scores: flat, threshold: 0.8, resources: control }));

    const failed = await suite.waitFor(stalled.runId, ended);
    expect(failed).toMatchObject({ status: "failed", terminal: { reason: "repairStalled" } });
    const failedTrail = await suite.audit(stalled.runId);
    expect(of(failedTrail, "repair.started")).toHaveLength(2);
    expect(of(failedTrail, "repair.stalled")).toHaveLength(1);
    expect(of(failedTrail, "repair.escalated")).toHaveLength(0);

    await suite.waitFor(reviewed.runId, (s) => s.status === "awaiting_approval");
    const trail = await suite.audit(reviewed.runId);
    expect(of(trail, "repair.escalated")[0]?.data).toMatchObject({ to: "human" });
    expect(of(trail, "approval.requested")[0]?.data).toMatchObject({
      on: "commit",
      trigger: "repairStalled",
      scores: { correctness: 0.5 },
      recommendation: "modify",
    });
    expect(
      await suite.client.decide(reviewed.runId, { decision: "reject", by: "bob", reason: "no" }),
    ).toMatch(/reject recorded/);
    expect(await suite.waitFor(reviewed.runId, ended)).toMatchObject({
      status: "failed",
      terminal: { reason: "rejected" },
    });
  }, 60_000);
});
