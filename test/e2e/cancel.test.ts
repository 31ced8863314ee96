import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../../shared/tools/tool.js";
import { AGENTCTL, agentctlFails, runProcess, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { parentOfOne } from "../helpers/spawning.js";

const suite = useClusterSuite("cancel", {
  actors: [
    { kind: "supervisor" },
    { kind: "tools", env: { TOOLS: "echo" } },
    { kind: "agent", name: "agent-1" },
    { kind: "agent", name: "agent-2" },
  ],
  env: { AGENT_RETRY_DELAY_MS: "500" },
});

const agentctl = (...args: string[]): Promise<{ stdout: string; stderr: string }> =>
  runProcess(process.execPath, [AGENTCTL, ...args], { env: suite.env() });

/** The structured error agentctl printed when it failed; undefined when it did not fail. */
const refusal = async (...args: string[]) => (await agentctlFails(suite, args)).error;

const ended = (s: { status: string }): boolean => s.status === "committed" || s.status === "failed";

/** A booking, a side effect with a compensation: `unbook` gets what `book` was given and answered. */
function serveBookings(): { booked: string[]; unbooked: unknown[] } {
  const booked: string[] = [];
  const unbooked: unknown[] = [];
  suite.serveTool(
    defineTool({
      name: "book",
      description: "Books an item.",
      input: z.object({ item: z.string() }),
      capability: { kind: "compute" },
      reversibility: "compensable",
      idempotent: true,
      compensation: { tool: "unbook" },
      execute: (input) => {
        booked.push(input.item);
        return Promise.resolve({ output: { booking: `b-${input.item}` } });
      },
    }),
  );
  suite.serveTool(
    defineTool({
      name: "unbook",
      description: "Cancels a booking.",
      input: z.object({ original: z.unknown(), output: z.unknown() }),
      capability: { kind: "compute" },
      reversibility: "compensable",
      idempotent: true,
      execute: (input) => {
        unbooked.push(input);
        return Promise.resolve({ output: { cancelled: true } });
      },
    }),
  );
  return { booked, unbooked };
}

describe("agentctl cancel: a halted run ended for good", () => {
  it("a run halted by the kill switch and cancelled under it undoes its booking and fails with RUN_CANCELLED", async () => {
    const { booked, unbooked } = serveBookings();
    const { runId } = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "book", input: { item: "room 12" } }] },
          { toolCalls: [{ name: "echo", input: { text: "confirm" } }], delayMs: 2_000 },
          { toolCalls: [{ name: "finish", input: { answer: "booked" } }] },
        ],
        tools: ["book", "unbook", "echo"],
      }),
    );
    await expect.poll(() => booked.length, { timeout: 10_000 }).toBe(1);
    await suite.client.killSwitch({ active: true, reason: "incident 9", by: "oncall" });
    try {
      // Halted at its next step, the echo call its 2 s turn answers.
      await suite.waitFor(runId, (s) => s.status === "halted", 10_000);
      // A cancel says why.
      expect((await refusal("cancel", runId))?.message).toMatch(/required option '--reason/);
      const reply = await agentctl("cancel", runId, "--reason", "wrong booking", "--by", "oncall");
      expect(reply.stdout).toContain(`run ${runId}: cancel queued`);
      // The undo runs under the kill switch, which stops new work only.
      const done = await suite.waitFor(runId, ended, 15_000);
      expect(done).toMatchObject({
        status: "failed",
        terminal: { reason: "[RUN_CANCELLED] cancelled by oncall: wrong booking" },
      });
    } finally {
      await suite.client.killSwitch({ active: false, reason: "resolved", by: "oncall" });
    }
    expect(booked).toEqual(["room 12"]);
    expect(unbooked).toEqual([{ original: { item: "room 12" }, output: { booking: "b-room 12" } }]);
    const trail = await suite.audit(runId);
    expect(trail.map((e) => e.seq)).toEqual(trail.map((_, i) => i + 1));
    const kinds = trail.map((e) => e.kind);
    const order = ["run.halted", "compensation.started", "compensation.completed", "run.failed"];
    expect(kinds.filter((k) => order.includes(k))).toEqual(order);
    expect(trail.find((e) => e.kind === "run.failed")?.reason).toMatch(/^\[RUN_CANCELLED\]/);
    // Ended, it cannot be cancelled again.
    const again = await refusal("cancel", runId, "--reason", "twice");
    expect(again).toMatchObject({ code: "INVALID_INPUT" });
    expect(again?.message).toContain("is not halted (it is failed)");
  }, 60_000);

  it("a halted child cancelled with its tree gives its parent RUN_CANCELLED as its result, and the parent goes on", async () => {
    const { runId, childId } = await parentOfOne(suite, "went on without it", 0, [
      { toolCalls: [{ name: "echo", input: { text: "child's work" } }], delayMs: 2_000 },
      { text: "child's answer" },
    ]);
    await agentctl("halt", childId, "--reason", "stuck", "--by", "oncall");
    await suite.waitFor(childId, (s) => s.status === "halted", 10_000);
    // A run still going is refused: its own next step would race the cancel.
    expect(await refusal("cancel", runId, "--reason", "x")).toMatchObject({
      code: "INVALID_INPUT",
      message: `run '${runId}' is not halted (it is running)`,
    });
    const reply = await agentctl("cancel", runId, "--tree", "--reason", "not needed", "--by", "oncall");
    expect(reply.stdout).toContain(
      `cancel queued for 1 run(s): ${childId}; not halted, so still going (halt them first): ${runId}`,
    );
    expect(await suite.waitFor(childId, ended, 15_000)).toMatchObject({ status: "failed" });
    const done = await suite.waitFor(runId, ended, 15_000);
    expect(done).toMatchObject({ status: "committed", terminal: { output: "went on without it" } });
    const completed = (await suite.wal(runId)).map((r) => r.record).find((r) => r.type === "COMPLETE");
    expect(completed?.type === "COMPLETE" ? completed.event.output : undefined).toMatchObject({
      results: [
        {
          runId: childId,
          status: "failed",
          error: { code: "RUN_CANCELLED", message: "cancelled by oncall: not needed" },
        },
      ],
    });
  }, 60_000);
});
