import { describe, expect, it } from "vitest";
import { selectRuns, UNFINISHED } from "../../services/cli/inspect.js";
import { oneLine, runLine, statusLine } from "../../services/cli/render.js";
import type { RunResult } from "../../services/cli/result.js";
import { failureSummary } from "../../services/cli/result-text.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { queuedStatus } from "../helpers/fixtures.js";

const t0 = Date.parse("2026-11-27T10:00:00.000Z");
const run = (runId: string, at: number, over: Partial<RunStatus> = {}): RunStatus => ({
  ...queuedStatus(runId, t0 + at),
  ...over,
});

describe("agentctl runs", () => {
  const statuses = [
    run("old-running", 1, { status: "running", phase: "ACT" }),
    run("done", 9, { status: "committed", phase: "COMMIT" }),
    run("new-waiting", 5, { status: "awaiting_approval", phase: "COMMIT" }),
    run("child", 7, {
      status: "halted",
      phase: "HALT",
      rootRunId: "new-waiting",
      parentRunId: "new-waiting",
      depth: 1,
      terminal: { kind: "HALT", reason: "stuck\n  on a tool" },
    }),
    run("queued", 3),
  ];

  it("lists the runs not finished by default, the most recently changed first, and how many the limit left out", () => {
    expect(selectRuns(statuses, { statuses: UNFINISHED, limit: 10 })).toMatchObject({
      runs: [statuses[3], statuses[2], statuses[4], statuses[0]],
      more: 0,
    });
    const limited = selectRuns(statuses, { statuses: UNFINISHED, limit: 2 });
    expect(limited.runs.map((r) => r.runId)).toEqual(["child", "new-waiting"]);
    expect(limited.more).toBe(2);
  });

  it("keeps only the statuses asked for, and one tree's runs with a root", () => {
    expect(selectRuns(statuses, { statuses: new Set(["committed"]), limit: 10 }).runs).toEqual([statuses[1]]);
    const tree = selectRuns(statuses, { statuses: UNFINISHED, root: "new-waiting", limit: 10 });
    expect(tree.runs.map((r) => r.runId)).toEqual(["child", "new-waiting"]);
  });

  it("counts the listed runs' children not finished, by status, and shows them on the parent's line", () => {
    const tree = [
      run("p", 9, { status: "running", phase: "ACT" }),
      ...(["running", "running", "halted", "committed", "failed"] as const).map((status, i) =>
        run(`p-${i}`, i, { status, parentRunId: "p", rootRunId: "p", depth: 1 }),
      ),
      run("other", 1, { status: "running", parentRunId: "elsewhere", rootRunId: "elsewhere", depth: 1 }),
    ];
    const { runs, children } = selectRuns(tree, { statuses: UNFINISHED, limit: 1 });
    expect(runs.map((r) => r.runId)).toEqual(["p"]);
    // Only the listed runs' children are counted; finished ones are not.
    expect([...children]).toEqual([["p", { running: 2, halted: 1 }]]);
    expect(runLine(runs[0] as RunStatus, { children: children.get("p") })).toMatch(
      / {2}children: 2 running, 1 halted$/,
    );
    expect(runLine(tree[1] as RunStatus, { children: children.get("p-0") })).not.toContain("children");
  });

  it("says of a halted child whose parent can no longer take its result why, so it is cancelled rather than left halted", () => {
    const child = (id: string, parentRunId: string) =>
      run(id, 5, { status: "halted", phase: "HALT", parentRunId, rootRunId: parentRunId, depth: 1 });
    const statuses = [
      run("f", 1, {
        status: "failed",
        phase: "FAIL",
        terminal: { kind: "FAIL", reason: "[RUN_CANCELLED] by oncall" },
      }),
      run("g", 1, { status: "running", phase: "ACT" }),
      child("f-1", "f"),
      child("g-1", "g"),
      child("gone-1", "gone"),
    ];
    const { orphans } = selectRuns(statuses, { statuses: UNFINISHED, limit: 10 });
    expect([...orphans].sort()).toEqual([
      ["f-1", "its parent f failed: [RUN_CANCELLED] by oncall"],
      ["gone-1", "its parent gone has finished and its status is gone"],
    ]);
    expect(runLine(statuses[2] as RunStatus, { orphaned: orphans.get("f-1") })).toMatch(
      / {2}orphaned, cancel it: its parent f failed: \[RUN_CANCELLED\] by oncall$/,
    );
  });

  it("shows one line per run: id, status, phase, counters, last change, its root when a child, what it waits on", () => {
    const child = statuses[3] as RunStatus;
    expect(runLine(child)).toMatch(
      /^child +halted +HALT +iter {3}0 {2}tools {3}0 {2}\$0\.0000 {2}2026-11-27T10:00:00\.007Z {2}root new-waiting {2}reason: stuck on a tool$/,
    );
    // Ids padded to one width line the columns up across a tree.
    const wide = runLine(child, { idWidth: 50 });
    expect(wide.indexOf("halted")).toBe(52);
    expect(runLine(child).indexOf("halted")).toBe(40);
    // A long reason (a failure's diagnosis) is cut; a committed run's is not shown.
    const failed = run("f", 0, {
      status: "failed",
      phase: "FAIL",
      terminal: { kind: "FAIL", reason: "x".repeat(300) },
    });
    expect(runLine(failed)).toMatch(/ {2}reason: x{119}…$/);
    const committed = run("c", 0, {
      status: "committed",
      phase: "COMMIT",
      terminal: { kind: "COMMIT", reason: "all verifiers passed" },
    });
    expect(runLine(committed)).not.toContain("reason");
    const waiting = run("w", 0, {
      status: "running",
      waiting: {
        for: "model turn",
        provider: "openai:m@http://127.0.0.1:1/v1",
        until: "2026-11-27T10:00:02.000Z",
        giveUpAt: "2026-11-27T10:01:00.000Z",
        reason: "MODEL_RATE_LIMITED: slow down",
      },
    });
    expect(runLine(waiting)).toMatch(/ {2}waiting: model turn for openai:m@http:\/\/127\.0\.0\.1:1\/v1$/);
    const retrying = run("r", 0, {
      status: "running",
      retrying: {
        for: "model turn",
        code: "MODEL_UNAVAILABLE",
        reason: `provider error (503):\n${"busy ".repeat(40)}`,
        since: "2026-11-27T10:00:01.000Z",
        nextTry: "2026-11-27T10:00:02.000Z",
        giveUpAt: "2026-11-27T10:10:01.000Z",
      },
    });
    // What it retries and why, on one line; when is for `watch` and `status`.
    expect(runLine(retrying)).toMatch(
      / {2}retrying: model turn \(MODEL_UNAVAILABLE: provider error \(503\): busy busy [a-z ]+…\)$/,
    );
  });

  it("says of a committed child a failing ancestor undid by whom, and how much is left to a human", () => {
    const undone = (calls: { ok: boolean }[], manual?: string[]) =>
      run("c", 0, {
        status: "committed",
        phase: "COMMIT",
        undone: {
          by: "p",
          at: "2026-11-27T10:00:01.000Z",
          calls: calls.map((c, i) => ({ actionId: `act-${i}`, compensation: "unbook", ok: c.ok })),
          ...(manual ? { manual } : {}),
        },
      });
    expect(runLine(undone([{ ok: true }]))).toMatch(/ {2}undone by p \(1 call\)$/);
    expect(runLine(undone([{ ok: true }, { ok: false }], ["act-9 (charge): irreversible"]))).toMatch(
      / {2}undone by p \(2 calls, 2 left to a human\)$/,
    );
    expect(statusLine(undone([{ ok: true }, { ok: true }]))).toMatch(/ {2}undone by p \(2 calls\)$/);
  });
});

describe("agentctl watch, a failed run", () => {
  it("shows a model error's whole diagnosis on one line: what the server answered, then its URL", () => {
    const url = "http://127.0.0.1:11434/v1/chat/completions";
    // A provider's reply as long as the driver keeps (500 characters): the URL after it still shows.
    const message = `model \\"llama3.2\\" not found, try pulling it first ${"·".repeat(400)}`;
    const body = `{"error":{"message":"${message}","type":"api_error"}}`;
    const diagnosis = `[MODEL_REJECTED] request rejected (404):\n${body} (POST ${url})`;
    const failed: RunResult = {
      runId: "r",
      outcome: "FAIL",
      reason: "modelError",
      at: "",
      artifactHash: undefined,
      source: "audit",
      diagnosis,
    };
    expect(failureSummary(failed)).toEqual([
      `diagnosis: [MODEL_REJECTED] request rejected (404): ${body} (POST ${url})`,
    ]);
    // A listing's column stays short, and keeps the URL: the middle is cut.
    const line = runLine(run("r", 0, { status: "failed", terminal: { kind: "FAIL", reason: diagnosis } }));
    const reason = line.slice(line.indexOf("reason: ") + "reason: ".length);
    expect(reason).toHaveLength(120);
    expect(reason).toMatch(
      /^\[MODEL_REJECTED\] request rejected \(404\): .*… \(POST http:\/\/127\.0\.0\.1:11434\/v1\/chat\/completions\)$/,
    );
    // Any other reason is cut at its end.
    expect(oneLine(`${"x".repeat(200)} (see the log)`)).toBe(`${"x".repeat(119)}…`);
  });
});
