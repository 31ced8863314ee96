import { describe, expect, it, onTestFinished } from "vitest";
import { bookingTools } from "../helpers/bookings.js";
import { agentctlOf, ended, OPERATOR_CLUSTER, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

const suite = useClusterSuite("spawn-limits", OPERATOR_CLUSTER);

/** The booking tools, served from the test process for one test. */
function serveBookings(): ReturnType<typeof bookingTools> {
  const bookings = bookingTools();
  const served = bookings.tools.map((tool) => suite.serveTool(tool));
  onTestFinished(() => served.forEach((s) => s.stop()));
  return bookings;
}

/**
 * A run that books `item` and answers `answer`, after a first turn of `delayMs`; its agent's name
 * its own (an agent's memory recalls its earlier answers to the same task).
 */
const booker = (item: string, answer: string, delayMs = 0, name = "booker") =>
  spec({
    name,
    script: [{ toolCalls: [{ name: "book", input: { item } }], delayMs }, { text: answer }],
    tools: ["book", "unbook"],
  });

/**
 * A parent whose model spawns children under the ids it names (`runId` in a child's spec, which
 * the spawn tool's input allows), echoes, then takes `thenMs` over its answer. With `maxIterations`
 * 1 it fails at the turn after the fan-in: its undo then reads which of its children committed.
 */
const spawner = (
  children: { runId: string; item: string; delayMs?: number }[],
  thenMs = 0,
  maxIterations?: number,
) =>
  spec({
    name: "spawner",
    script: [
      {
        toolCalls: [
          {
            name: "spawn_agent",
            input: {
              runs: children.map((c) => ({
                ...booker(c.item, `child ${c.item}`, c.delayMs),
                runId: c.runId,
              })),
            },
          },
        ],
      },
      { toolCalls: [{ name: "echo", input: { text: "one more" } }] },
      { toolCalls: [{ name: "finish", input: { answer: "never" } }], delayMs: thenMs },
    ],
    tools: ["spawn_agent", "echo", "book", "unbook"],
    capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
    ...(maxIterations ? { resources: { maxIterations } } : {}),
  });

/** What the parent's spawn call completed with, from its WAL. */
async function spawnResults(runId: string): Promise<unknown> {
  const completed = (await suite.wal(runId))
    .map((r) => r.record)
    .find((r) => r.type === "COMPLETE" && r.event.actionId === "act-1");
  return completed?.type === "COMPLETE" ? completed.event.output : undefined;
}

describe("a spawned child's id names a run of its parent's, never another tree's", () => {
  it("a child named after another tree's committed run: the parent is told RUN_ID_TAKEN, never sees its output, and its failure leaves its booking alone", async () => {
    const bookings = serveBookings();
    const { runId: other } = await suite.client.submit(
      booker("seat 7", "the other tree's answer", 0, "other-tree"),
    );
    expect(await suite.waitFor(other, ended, 15_000)).toMatchObject({ status: "committed" });
    const named = `named-${Date.now().toString(36)}`;
    const { runId } = await suite.client.submit(
      spawner(
        [
          { runId: other, item: "seat 8" },
          { runId: named, item: "seat 9" },
        ],
        0,
        1,
      ),
    );
    expect(await suite.waitFor(runId, ended, 20_000)).toMatchObject({ status: "failed" });
    const results = await spawnResults(runId);
    expect(results).toMatchObject({
      results: [
        { runId: other, status: "failed", error: { code: "RUN_ID_TAKEN" } },
        // A name no run has is the parent's child, as before.
        { runId: named, status: "committed", output: "child seat 9" },
      ],
    });
    expect(JSON.stringify(await suite.wal(runId))).not.toContain("the other tree's answer");
    // The parent undid its own child's booking, and nothing of the other tree's.
    expect(bookings.unbooked).toEqual([{ original: { item: "seat 9" }, output: { booking: "b-seat 9" } }]);
    expect(bookings.booked).toEqual(["seat 7", "seat 9"]);
    const untouched = await suite.client.status.get(other);
    expect(untouched).toMatchObject({ status: "committed", terminal: { output: "the other tree's answer" } });
    expect(untouched?.undone).toBeUndefined();
    expect(untouched?.parentRunId).toBeUndefined();
    expect((await suite.audit(other)).map((e) => e.kind)).not.toContain("run.rejected");
  }, 60_000);

  it("a child named after another tree's run still going: a cancel of the parent's tree does not cancel it", async () => {
    serveBookings();
    const { runId: other } = await suite.client.submit(booker("seat 1", "still mine", 4_000, "other-tree"));
    await suite.waitFor(other, (s) => s.status === "running", 10_000);
    const { runId } = await suite.client.submit(spawner([{ runId: other, item: "seat 2" }], 10_000));
    // The parent goes on to its slow turn: its spawn answered at once.
    await expect
      .poll(() => spawnResults(runId), { timeout: 15_000 })
      .toMatchObject({
        results: [{ runId: other, status: "failed", error: { code: "RUN_ID_TAKEN" } }],
      });
    await agentctlOf(suite).run("cancel", runId, "--reason", "wrong trip", "--tree");
    expect(await suite.waitFor(runId, ended, 20_000)).toMatchObject({ status: "failed" });
    expect(await suite.waitFor(other, ended, 20_000)).toMatchObject({
      status: "committed",
      terminal: { output: "still mine" },
    });
  }, 60_000);

  it("a parent cancelled while it waits on its own child: only its own is cancelled and undone, not the runs of another tree its spawn named", async () => {
    const bookings = serveBookings();
    const { runId: done } = await suite.client.submit(booker("seat 3", "done", 0, "other-tree"));
    await suite.waitFor(done, ended, 10_000);
    const { runId: going } = await suite.client.submit(booker("seat 4", "going", 4_000, "other-tree"));
    await suite.waitFor(going, (s) => s.status === "running", 10_000);
    const own = `own-${Date.now().toString(36)}`;
    const { runId } = await suite.client.submit(
      spawner([
        { runId: done, item: "seat 5" },
        { runId: going, item: "seat 6" },
        { runId: own, item: "seat 7", delayMs: 4_000 },
      ]),
    );
    await suite.waitFor(own, (s) => s.status === "running", 10_000);
    // Its undo reads every child its spawn named: it was cancelled before the fan-in.
    await agentctlOf(suite).run("cancel", runId, "--reason", "wrong trip");
    expect(await suite.waitFor(runId, ended, 20_000)).toMatchObject({ status: "failed" });
    const cancelled = await suite.waitFor(own, ended, 20_000);
    expect(cancelled.status).toBe("failed");
    expect(cancelled.terminal?.reason).toContain("RUN_CANCELLED");
    expect(await suite.waitFor(going, ended, 20_000)).toMatchObject({
      status: "committed",
      terminal: { output: "going" },
    });
    expect((await suite.client.status.get(done))?.undone).toBeUndefined();
    expect(bookings.unbooked).toEqual([]);
  }, 60_000);
});

describe("what a spawned child may be given: no more than its parent has", () => {
  it("a child asking for a tool, a grant or a privacy tier its parent lacks is refused before it is submitted; one within them runs", async () => {
    const bookings = serveBookings();
    const asked = (over: Parameters<typeof spec>[0]) => spec({ script: [{ text: "ran anyway" }], ...over });
    const { runId } = await suite.client.submit(
      spec({
        name: "narrow-parent",
        script: [
          {
            toolCalls: [
              {
                name: "spawn_agent",
                input: {
                  runs: [
                    booker("seat 10", "booked behind its parent's back"),
                    asked({ tools: [], capabilities: [{ kind: "network", allowedHosts: ["*"] }] }),
                    asked({ tools: [], capabilities: [], privacy: "standard" }),
                    asked({ tools: ["echo"], capabilities: ["compute"], script: [{ text: "within" }] }),
                  ],
                },
              },
            ],
          },
          { toolCalls: [{ name: "finish", input: { answer: "fanned in" } }] },
        ],
        tools: ["spawn_agent", "echo"],
        capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
        resources: { maxCostUsd: 0.5, deadlineMs: 60_000 },
        privacy: "private",
      }),
    );
    expect(await suite.waitFor(runId, ended, 20_000)).toMatchObject({ status: "committed" });
    const { results } = (await spawnResults(runId)) as {
      results: { status: string; output?: string; error?: { code: string; message: string } }[];
    };
    expect(results.map((r) => [r.status, r.error?.code ?? r.output])).toEqual([
      ["failed", "CAPABILITY_DENIED"],
      ["failed", "CAPABILITY_DENIED"],
      ["failed", "PRIVACY_DENIED"],
      ["committed", "within"],
    ]);
    expect(results[0]?.error?.message).toContain("not: book, unbook");
    expect(results[1]?.error?.message).toContain("not: network");
    expect(bookings.booked).toEqual([]);
    // The child that ran had its parent's spending limits and privacy tier, as it named none.
    const start = (await suite.wal(`${runId}-act-1-4`))
      .map((r) => r.record)
      .find((r) => r.type === "EVENT" && r.event.type === "start");
    const agent =
      start?.type === "EVENT" && start.event.type === "start" ? start.event.spec.agent : undefined;
    expect(agent?.resources).toMatchObject({ maxCostUsd: 0.5, deadlineMs: 60_000 });
    expect(agent?.privacy).toBe("private");
    // Never submitted: the refused children have no trail, only the status their parent's fan-in read.
    for (const i of [1, 2, 3]) {
      const child = `${runId}-act-1-${i}`;
      expect(await suite.audit(child)).toEqual([]);
      expect(await suite.client.status.get(child)).toMatchObject({ status: "failed", parentRunId: runId });
    }
  }, 60_000);
});
