import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import { defineTool } from "../../shared/tools/tool.js";
import { agentctlOf, ended, settled, OPERATOR_CLUSTER, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

const suite = useClusterSuite("reconcile", OPERATOR_CLUSTER);

const { run: agentctl, refusal } = agentctlOf(suite);

/**
 * A launch that cannot be made twice, whose first call hangs: its outcome is unknown once the
 * tool's timeout has passed, and the run halts for a reconciliation. Later calls answer at once.
 */
function serveLaunch(): { executions: () => number } {
  let executions = 0;
  const served = suite.serveTool(
    defineTool({
      name: "launch",
      description: "Launches something that cannot be launched twice.",
      input: z.object({ target: z.string() }),
      capability: { kind: "compute" },
      timeoutMs: 400,
      reversibility: "irreversible",
      idempotent: false,
      execute: async (input) => {
        executions += 1;
        if (executions === 1) await new Promise(() => undefined);
        return { output: { launched: input.target, attempt: executions } };
      },
    }),
  );
  onTestFinished(() => served.stop());
  return { executions: () => executions };
}

/** A run whose launch hangs, halted for a reconciliation. */
async function haltedForReconciliation(): Promise<string> {
  const { runId } = await suite.client.submit(
    spec({
      script: [
        { toolCalls: [{ name: "launch", input: { target: "moon" } }] },
        { toolCalls: [{ name: "finish", input: { answer: "launched" } }] },
      ],
      tools: ["launch"],
    }),
  );
  const status = await suite.waitFor(runId, settled, 30_000);
  // The reason an operator reads says how to go on.
  expect(status).toMatchObject({
    status: "halted",
    terminal: {
      reason: expect.stringMatching(
        /^RECONCILIATION_REQUIRED: .*resume the run with --settle ran --output/,
      ) as unknown,
    },
  });
  return runId;
}

/** The tool result the run's model was given for its launch (the WAL's COMPLETE record). */
async function launchResult(runId: string): Promise<unknown> {
  const complete = (await suite.wal(runId)).map((r) => r.record).find((r) => r.type === "COMPLETE");
  return complete?.type === "COMPLETE" ? complete.event.output : undefined;
}

describe("agentctl resume --settle: a run halted for a reconciliation goes on from what a human found", () => {
  it("'ran' with the call's output: the call made again is answered from it, and nothing is launched twice", async () => {
    const launch = serveLaunch();
    const runId = await haltedForReconciliation();
    // What does not go together is refused, before anything is sent.
    expect(await refusal("resume", runId, "--settle", "ran")).toMatchObject({
      code: "INVALID_INPUT",
      message: "--settle ran needs the call's --output",
    });
    expect(await refusal("resume", runId, "--settle", "ran", "--output", "{nope")).toMatchObject({
      code: "INVALID_INPUT",
    });
    expect(await refusal("resume", runId, "--settle", "maybe")).toMatchObject({ code: "INVALID_INPUT" });
    expect(await refusal("resume", runId, "--output", "{}")).toMatchObject({ code: "INVALID_INPUT" });
    expect(await refusal("resume", runId, "--tree", "--settle", "not-run")).toMatchObject({
      code: "INVALID_INPUT",
    });

    const reply = await agentctl(
      "resume",
      runId,
      "--settle",
      "ran",
      "--output",
      '{"launched":"moon","by":"console"}',
      "--by",
      "oncall",
    );
    expect(reply.stdout).toContain(`run ${runId}: resume queued, its call settled as ran`);
    expect(await suite.waitFor(runId, ended, 20_000)).toMatchObject({
      status: "committed",
      terminal: { output: "launched" },
    });
    expect(launch.executions()).toBe(1);
    expect(await launchResult(runId)).toEqual({ launched: "moon", by: "console" });
    const trail = await suite.audit(runId);
    expect(trail.map((e) => e.seq)).toEqual(trail.map((_, i) => i + 1));
    expect(trail.find((e) => e.kind === "run.resumed" && e.actor === "human")?.data).toEqual({
      by: "oncall",
      settled: "ran",
    });
  }, 60_000);

  it("'not run': the call made again runs; a run halted for another reason is refused a settlement", async () => {
    const launch = serveLaunch();
    const runId = await haltedForReconciliation();
    await agentctl("resume", runId, "--settle", "not-run", "--by", "oncall");
    expect(await suite.waitFor(runId, ended, 20_000)).toMatchObject({ status: "committed" });
    expect(launch.executions()).toBe(2);
    expect(await launchResult(runId)).toEqual({ launched: "moon", attempt: 2 });

    const { runId: other } = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "echo", input: { text: "slow" } }], delayMs: 3_000 },
          { text: "done" },
        ],
      }),
    );
    await agentctl("halt", other, "--reason", "look", "--by", "oncall");
    await suite.waitFor(other, (s) => s.status === "halted", 10_000);
    const refused = await refusal("resume", other, "--settle", "not-run");
    expect(refused).toMatchObject({ code: "INVALID_INPUT" });
    expect(refused?.message).toContain(`run '${other}' did not halt for a reconciliation (look)`);
  }, 60_000);
});
