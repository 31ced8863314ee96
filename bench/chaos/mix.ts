/**
 * What the soak submits: run i's kind, its RunSpec (scripted model) and how it must end. Most runs
 * book two items; some fan out to two children that book one each; some book and then fail their
 * verifier (their booking undone); some are judged by the critic; a few wait for a human.
 */
import type { Random } from "../../dist/shared/runtime/random.js";

export type RunKind = "book" | "fanout" | "fail" | "critic" | "approve" | "reject";

export interface PlannedRun {
  index: number;
  runId: string;
  kind: RunKind;
  spec: unknown;
  /** How the run must end. */
  expected: "committed" | "failed";
  /** Bookings its script makes (its children's included). */
  bookings: number;
  /** The children it spawns (their ids follow the product's `<parent>-<actionId>-<n>`). */
  children: number;
}

/** The scripted model's latency per turn: faults find runs mid-step. */
export interface Pace {
  turnMs: number;
}

const BOOKING_TOOLS = ["book", "unbook"];

function runSpec(
  name: string,
  script: unknown[],
  extra: {
    tools?: string[];
    capabilities?: unknown[];
    task?: object;
    critic?: object;
    resources?: object;
  } = {},
): Record<string, unknown> {
  return {
    schemaVersion: 1,
    task: { prompt: `chaos ${name}`, verifiers: [{ kind: "regex", pattern: "^booked" }], ...extra.task },
    agent: {
      name,
      model: { provider: "scripted", script },
      tools: extra.tools ?? BOOKING_TOOLS,
      capabilities: extra.capabilities ?? ["compute"],
      ...(extra.resources ? { resources: extra.resources } : {}),
    },
    ...(extra.critic ? { critic: extra.critic } : {}),
  };
}

const bookStep = (item: string, pace: Pace): unknown => ({
  toolCalls: [{ name: "book", input: { item } }],
  delayMs: pace.turnMs,
});
const answer = (text: string, pace: Pace): unknown => ({ text, delayMs: pace.turnMs });

function specOf(kind: RunKind, runId: string, pace: Pace): unknown {
  const twoBookings = [bookStep(`${runId}/a`, pace), bookStep(`${runId}/b`, pace)];
  switch (kind) {
    case "book":
      return runSpec(kind, [...twoBookings, answer(`booked ${runId}`, pace)]);
    case "critic":
      return runSpec(kind, [...twoBookings, answer(`booked ${runId}`, pace)], {
        task: { verifiers: [] },
        critic: { checks: [{ kind: "regex", pattern: "^booked" }] },
      });
    case "fail":
      // The verifier refuses the answer and no repair is allowed: the run fails, its booking undone.
      return runSpec(kind, [bookStep(`${runId}/a`, pace), answer(`nothing for ${runId}`, pace)], {
        resources: { maxRepairs: 0 },
      });
    case "approve":
    case "reject":
      return runSpec(kind, [bookStep(`${runId}/a`, pace), answer(`booked ${runId}`, pace)], {
        task: { requiresApproval: true },
      });
    case "fanout": {
      const child = (n: number): unknown =>
        runSpec("child", [bookStep(`${runId}/child-${n}`, pace), answer(`booked ${runId}/${n}`, pace)]);
      return runSpec(
        kind,
        [
          {
            toolCalls: [{ name: "spawn_agent", input: { runs: [child(1), child(2)] } }],
            delayMs: pace.turnMs,
          },
          answer(`booked ${runId} through its children`, pace),
        ],
        {
          tools: ["spawn_agent", ...BOOKING_TOOLS],
          capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
        },
      );
    }
  }
}

const BOOKINGS: Record<RunKind, number> = { book: 2, critic: 2, fail: 1, approve: 1, reject: 1, fanout: 2 };

/** Where the runs waiting for a human go: spread evenly, approved and rejected in turn. */
function approvalsAt(runs: number, approvals: number): Map<number, RunKind> {
  const at = new Map<number, RunKind>();
  for (let k = 0; k < approvals; k += 1) {
    at.set(Math.floor(((k + 1) * runs) / (approvals + 1)), k % 2 === 0 ? "approve" : "reject");
  }
  return at;
}

function drawKind(random: Random): RunKind {
  const dice = random.next();
  if (dice < 0.1) return "fanout";
  if (dice < 0.15) return "fail";
  if (dice < 0.25) return "critic";
  return "book";
}

export function planRuns(
  runs: number,
  approvals: number,
  random: Random,
  pace: Pace,
  tag: string,
): PlannedRun[] {
  const waiting = approvalsAt(runs, approvals);
  return Array.from({ length: runs }, (_, index) => {
    const kind = waiting.get(index) ?? drawKind(random);
    const runId = `chaos-${tag}-${index}`;
    return {
      index,
      runId,
      kind,
      spec: { ...(specOf(kind, runId, pace) as object), runId },
      expected: kind === "fail" || kind === "reject" ? "failed" : "committed",
      bookings: BOOKINGS[kind],
      children: kind === "fanout" ? 2 : 0,
    };
  });
}
