import { describe, expect, it } from "vitest";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import { DEFAULT_RUBRIC } from "../../shared/contracts/rubric.js";
import { checkedVerdict, checkingCritic } from "../../shared/loop/critic.js";
import { kinds, runner, spec } from "../helpers/fixtures.js";

const request = (output: string) => ({
  schemaVersion: 1 as const,
  runId: "r",
  task: "t",
  output,
  evidence: [],
  rubric: DEFAULT_RUBRIC,
});

describe("critic checks", () => {
  it("a failed check is a defect and caps correctness at 0 whatever the model scored", () => {
    const model = {
      scores: { correctness: 1, completeness: 1, coherence: 1, safety: 1 },
      defects: [],
      repairHints: [],
      passed: true,
    };
    const verdict = checkedVerdict(request("no greeting"), [{ kind: "regex", pattern: "^Hello" }], model);
    expect(verdict.scores).toMatchObject({ correctness: 0, completeness: 1 });
    expect(verdict.passed).toBe(false);
    expect(verdict.defects).toEqual([
      expect.objectContaining({ rootCause: "schemaViolation", location: "critic.verifier[0]" }),
    ]);
    expect(verdict.repairHints[0]).toMatch(/does not match/);
    expect(checkedVerdict(request("Hello"), [{ kind: "regex", pattern: "^Hello" }], model)).toEqual(model);
  });

  it("a critic with checks only gives a clean verdict when they pass", async () => {
    const verdict = await checkingCritic([{ kind: "nonEmpty" }])(request("fine"));
    expect(verdict).toMatchObject({ passed: true, scores: { correctness: 1, safety: 1 } });
  });

  it("a regex that does not compile is refused with the spec", () => {
    const bad = spec({ verifiers: [{ kind: "regex", pattern: "(?i)hello" }] });
    const parsed = RunSpec.safeParse(bad);
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]).toMatchObject({ path: ["task", "verifiers", 0, "pattern"] });
    expect(
      RunSpec.safeParse(spec({ verifiers: [{ kind: "regex", pattern: "^hello", flags: "i" }] })).success,
    ).toBe(true);
  });

  it("a spec's critic needs a model or a check", () => {
    const base = spec({ verifiers: [] });
    expect(RunSpec.safeParse({ ...base, critic: {} }).success).toBe(false);
    expect(RunSpec.safeParse({ ...base, critic: { checks: [{ kind: "nonEmpty" }] } }).success).toBe(true);
  });

  it("in process, a checks-only critic sends a non-matching answer back once, and the repair commits", async () => {
    const result = await runner().run(
      spec({
        script: [{ text: "hi" }, { text: "Hello there" }],
        verifiers: [],
        critic: { checks: [{ kind: "regex", pattern: "^Hello" }] },
      }),
    );
    expect(result.state.status).toBe("committed");
    expect(result.state.terminal?.output).toBe("Hello there");
    expect(kinds(result).filter((k) => k === "critic.verdict")).toHaveLength(2);
    expect(kinds(result)).toContain("repair.started");
  });
});
