import { RunSpec } from "../../dist/shared/contracts/run-spec.js";
import type { WalRecord } from "../../dist/shared/contracts/wal.js";
import type { AuditEvent } from "../../dist/shared/contracts/audit.js";
import { headers } from "@nats-io/transport-node";
import { continuationJob } from "../../dist/shared/bus/jobs.js";
import { PART_HEADER, recordMessages } from "../../dist/shared/bus/wal-parts.js";
import { PART_OF_HEADER } from "../../dist/shared/bus/run-log.js";
import { encodeLogEntry } from "../../dist/shared/bus/log-codec.js";
import { CHECKPOINT_HEADER, EVENTS_HEADER, headlineOf } from "../../dist/shared/contracts/log.js";
import { RunStatusStore } from "../../dist/shared/bus/run-status.js";
import { openTree } from "../../dist/shared/bus/tree-iterations.js";
import { startRun, transition } from "../../dist/shared/loop/fsm.js";
import type { LoopConfig, Transition } from "../../dist/shared/loop/state.js";
import { statusOf } from "../../dist/shared/loop/status.js";
import { ToolRegistry } from "../../dist/shared/tools/registry.js";
import { echoTool } from "../../dist/shared/tools/builtin/echo.js";
import type { Plan } from "../lib/plan.ts";
import type { Finding } from "../lib/row.ts";
import { median, round } from "../lib/stats.ts";
import { echoRunSpec, nextEchoEvent } from "../lib/echo-run.ts";
import { OurCluster, OUR_BENCH_ENV } from "../systems/ours.ts";

/** Resumes timed per windowed length, and for the whole-transcript comparison (2–3 s each). */
const WINDOWED_ROUNDS = 11;
const WHOLE_ROUNDS = 3;
/**
 * Workers keep tool descriptors longer than writing the longest history takes (10,000 steps: about
 * 6 s, past the default 5 s): otherwise only the resumes after the longest history would ask the
 * tool service again, a round trip that has nothing to do with the run's length.
 */
const W3_ENV = { AGENT_TOOL_DESCRIBE_TTL_MS: "60000" };
/** Uncounted resumes first: enough that both workers have taken one. */
const WARM_RESUMES = 4;
/** Rounds of the cold condition (see measureHistory). */
const COLD_ROUNDS = 4;
/**
 * W3's context window: the model sees the task and the last 32 messages (16 steps). Without one
 * the run's state is its whole transcript, and a resume must read it all: measured too, at the
 * longest length, for comparison.
 */
export const W3_CONTEXT_MESSAGES = 32;
const encoder = new TextEncoder();

/** One transition as a worker writes it to the run's log: one message, its records and its events. */
interface Written {
  records: WalRecord[];
  events: AuditEvent[];
}

/**
 * The log of a run that has recorded `steps` model turns, each with an echo call, as the loop core
 * writes it, a transition at a time; generated lazily (a long history's checkpoints are large).
 * Returns the final transition: the run then waits on the model.
 */
function* history(
  runId: string,
  steps: number,
  config: LoopConfig,
  maxContextMessages?: number,
): Generator<Written, Transition> {
  const spec = RunSpec.parse(echoRunSpec("history", steps + 5, maxContextMessages));
  const at = Date.now();
  let t = startRun({ type: "start", at, spec, runId, rootRunId: runId, depth: 0, auditSeq: 0 }, config);
  for (let step = 0; ;) {
    const records = t.effects.flatMap((e) => (e.type === "wal" ? [e.record] : []));
    const events = t.effects.flatMap((e) => (e.type === "audit" ? [e.event] : []));
    if (records.length > 0 || events.length > 0) yield { records, events };
    const event = nextEchoEvent(t, step, steps, at);
    if (!event) return t;
    if (event.type === "modelResponded") step += 1;
    t = transition(t.state, event, config);
  }
}

/** One message to publish: a whole log entry, or a part of a split one. */
interface Outgoing {
  subject: string;
  data: Uint8Array;
  kinds: string;
  checkpoint: boolean;
  part?: string;
  partOf?: number;
}

/**
 * Writes a generated history to the run's log (as the worker that died had written it), one
 * message per transition, 256 in flight at a time. A message over the server's max_payload is
 * split into parts exactly as the product's log writer does it, its first part acknowledged
 * before the others (they name its sequence).
 */
async function writeHistory(
  cluster: OurCluster,
  runId: string,
  transitions: Generator<Written, Transition>,
): Promise<{
  last: Transition;
  count: number;
  messages: number;
  checkpointBytes: number;
  /** Records after the last checkpoint: what a resume replays. */
  tail: number;
}> {
  const { bus } = cluster;
  // The latest checkpoint's sequence, named on each later message as the product's writer does.
  let checkpointSeq = 0;
  let checkpointBytes = 0;
  let count = 0;
  let tail = 0;
  let messages = 0;
  let batch: Outgoing[] = [];
  const publish = (o: Outgoing): Promise<{ seq: number }> => {
    const h = headers();
    if (o.kinds !== "") h.set(EVENTS_HEADER, o.kinds);
    if (o.part !== undefined) h.set(PART_HEADER, o.part);
    if (o.partOf !== undefined) h.set(PART_OF_HEADER, String(o.partOf));
    if (checkpointSeq > 0) h.set(CHECKPOINT_HEADER, String(checkpointSeq));
    messages += 1;
    return bus.js.publish(o.subject, o.data, { headers: h });
  };
  const flush = async (): Promise<void> => {
    const acks = await Promise.all(batch.map(publish));
    acks.forEach((ack, i) => {
      // A checkpoint is read back from its (first) message.
      if (batch[i]!.checkpoint) checkpointSeq = ack.seq;
    });
    batch = [];
  };
  for (;;) {
    const next = transitions.next();
    if (next.done) {
      await flush();
      return { last: next.value, count, messages, checkpointBytes, tail };
    }
    const { records, events } = next.value;
    // As the product's LogWriter writes it (format 2, large bodies compressed).
    const data = encodeLogEntry(runId, { records, events });
    const checkpoint = records.find((r) => r.type === "CHECKPOINT");
    if (checkpoint) checkpointBytes = encoder.encode(JSON.stringify(checkpoint)).length;
    const after = records.length - 1 - records.findLastIndex((r) => r.type === "CHECKPOINT");
    tail = checkpoint ? after : tail + records.length;
    count += records.length;
    const message = {
      subject: bus.subjects.log(runId, headlineOf(events)),
      kinds: events.map((e) => e.kind).join(","),
      checkpoint: checkpoint !== undefined,
    };
    const split = recordMessages(data, bus.nc.info?.max_payload);
    if (split.length === 1) {
      batch.push({ ...message, data });
      // A checkpoint's sequence is known once it is acknowledged: the messages after it name it.
      if (batch.length >= 256 || message.checkpoint) await flush();
      continue;
    }
    await flush();
    const [first, ...rest] = split;
    const { seq } = await publish({ ...message, ...first! });
    await Promise.all(rest.map((part) => publish({ ...message, ...part, checkpoint: false, partOf: seq })));
    if (message.checkpoint) checkpointSeq = seq;
  }
}

interface Case {
  steps: number;
  window: number | undefined;
  /** Resumed after every other history of its condition was written (see measureHistory). */
  cold: boolean;
  /** Resume times by round: a sample is compared with the shortest length's of its round. */
  samples: Map<number, number>;
  walRecords: number;
  checkpointBytes: number;
  tailRecords: number;
  error: string;
}

/**
 * The median, over the rounds both resumed in, of a case's resume time over the shortest length's
 * in the same round. A round's resumes are seconds apart, the samples behind two medians minutes:
 * this host's speed drifts by more than W3's ±20 % in minutes, so this tells growth with the length
 * from a slow moment of the machine better than the medians do.
 */
function vsShortest(c: Case, base: Case): number | undefined {
  const ratios = [...c.samples].flatMap(([r, ms]) => {
    const baseMs = base.samples.get(r);
    return baseMs === undefined ? [] : [ms / baseMs];
  });
  return ratios.length > 0 ? round(median(ratios)) : undefined;
}

/** A history written and left waiting on the model, as a dead worker would leave it. */
interface Parked {
  runId: string;
  status: ReturnType<typeof statusOf>;
}

/**
 * How many steps past its length a round's history stops: 0 to 9, by round. A resume replays the
 * steps since the run's last checkpoint, and where the checkpoints fall moves with the state's size
 * (a run id a byte longer shifts them): stopping every length at the same spread of places keeps
 * that distance from being confused with the history's length.
 */
const PARK_SPREAD = 10;

/** Writes one history of the case's length and its run status; the worker resumes it later. */
async function writeCase(cluster: OurCluster, config: LoopConfig, c: Case, round: number): Promise<Parked> {
  const runId = `history-${c.steps}-${c.window ?? "all"}-${round}-${Date.now().toString(36)}`;
  const steps = c.steps + (Math.abs(round) % PARK_SPREAD);
  const written = await writeHistory(cluster, runId, history(runId, steps, config, c.window));
  c.walRecords = written.count;
  c.checkpointBytes = written.checkpointBytes;
  c.tailRecords = written.tail;
  const status = statusOf(written.last.state, Date.now());
  await new RunStatusStore(cluster.bus.buckets.runs).put(status);
  // The tree's cap, as the supervisor writes it at a root's admission: without one, a worker
  // taking the run over finds no budget and fails it instead of asking the model.
  await openTree(cluster.bus.buckets.pool, runId, 2 * c.steps + 100);
  await cluster.caughtUp(runId, written.messages);
  return { runId, status };
}

/**
 * How long the machine is left alone between writing the cold case's histories and timing their
 * resumes: the server and the OS write back tens of megabytes of checkpoints meanwhile.
 */
const SETTLE_MS = 3_000;

/**
 * A little more than one of nats-server's file blocks (8 MiB for these streams). Written after
 * each cold history, it keeps every history's last checkpoint in a block of its own: a resume that
 * loaded a block would otherwise warm the next history's (a short history shares its block with
 * its neighbours), and a cold resume would be cold for some lengths only.
 */
const FILLER_BYTES = 9 * 1024 * 1024;
const FILLER_CHUNK = 64 * 1024;

async function writeFiller(cluster: OurCluster, round: number): Promise<void> {
  const { bus } = cluster;
  const subject = bus.subjects.log(`history-filler-${round}-${Date.now().toString(36)}`, "step");
  // A log entry, as the bench's log watcher parses every message, with neither records nor events.
  const data = encoder.encode(JSON.stringify({ records: [], events: [], pad: "x".repeat(FILLER_CHUNK) }));
  for (let sent = 0; sent < FILLER_BYTES; sent += 32 * data.length) {
    await Promise.all(Array.from({ length: 32 }, () => bus.js.publish(subject, data)));
  }
}

/**
 * W3: how long a worker takes to resume a run with a long history. The history is written by
 * the product's own loop core (as a worker would have, checkpoints included) and left waiting on
 * the model, as if its worker had died; a job then hands it to a live worker, and the bench times
 * the job → first new log message. Checkpoints should keep this flat: they do when the state they
 * hold stops growing, which a context window makes so (see W3_CONTEXT_MESSAGES).
 *
 * Two conditions. Hot: each history is resumed as soon as it is written, as a run is taken over
 * right after its worker died, and no sooner than plan.resumeIdleMs after the previous resume:
 * nats-server 2.9 keeps a file block's cache only while the block was read in the last 5 s, and a
 * short history, written in milliseconds into the block the previous resume had just read, would
 * find it cached where the 10,000-step one (6 s of writing) finds it dropped; so every length
 * finds its block as a takeover in production does, not read in the last 5 s. Cold: every
 * history is written first, then, after a pause, each is resumed, as a run is resumed long after
 * it stopped (an approval decided later): the server then reads what the run spans from disk
 * rather than from its caches. Lengths go in rounds, each round in a rotated order, so that
 * neither the stream's growth nor a noisy moment of the machine lands on one length only.
 */
export async function measureHistory(
  plan: Plan,
  natsUrl: string,
  say: (line: string) => void,
): Promise<Finding[]> {
  const cluster = await OurCluster.start(natsUrl, { ...OUR_BENCH_ENV, ...W3_ENV });
  const config: LoopConfig = { tools: new ToolRegistry([echoTool]).descriptors(), checkpointEvery: 10 };
  const fresh = (steps: number, window: number | undefined, cold = false): Case => ({
    steps,
    window,
    cold,
    samples: new Map(),
    walRecords: 0,
    checkpointBytes: 0,
    tailRecords: 0,
    error: "",
  });
  const windowed = plan.historyLengths.map((steps) => fresh(steps, W3_CONTEXT_MESSAGES));
  const whole = fresh(Math.max(...plan.historyLengths), undefined);
  const cold = plan.historyLengths.map((steps) => fresh(steps, W3_CONTEXT_MESSAGES, true));
  const failed = (c: Case, err: unknown): void => {
    c.error = err instanceof Error ? err.message : String(err);
  };
  const rotated = (cases: Case[], round: number): Case[] =>
    cases.map((_c, i) => cases[(round + i) % cases.length] as Case);
  const resume = async (c: Case, parked: Parked, round: number): Promise<void> => {
    await cluster.timeResume(parked.runId, continuationJob(parked.status)).then(
      (ms) => c.samples.set(round, ms),
      (err: unknown) => failed(c, err),
    );
    cluster.forget(parked.runId);
  };
  const write = async (c: Case, round: number): Promise<Parked | undefined> => {
    if (c.error) return undefined;
    return writeCase(cluster, config, c, round).catch((err: unknown) => {
      failed(c, err);
      return undefined;
    });
  };
  let lastResumed = 0;
  /** Hot: resumed as soon as it is written, and no sooner than plan.resumeIdleMs after the last. */
  const sample = async (c: Case, round: number): Promise<void> => {
    const parked = await write(c, round);
    if (!parked) return;
    const idle = plan.resumeIdleMs - (performance.now() - lastResumed);
    if (idle > 0) await new Promise((resolve) => setTimeout(resolve, idle));
    await resume(c, parked, round);
    lastResumed = performance.now();
  };
  try {
    // Resumes that warm both workers (JIT, the tool catalog) are not counted.
    const warm = fresh(windowed[0]?.steps ?? 10, W3_CONTEXT_MESSAGES);
    for (let i = 0; i < WARM_RESUMES; i += 1)
      await resume(warm, await writeCase(cluster, config, warm, -1 - i), -1 - i);
    for (let round = 0; round < WINDOWED_ROUNDS; round += 1) {
      for (const c of rotated(windowed, round)) await sample(c, round);
      say(
        `W3 round ${round + 1}/${WINDOWED_ROUNDS} of ${windowed.map((c) => c.steps).join(", ")} steps done`,
      );
    }
    for (let round = 0; round < WHOLE_ROUNDS; round += 1) await sample(whole, round);
    const planned: { c: Case; parked: Parked; round: number }[] = [];
    for (let round = 0; round < COLD_ROUNDS; round += 1) {
      for (const c of rotated(cold, round)) {
        const parked = await write(c, WINDOWED_ROUNDS + round);
        if (parked) planned.push({ c, parked, round });
        await writeFiller(cluster, round);
      }
    }
    say(`W3 cold: ${planned.length} histories written; resuming them after ${SETTLE_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    for (const { c, parked, round } of planned) if (!c.error) await resume(c, parked, round);
  } finally {
    await cluster.stop();
  }
  const shortest = (cases: Case[]): Case | undefined => [...cases].sort((a, b) => a.steps - b.steps)[0];
  const [hotBase, coldBase] = [shortest(windowed), shortest(cold)];
  return [...windowed, whole, ...cold].map((c) => {
    const samples = [...c.samples.values()];
    // The whole-transcript case has one length only: nothing to compare it with in its rounds.
    const base = c === whole ? undefined : c.cold ? coldBase : hotBase;
    const paired = base && base !== c ? vsShortest(c, base) : undefined;
    const figures: Record<string, number | string> = {
      steps: c.steps,
      contextMessages: c.window ?? "all",
      resumed: c.cold ? "cold" : "hot",
      walRecords: c.walRecords,
      resumeMsMedian: round(median(samples)),
      resumeMsMin: round(Math.min(...samples)),
      resumeMsMax: round(Math.max(...samples)),
      samples: samples.length,
      checkpointKiB: round(c.checkpointBytes / 1024),
      tailRecords: c.tailRecords,
      ...(paired === undefined ? {} : { vsShortestMedian: paired }),
      ...(c.error ? { error: c.error } : {}),
    };
    const label = `${c.cold ? "cold " : ""}resume after ${c.steps} steps${c.window ? "" : ", whole transcript"}`;
    say(`W3 ${label}: ${c.error || `${figures.resumeMsMedian} ms`}`);
    return { workload: "W3", label, figures };
  });
}
