import { describe, expect, it } from "vitest";
import type { Message } from "../../shared/contracts/model.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { replay } from "../../shared/loop/replay.js";
import {
  INVOCATION_LIMIT,
  type Effect,
  type LoopConfig,
  type LoopState,
  type Provenance,
} from "../../shared/loop/state.js";
import { CALL_WINDOW, callCount } from "../../shared/loop/guard.js";
import {
  BOUNDED_CHECKPOINT_RATIO,
  CHECKPOINT_RATIO,
  checkpointOf,
  checkpointWorthwhile,
  digestTranscript,
  hashableEffects,
  restoreCheckpoint,
} from "../../shared/loop/transcript.js";
import { canonicalJson } from "../../shared/runtime/canonical-json.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { describeTool } from "../../shared/tools/tool.js";
import type { ScriptStep } from "../../shared/contracts/model.js";
import { echoCall, olderCheckpoint, runner, spec } from "../helpers/fixtures.js";
import { toolTurn } from "../helpers/transitions.js";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import { startRun, transition } from "../../shared/loop/fsm.js";

const config: LoopConfig = { tools: [describeTool(echoTool)], checkpointEvery: 2 };

type Checkpoint = Extract<WalRecord, { type: "CHECKPOINT" }>;
const checkpoints = (wal: WalRecord[]): Checkpoint[] =>
  wal.filter((r): r is Checkpoint => r.type === "CHECKPOINT");

async function longRun(steps: number) {
  return runner({ checkpointEvery: 2 }).run(
    spec({
      script: [
        ...Array.from({ length: steps }, (_, i) => echoCall(`${i} `.padEnd(300, "x"))),
        { text: "done" },
      ],
      resources: { maxIterations: steps + 5, maxToolCalls: steps + 5 },
    }),
  );
}

describe("transcript digest and checkpoint size", () => {
  it("the digest folds in only new messages and equals one computed from scratch; any changed message changes it", () => {
    const messages: Message[] = Array.from({ length: 6 }, (_, i) => ({ role: "user", content: `m${i}` }));
    const stepwise = [2, 4, 6].reduce(
      (d, n) => digestTranscript(d, messages.slice(0, n)),
      digestTranscript(undefined, []),
    );
    const whole = digestTranscript(undefined, messages);
    expect(stepwise).toEqual(whole);
    expect(whole.count).toBe(6);
    const edited = messages.map((m, i) => (i === 3 ? { ...m, content: "changed" } : m));
    expect(digestTranscript(undefined, edited).hash).not.toBe(whole.hash);
    // A shorter transcript than the digest covers (never appended-only): folded again from the start.
    expect(digestTranscript(whole, messages.slice(0, 2))).toEqual(
      digestTranscript(undefined, messages.slice(0, 2)),
    );
  });

  it("a checkpoint taken while a model call is pending stores its transcript once; the call is hashed by the transcript's digest", async () => {
    const result = await runner({ checkpointEvery: 1 }).run(
      spec({ script: [echoCall("a".repeat(5_000)), echoCall("b".repeat(5_000)), { text: "done" }] }),
    );
    // The run's state as a checkpoint stores it, and as the loop holds it.
    const state = JSON.parse(JSON.stringify(checkpointOf(result.state))) as LoopState;
    const live = restoreCheckpoint(state, result.state.checkpointSize);
    expect(live).toEqual(result.state);
    // The state as it is while waiting on the model: the request holds the run's own transcript.
    const waiting: LoopState = {
      ...live,
      awaiting: {
        type: "callModel",
        requestId: "model-9",
        request: { system: "s", messages: state.messages, tools: [] },
      },
    };
    const stored = checkpointOf(waiting);
    const transcriptBytes = JSON.stringify(state.messages).length;
    expect(transcriptBytes).toBeGreaterThan(10_000);
    expect(JSON.stringify(stored).length).toBeLessThan(
      JSON.stringify(waiting).length - transcriptBytes + 100,
    );
    const restored = restoreCheckpoint(
      JSON.parse(JSON.stringify(stored)) as LoopState,
      waiting.checkpointSize,
    );
    expect(restored).toEqual(waiting);
    expect(restored.awaiting?.type === "callModel" && restored.awaiting.request.messages).toBe(
      restored.messages,
    );
    const [hashed] = hashableEffects([restored.awaiting!], restored) as [{ request: { messages: unknown } }];
    expect(hashed.request.messages).toEqual(restored.transcript);
    // A checkpoint holds every call count, in buckets keyed by two hex digits; the running loop
    // keeps only what its window of recent calls does not account for: here, nothing.
    expect(live.guard.callCounts).toEqual({});
    const counted = Object.entries(state.guard.callCounts).flatMap(([key, bucket]) =>
      Object.entries(bucket).map(([hash, n]) => (hash.startsWith(key) && key.length === 2 ? n : NaN)),
    );
    expect(counted.reduce((a, b) => a + b, 0)).toBe(state.guard.recentCalls.length);
    expect(checkpointOf(live)).toEqual(state);
    // Counts an older version wrote as one flat map come back the same, and so does a count of
    // a call before the window (an older version listed only five), which stays.
    const flat = Object.assign({}, ...Object.values(state.guard.callCounts)) as Record<string, number>;
    expect(Object.keys(flat).length).toBeGreaterThan(0);
    const legacy = { ...state, guard: { ...state.guard, callCounts: flat as never } };
    expect(restoreCheckpoint(legacy, live.checkpointSize)).toEqual(live);
    const early = "ffff000011112222";
    const older = { ...state, guard: { ...state.guard, callCounts: { ...flat, [early]: 4 } as never } };
    const carried = restoreCheckpoint(older);
    expect(carried.guard.callCounts).toEqual({ ff: { [early]: 4 } });
    expect(callCount(carried.guard, early)).toBe(4);
    expect(checkpointOf(carried).guard.callCounts).toEqual({ ...state.guard.callCounts, ff: { [early]: 4 } });
  });

  it("a checkpoint is worth writing once the transitions since the last one have sealed CHECKPOINT_RATIO times its size", () => {
    const state = (sealed: number | undefined, size: number | undefined) =>
      ({ sealedSinceCheckpoint: sealed, checkpointSize: size }) as LoopState;
    expect(checkpointWorthwhile(state(undefined, undefined))).toBe(true);
    expect(checkpointWorthwhile(state(1, 0))).toBe(true);
    expect(checkpointWorthwhile(state(CHECKPOINT_RATIO * 5_000 - 1, 5_000))).toBe(false);
    expect(checkpointWorthwhile(state(CHECKPOINT_RATIO * 5_000, 5_000))).toBe(true);
    // Once the context window is full (messages have left it) the state no longer grows.
    const bounded = (sealed: number) => ({ ...state(sealed, 5_000), elided: 3 }) as LoopState;
    expect(BOUNDED_CHECKPOINT_RATIO).toBeLessThan(1);
    expect(checkpointWorthwhile(bounded(BOUNDED_CHECKPOINT_RATIO * 5_000 - 1))).toBe(false);
    expect(checkpointWorthwhile(bounded(BOUNDED_CHECKPOINT_RATIO * 5_000))).toBe(true);
  });

  it("a long run whose state grows checkpoints ever less often: its checkpoints add up to a few times its last, and each record gives its state's size", async () => {
    const steps = 300;
    const result = await longRun(steps);
    expect(result.state.status).toBe("committed");
    const written = checkpoints(result.wal);
    const at = written.map((c) => (c.state as LoopState).step);
    expect(at[0]).toBe(2);
    const gaps = at.slice(1).map((s, i) => s - (at[i] as number));
    expect(gaps.every((gap, i) => i === 0 || gap >= (gaps[i - 1] as number))).toBe(true);
    expect(Math.max(...gaps)).toBeGreaterThan(40);
    for (const c of written) expect(c.bytes).toBe(canonicalJson(c.state).length);
    const sizes = written.map((c) => c.bytes as number);
    // Every two steps would have written ~75 times the last one.
    expect(sizes.reduce((a, b) => a + b, 0)).toBeLessThan(4 * (sizes.at(-1) as number));
    expect(written.length).toBeLessThan(15);
    // What a resume re-runs is bounded by what it reads: under the rule's twice, plus two steps.
    expect(result.state.sealedSinceCheckpoint).toBeLessThan(
      (CHECKPOINT_RATIO + 0.5) * (sizes.at(-1) as number),
    );
    const fromCheckpoint = replay(result.wal, config, { fromCheckpoint: true });
    expect(fromCheckpoint.state).toEqual(replay(result.wal, config).state);
    expect(fromCheckpoint.state).toEqual(result.state);
    expect(fromCheckpoint.transitions.length).toBeLessThan(steps);
  });

  it("a run whose last checkpoint was written by an older version (no digest, flat call counts) resumes from it to the same state", async () => {
    const result = await longRun(30);
    const last = result.wal.findLastIndex((r) => r.type === "CHECKPOINT");
    const checkpoint = result.wal[last] as Checkpoint;
    const state = checkpoint.state as LoopState;
    const { transcript: _digest, checkpointBytes: _bytes, ...older } = state;
    const flat = Object.assign({}, ...Object.values(state.guard.callCounts)) as Record<string, number>;
    const wal = result.wal.map((r, i) =>
      i === last ? { ...checkpoint, state: { ...older, guard: { ...state.guard, callCounts: flat } } } : r,
    );
    const resumed = replay(wal, config, { fromCheckpoint: true });
    expect(resumed.transitions.length).toBeGreaterThan(0);
    const { checkpointBytes: _b, ...expected } = result.state;
    expect(resumed.state).toEqual(expected);
  });

  it("a log that ends with a checkpoint an older version wrote still resumes: a worker taking over leaves checkpoints out of the comparison", async () => {
    const result = await longRun(30);
    // A worker that dies during the tool call after a checkpoint leaves the log ending with it.
    const cut = result.wal.findLastIndex((r, i) => r.type === "CHECKPOINT" && i < result.wal.length - 5);
    const from = result.wal.findLastIndex((r, i) => r.type === "CHECKPOINT" && i < cut);
    expect(from).toBeGreaterThan(0);
    // Both checkpoints in an older version's shape.
    const log = result.wal.slice(0, cut + 1).map(olderCheckpoint);
    expect(() => replay(log, config, { fromCheckpoint: true })).toThrow(/replay diverged/);
    const resumed = replay(log, config, { fromCheckpoint: true, snapshots: "skip" });
    const current = replay(result.wal.slice(0, cut + 1), config, { fromCheckpoint: true });
    expect(resumed.state.transitionHash).toBe(current.state.transitionHash);
    expect(resumed.state.messages).toEqual(current.state.messages);
    expect(resumed.state.transcript).toEqual(current.state.transcript);
    // The checkpoint the log ends with is on record: nothing is owed to the log.
    expect(resumed.unwritten).toEqual([]);
    // Records that act or decide are still compared in full.
    const intent = log.findIndex((r, i) => i > from && r.type === "INTENT");
    const tampered = log.map((r, i) => (i === intent ? { ...r, input: { text: "changed" } } : r));
    expect(() => replay(tampered, config, { fromCheckpoint: true, snapshots: "skip" })).toThrow(
      /replay diverged/,
    );
  });

  it("a replay that reports checkpoints passes an older version's log, whose checkpoints differ in shape and cadence, and says from which record they differ", async () => {
    const result = await longRun(30);
    const own = replay(result.wal, config, { snapshots: "report" });
    const count = checkpoints(result.wal).length;
    expect(count).toBeGreaterThan(2);
    expect(own.checkpoints).toEqual({ onRecord: count, replayed: count, identical: true });
    // An older version: its first checkpoint elsewhere (one record later: another cadence), the
    // second in its own shape.
    const at = result.wal.findIndex((r) => r.type === "CHECKPOINT");
    const second = result.wal.findIndex((r, i) => i > at && r.type === "CHECKPOINT");
    const moved = [...result.wal];
    moved.splice(at + 1, 0, moved.splice(at, 1)[0] as WalRecord);
    const log = moved.map((r, i) => (i === second ? olderCheckpoint(r) : r));
    expect(() => replay(log, config)).toThrow(/replay diverged at record/);
    const report = replay(log, config, { snapshots: "report" });
    expect(report.transitions).toEqual(own.transitions);
    expect(report.checkpoints).toEqual({
      onRecord: count,
      replayed: count,
      identical: false,
      firstDifference: { checkpoint: 1, record: at + 2 },
    });
    // Only the reshaped one: the first difference is the second checkpoint, at its own record.
    const reshaped = result.wal.map((r, i) => (i === second ? olderCheckpoint(r) : r));
    expect(replay(reshaped, config, { snapshots: "report" }).checkpoints?.firstDifference).toEqual({
      checkpoint: 2,
      record: second + 1,
    });
    // A log without its last checkpoint: the replay writes one the log lacks.
    const last = result.wal.findLastIndex((r) => r.type === "CHECKPOINT");
    const fewer = result.wal.filter((_, i) => i !== last);
    expect(replay(fewer, config, { snapshots: "report" }).checkpoints).toEqual({
      onRecord: count - 1,
      replayed: count,
      identical: false,
      firstDifference: { checkpoint: count },
    });
    // Records that act or decide still decide the verdict.
    const intent = log.findIndex((r) => r.type === "INTENT");
    const tampered = log.map((r, i) => (i === intent ? { ...r, input: { text: "changed" } } : r));
    expect(() => replay(tampered, config, { snapshots: "report" })).toThrow(/replay diverged/);
  });

  describe("context window", () => {
    /** A step of three parallel echo calls: a window cut may land between a call and its results. */
    const triple = (i: number): ScriptStep => ({
      toolCalls: [0, 1, 2].map((j) => ({ name: "echo", input: { text: `${i}.${j} `.padEnd(200, "y") } })),
    });

    async function windowed(steps: number, maxContextMessages?: number) {
      const requests: Message[][] = [];
      const onEffect = (e: Effect): void => {
        if (e.type === "callModel") requests.push(e.request.messages);
      };
      const result = await runner({ checkpointEvery: 2, onEffect }).run(
        spec({
          script: [...Array.from({ length: steps }, (_, i) => triple(i)), { text: "done" }],
          resources: {
            maxIterations: steps + 5,
            maxToolCalls: 3 * steps + 5,
            ...(maxContextMessages ? { maxContextMessages } : {}),
          },
        }),
      );
      return { result, requests };
    }

    it("the model sees the task and the latest messages, never a tool result without its call; the digest still covers every message", async () => {
      const max = 6;
      const { result, requests } = await windowed(40, max);
      const whole = await windowed(40);
      expect(result.state.status).toBe("committed");
      expect(requests).toHaveLength(41);
      for (const messages of requests) {
        expect(messages[0]).toEqual(whole.requests[0]![0]);
        // A cut before a group of results moves back to their call: at most a group over.
        expect(messages.length).toBeLessThanOrEqual(max + 3);
        const calls = new Set(messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []) : [])));
        for (const m of messages)
          if (m.role === "tool") expect([...calls].some((c) => c.id === m.toolCallId)).toBe(true);
      }
      // What the model sees is the tail of the whole transcript.
      const last = requests.at(-1)!;
      expect(last.slice(1)).toEqual(whole.requests.at(-1)!.slice(-(last.length - 1)));
      expect(result.state.transcript).toEqual(whole.result.state.transcript);
      expect(result.state.elided).toBe(whole.result.state.messages.length - result.state.messages.length);
      const called = result.audit.filter((e) => e.kind === "model.called").at(-1)!;
      expect(called.data).toMatchObject({ messages: last.length, elided: result.state.elided });
    });

    it("under a window a long run checkpoints at a steady interval, each the same size, and resumes from the last to the same state", async () => {
      const steps = 300;
      const { result } = await windowed(steps, 8);
      expect(result.state.status).toBe("committed");
      const written = checkpoints(result.wal);
      // Past the windows (messages, invocations, repeated-call counts) a checkpoint stops growing.
      const saturated = CALL_WINDOW / 3 + 10;
      // By then every window is full: three calls a step.
      expect(3 * saturated).toBeGreaterThan(Math.max(CALL_WINDOW, INVOCATION_LIMIT));
      const late = written.filter((c) => (c.state as LoopState).step > saturated);
      const sizes = late.map((c) => JSON.stringify(c.state).length);
      expect(sizes.length).toBeGreaterThan(2);
      expect(Math.max(...sizes) / Math.min(...sizes)).toBeLessThan(1.05);
      // A steady size and steady steps make a steady interval, however long the run.
      const at = late.map((c) => (c.state as LoopState).step);
      const gaps = at.slice(1).map((s, i) => s - at[i]!);
      // Steady as the size is: within the few percent a checkpoint's size varies by.
      expect(Math.max(...gaps) / Math.min(...gaps)).toBeLessThan(1.05);
      const final = result.state;
      expect(final.invocations).toHaveLength(INVOCATION_LIMIT);
      expect(final.invocations.at(-1)!.actionId).toBe(`act-${3 * steps}`);
      expect(final.guard.recentCalls).toHaveLength(CALL_WINDOW);
      const terminal = result.wal.find((r) => r.type === "TERMINAL") as {
        artifact: { provenance: Provenance };
      };
      expect(terminal.artifact.provenance.toolInvocations).toEqual(final.invocations);
      expect(terminal.artifact.provenance.toolInvocationsOmitted).toBe(3 * steps - INVOCATION_LIMIT);
      const fromCheckpoint = replay(result.wal, config, { fromCheckpoint: true });
      expect(fromCheckpoint.state).toEqual(replay(result.wal, config).state);
      expect(fromCheckpoint.state).toEqual(final);
    });

    it("once its window is full, a long run checkpoints every N responses, as a short run does: a resume replays as few steps", () => {
      const every = 10;
      const bounded = echoRun(400, every, 32);
      const at = (wal: WalRecord[]) => checkpoints(wal).map((c) => (c.state as LoopState).step);
      // Past the repeated-call guard's window the state is as large as it gets (W3's 37 KB).
      const late = at(bounded.wal).filter((step) => step > CALL_WINDOW);
      expect(late.length).toBeGreaterThan(10);
      expect(late.slice(1).map((step, i) => step - late[i]!)).toEqual(late.slice(1).map(() => every));
      expect(checkpoints(bounded.wal).at(-1)!.bytes).toBeGreaterThan(30_000);
      const resumed = replay(bounded.wal, bounded.config, { fromCheckpoint: true });
      expect(resumed.state).toEqual(bounded.state);
      expect(resumed.transitions.length).toBeLessThanOrEqual(2 * every + 1);
      // A transcript that keeps growing is checkpointed ever less often, as before.
      const growing = at(echoRun(400, every).wal).filter((step) => step > CALL_WINDOW);
      expect(growing.length).toBeLessThan(late.length / 2);
    });

    it("a window wider than the transcript changes nothing", async () => {
      const narrow = await windowed(5, 100);
      const whole = await windowed(5);
      expect(narrow.requests).toEqual(whole.requests);
      expect(narrow.result.state.elided).toBeUndefined();
      const terminal = narrow.result.wal.find((r) => r.type === "TERMINAL") as {
        artifact: { provenance: Provenance };
      };
      expect(terminal.artifact.provenance.toolInvocations).toHaveLength(15);
      expect(terminal.artifact.provenance).not.toHaveProperty("toolInvocationsOmitted");
      expect(narrow.result.state.messages).toEqual(whole.result.state.messages);
      expect(narrow.result.audit.map((e) => e.data)).toEqual(whole.result.audit.map((e) => e.data));
    });
  });
});

/** A run of `steps` echo calls driven by hand, as W3 writes its histories: a spec whose size stays put. */
function echoRun(steps: number, checkpointEvery: number, maxContextMessages?: number) {
  const runSpec = RunSpec.parse(
    spec({
      script: [{ text: "done" }],
      loop: true,
      resources: {
        maxIterations: steps + 5,
        maxToolCalls: steps + 5,
        ...(maxContextMessages ? { maxContextMessages } : {}),
      },
    }),
  );
  const config: LoopConfig = { tools: [describeTool(echoTool)], checkpointEvery };
  const wal: WalRecord[] = [];
  const start = {
    type: "start",
    at: 1,
    spec: runSpec,
    runId: "r-echo",
    rootRunId: "r-echo",
    depth: 0,
  } as const;
  let t = startRun(start, config);
  for (let step = 0; ;) {
    wal.push(...t.effects.flatMap((e) => (e.type === "wal" ? [e.record] : [])));
    const awaiting = t.effects.find((e) => e.type !== "wal" && e.type !== "audit");
    if (awaiting?.type === "recallMemory")
      t = transition(t.state, { type: "memoryRecalled", at: 1, memories: [] }, config);
    else if (awaiting?.type === "callTool")
      t = transition(
        t.state,
        { type: "toolCompleted", at: 1, actionId: awaiting.actionId, output: awaiting.input },
        config,
      );
    else if (awaiting?.type === "callModel" && step < steps)
      t = toolTurn(t, { name: "echo", input: { text: `${(step += 1)} `.padEnd(70, "z") } }, config);
    else return { wal, state: t.state, config };
  }
}
