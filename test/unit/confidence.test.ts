import { describe, expect, it } from "vitest";
import type { CriticVerdict } from "../../shared/contracts/rubric.js";
import { TaskExit, type RunSpecInput } from "../../shared/contracts/run-spec.js";
import { parseSubmitRequest } from "../../shared/bus/submit.js";
import type { AgentError } from "../../shared/runtime/errors.js";
import { dispose, estimateConfidence } from "../../shared/loop/confidence.js";
import { kinds, runner, spec } from "../helpers/fixtures.js";

describe("confidence (pure)", () => {
  it("is the product of the signals present, each in [0, 1]; none present is 1", () => {
    expect(estimateConfidence({})).toBe(1);
    expect(estimateConfidence({ critic: 0.9 })).toBeCloseTo(0.9);
    expect(estimateConfidence({ critic: 0.9, verifiers: { passed: 1, total: 2 } })).toBeCloseTo(0.45);
    expect(estimateConfidence({ critic: 0.9, agreement: 0.6 })).toBeCloseTo(0.54);
    expect(estimateConfidence({ verifiers: { passed: 0, total: 0 }, agreement: 1.5 })).toBe(1);
  });

  it("disposes by band: commit at autoCommitAt, review at reviewAt, repair below or when the policy refused", () => {
    const exit = TaskExit.parse({ autoCommitAt: 0.9, reviewAt: 0.7 });
    expect(dispose(0.9, exit, true)).toBe("commit");
    expect(dispose(0.89, exit, true)).toBe("review");
    expect(dispose(0.7, exit, true)).toBe("review");
    expect(dispose(0.69, exit, true)).toBe("repair");
    expect(dispose(1, exit, false)).toBe("repair");
    // Without reviewAt there is no review band.
    expect(dispose(0.8, TaskExit.parse({ autoCommitAt: 0.9 }), true)).toBe("repair");
    expect(TaskExit.parse({}).autoCommitAt).toBe(0.95);
  });

  it("a reviewAt above autoCommitAt, or a misspelt exit field, is refused at submit with INVALID_SPEC", () => {
    const base = spec();
    const refusal = (exit: unknown): { code?: string; message?: string } => {
      try {
        parseSubmitRequest({ ...base, task: { ...base.task, exit } });
        return {};
      } catch (err) {
        return err as AgentError;
      }
    };
    const inverted = refusal({ autoCommitAt: 0.7, reviewAt: 0.9 });
    expect(inverted.code).toBe("INVALID_SPEC");
    expect(inverted.message).toMatch(/lower reviewAt or raise autoCommitAt/);
    expect(inverted.message).toMatch(/task\.exit\.reviewAt/);
    expect(refusal({ autoCommit: 0.9 })).toMatchObject({ code: "INVALID_SPEC" });
    expect(refusal({ autoCommit: 0.9 }).message).toMatch(/did you mean 'autoCommitAt'/);
    expect(refusal({ autoCommitAt: 0.9 })).toEqual({});
  });
});

const RUBRIC = { dimensions: [{ name: "correctness", weight: 1, min: 0 }], threshold: 0.5 };
const verdict = (score: number, defects: CriticVerdict["defects"] = []): string =>
  JSON.stringify({ scores: { correctness: score }, defects, repairHints: [], passed: true });

function banded(scores: number[], exit: RunSpecInput["task"]["exit"]): RunSpecInput {
  const s = spec({
    script: [{ text: "first answer" }, { text: "second, better answer" }],
    critic: {
      rubric: RUBRIC,
      model: { provider: "scripted", script: scores.map((v) => ({ text: verdict(v) })) },
    },
  });
  return { ...s, task: { ...s.task, exit } };
}

describe("disposition in the loop", () => {
  const exit = { autoCommitAt: 0.9, reviewAt: 0.7 };

  it("a candidate at or above autoCommitAt commits; its confidence is audited with its inputs", async () => {
    const result = await runner().run(banded([0.95], exit));
    expect(result.state.status).toBe("committed");
    expect(result.audit.find((e) => e.kind === "confidence.assessed")).toMatchObject({
      status: "passed",
      data: {
        confidence: 0.95,
        inputs: { critic: 0.95 },
        disposition: "commit",
        autoCommitAt: 0.9,
        reviewAt: 0.7,
      },
    });
  });

  it("a candidate in the review band waits for a human with scores, risk and the recommendation", async () => {
    const result = await runner().run(banded([0.8], exit));
    expect(result.state.status).toBe("awaiting_approval");
    expect(result.audit.find((e) => e.kind === "approval.requested")?.data).toMatchObject({
      on: "commit",
      trigger: "confidence",
      confidence: 0.8,
      scores: { correctness: 0.8 },
      risk: { level: "medium", factors: ["confidence 0.8 is below autoCommitAt 0.9"] },
      recommendation: "approve",
    });
  });

  it("a candidate below reviewAt is repaired although the gates passed", async () => {
    const result = await runner().run(banded([0.6, 0.95], exit));
    expect(result.state.status).toBe("committed");
    expect(result.state.output).toBe("second, better answer");
    const assessed = result.audit.filter((e) => e.kind === "confidence.assessed");
    expect(assessed.map((e) => e.data?.disposition)).toEqual(["repair", "commit"]);
    expect(kinds(result)).toContain("repair.started");
  });

  it("under policy verifiers the critic's scores do not count toward confidence: passing verifiers commit", async () => {
    const base = banded([0.6], exit);
    const verified = { ...base.task, verifiers: [{ kind: "nonEmpty" as const }] };
    const result = await runner().run({ ...base, task: verified, policy: "verifiers" });
    expect(result.state.status).toBe("committed");
    expect(result.audit.find((e) => e.kind === "confidence.assessed")?.data).toMatchObject({
      confidence: 1,
      inputs: { verifiers: { passed: 1, total: 1 } },
      disposition: "commit",
    });
  });

  it("without task.exit nothing is assessed and the gates alone decide", async () => {
    const result = await runner().run(banded([0.6], undefined));
    expect(result.state.status).toBe("committed");
    expect(kinds(result)).not.toContain("confidence.assessed");
  });
});
