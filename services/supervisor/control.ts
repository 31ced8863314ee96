import { AckPolicy, DeliverPolicy, type JsMsg } from "@nats-io/jetstream";
import type { Counter } from "prom-client";
import { KillSwitchRequest, type ControlReply } from "../../shared/contracts/cluster.js";
import { eventsOfMessage } from "../../shared/bus/run-log.js";
import { type AuditEvent } from "../../shared/contracts/audit.js";
import { isFinished, takesNoChildResults } from "../../shared/contracts/run-status.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode } from "../../shared/bus/codec.js";
import { ensureDurable } from "../../shared/bus/durable.js";
import { whenJetStreamAnswers } from "../../shared/bus/jetstream-silent.js";
import { fanInResults, readFanOut } from "../../shared/bus/fanout.js";
import { publishJob } from "../../shared/bus/jobs.js";
import { writeKillSwitch } from "../../shared/bus/kill-switch.js";
import type { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { contentHash } from "../../shared/runtime/hash.js";
import { cancelOrphans } from "./cancel.js";
import { onEventFailure } from "./event-failure.js";
import { closeOnAbort } from "../../shared/bus/close-on-abort.js";

const RELEASING_KINDS = new Set(["run.committed", "run.failed", "run.halted"]);
export const RELEASE_CONSUMER = "supervisor-release";

/** The kill switch: stored where every worker watches it; admissions stop while it is on. */
export async function setKillSwitch(bus: ActorBus, data: Uint8Array): Promise<ControlReply> {
  const request = decode(KillSwitchRequest, data);
  await writeKillSwitch(bus.buckets.pool, { ...request, at: bus.clock.now() });
  bus.logger.warn({ active: request.active, by: request.by, reason: request.reason }, "kill switch set");
  return {
    schemaVersion: 1,
    ok: true,
    message: `kill switch ${request.active ? "on" : "off"}`,
    data: { active: request.active },
  };
}

/**
 * Lifecycle events handled at once by the release loop. Releases queued together share one write
 * of the pool's ledger; handled one after another, each was a write of its own, and under a steady
 * stream of admissions the releases fell behind: finished runs kept their slots, the ledger grew
 * with the backlog, and every admission and release got slower with it.
 */
const RELEASES_IN_FLIGHT = 64;

/**
 * Frees a run's pool slot when it commits, fails or halts, and cancels the children a failed run
 * leaves going (see cancelOrphans). Reads the run log's lifecycle messages through one durable
 * consumer shared by all supervisor replicas, so a slot is freed even if the supervisor that
 * admitted the run is gone. Events are handled up to RELEASES_IN_FLIGHT at a time and in any
 * order: each concerns its own run, and a fan-in is queued by whichever of a parent's children
 * settles last (see statusCaughtUp).
 */
export async function releaseSlots(
  bus: ActorBus,
  pool: PoolLedger,
  signal: AbortSignal,
  orphansCancelled?: Counter,
): Promise<void> {
  const stream = bus.subjects.streams().log;
  const messages = await whenJetStreamAnswers("the pool release loop's consumer", bus, async () => {
    await ensureDurable(bus.jsm, stream, {
      durable_name: RELEASE_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.New,
      filter_subject: bus.subjects.logLifecycle(),
    });
    const consumer = await bus.js.consumers.get(stream, RELEASE_CONSUMER);
    return consumer.consume({ max_messages: RELEASES_IN_FLIGHT });
  });
  closeOnAbort(messages, signal);
  const inFlight = new Set<Promise<void>>();
  for await (const msg of messages) {
    const handled: Promise<void> = onLifecycle(bus, pool, msg, orphansCancelled).finally(() =>
      inFlight.delete(handled),
    );
    inFlight.add(handled);
    if (inFlight.size >= RELEASES_IN_FLIGHT) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
}

/**
 * One lifecycle message: the run's slot freed, its parent's fan-in checked, a failed run's children
 * still going cancelled, then the ack; offered again shortly when the run's status has not caught
 * up with its log yet (see statusCaughtUp). Never rejects.
 */
async function onLifecycle(bus: ActorBus, pool: PoolLedger, msg: JsMsg, orphans?: Counter): Promise<void> {
  try {
    // A message holding a releasing event is always on that event's subject (see headlineOf): the
    // others (a run's admission, its resume) are acked unread.
    if (!releasingSubject(msg.subject)) {
      msg.ack();
      return;
    }
    const events = await eventsOfMessage(bus, msg);
    let done = true;
    for (const event of events ?? [])
      if (RELEASING_KINDS.has(event.kind)) done = (await onEnded(bus, pool, event, msg.seq, orphans)) && done;
    if (done) msg.ack();
    else msg.nak(STATUS_LAG_RETRY_MS);
  } catch (err) {
    onEventFailure(bus, msg, err, "could not release a pool slot");
  }
}

/** Whether a log message's subject names a releasing headline (`….run.committed`, `….run.failed`, `….run.halted`). */
export function releasingSubject(subject: string): boolean {
  for (const kind of RELEASING_KINDS) if (subject.endsWith(`.${kind}`)) return true;
  return false;
}

/** How soon a lifecycle message whose run's status trails its log is offered again. */
const STATUS_LAG_RETRY_MS = 100;

/**
 * A run committed, failed or halted: its slot freed, its parent's fan-in checked, a failed run's
 * children cancelled. False when the fan-in and the cancel must wait for the run's status.
 */
async function onEnded(
  bus: ActorBus,
  pool: PoolLedger,
  event: AuditEvent,
  seq: number,
  orphans?: Counter,
): Promise<boolean> {
  const released = await pool.release(event.runId, seq);
  if (released === "released") {
    bus.logger.info({ runId: event.runId, kind: event.kind }, "pool slot released");
  } else if (released === "earlier") {
    bus.logger.info(
      { runId: event.runId, kind: event.kind, seq },
      "lifecycle event delivered again after its run was resumed: the resumed run keeps its slot",
    );
  }
  // A halted run has not ended (see fanInResults): only a commit or a failure, which no resume
  // follows, may complete its parent's fan-in.
  const ended = event.kind !== "run.halted";
  if (!ended || (!event.parentRunId && event.kind !== "run.failed")) return true;
  if (!(await statusCaughtUp(bus, event.runId))) return false;
  if (event.parentRunId) await fanIn(bus, event.parentRunId);
  if (event.kind === "run.failed") await cancelChildren(bus, event, orphans);
  return true;
}

/**
 * Whether the run's status says it finished (or it has none: one retention removed): its worker
 * writes the status just after the log message that finished it. Each handler of a child's end
 * goes on only once its own child's status is final, so whoever goes on last finds every
 * sibling's final too; and a child admitted as its parent fails finds the parent failed, or is
 * found by the parent's cancel.
 */
async function statusCaughtUp(bus: ActorBus, runId: string): Promise<boolean> {
  const status = await new RunStatusStore(bus.buckets.runs, bus).get(runId);
  return !status || isFinished(status);
}

/** A failed run's children still going have nobody to take their results: they are cancelled. */
async function cancelChildren(bus: ActorBus, failed: AuditEvent, counted?: Counter): Promise<void> {
  const children = await cancelOrphans(bus, failed.runId, failed.reason);
  if (children.length === 0) return;
  counted?.inc(children.length);
  bus.logger.warn(
    { runId: failed.runId, children },
    "run failed with children still going: they are cancelled",
  );
}

/**
 * When a child commits or fails and it was the last of its parent's open fan-out, the parent goes
 * back on the work queue with the fan-in as its tool result. The message id names the action and
 * how its children ended, so two children ending at once queue it once; a later outcome is queued
 * again: a parent halted when its fan-in came (dropped), and resumed when its fan-out had ended
 * otherwise since, waits for that end, which an id naming the action alone dropped as a duplicate.
 */
async function fanIn(bus: ActorBus, parentRunId: string): Promise<void> {
  const fanOut = await readFanOut(bus.buckets.runs, parentRunId);
  if (!fanOut) return;
  const results = await fanInResults(bus.buckets.runs, fanOut);
  if (!results) return;
  // A parent that failed, or is undoing its calls before it fails (cancelled, its children then
  // cancelled too), takes no fan-in: its job would cost a worker a read of the run only to be dropped.
  const parent = await new RunStatusStore(bus.buckets.runs).get(parentRunId);
  if (parent && takesNoChildResults(parent)) {
    bus.logger.info(
      { runId: parentRunId, status: parent.status, phase: parent.phase },
      "children settled after their parent finished, or began to fail",
    );
    return;
  }
  await publishJob(
    bus,
    {
      schemaVersion: 1,
      runId: parentRunId,
      rootRunId: fanOut.rootRunId,
      depth: fanOut.depth,
      auditSeq: 0,
      event: { type: "toolCompleted", at: bus.clock.now(), actionId: fanOut.actionId, output: results },
    },
    `${parentRunId}:fanin:${fanOut.actionId}:${contentHash(results).slice(0, 16)}`,
  );
  bus.logger.info(
    { runId: parentRunId, children: fanOut.children.length },
    "children settled: parent queued",
  );
}
