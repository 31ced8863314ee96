import type { Msg, Subscription } from "@nats-io/transport-node";
import { ToolCallReply, ToolCallRequest, ToolDescriptor } from "../contracts/tool.js";
import type { Random } from "../runtime/random.js";
import { AgentError, toAgentError } from "../runtime/errors.js";
import type { Logger } from "../runtime/logger.js";
import type { ActorMetrics } from "../runtime/metrics.js";
import { ToolInvoker } from "../tools/invoke.js";
import { describeTool, type AnyTool } from "../tools/tool.js";
import type { RedactionConfig } from "../contracts/redaction.js";
import type { ActorBus } from "./actor.js";
import { decode, encode } from "./codec.js";
import { InFlight, stopServing } from "./in-flight.js";
import {
  createOrRead,
  createOrReadEntry,
  IdempotencyRecord,
  idempotencyBucketKey,
  type IdempotencyBucketDeps,
} from "./idempotency-record.js";
import { BUDGET_MS, withBusRetry } from "./retry.js";
import { answered, failure } from "./tool-run.js";
import { serveSettle } from "./tool-settle.js";
import { nowOrWhenRoom } from "./when-room.js";
import { refusedOnly } from "./run-log.js";
import { servedInSpan } from "./trace-context.js";

export interface ToolServiceDeps extends IdempotencyBucketDeps {
  invoker: ToolInvoker;
  /** Jitters the retries of the bucket's writes, and tells one call's records from a twin's. */
  random: Random;
  logger: Logger;
  /** Counts calls by outcome and times each run of the tool, when given. */
  metrics?: ActorMetrics;
  /** The calls under way, when the service is to stop gracefully (see stopServing). */
  inFlight?: InFlight;
  /** The operators' redaction rules for what is recorded (TOOLS_REDACT_FILE), on top of the tool's own. */
  redaction?: RedactionConfig;
}

/** A call that came, or was claimed, after its caller's deadline: it did not run. */
const late = (tool: string): ToolCallReply =>
  failure(new AgentError("TOOL_TIMEOUT", `the caller's deadline passed before '${tool}' started`));

/**
 * Serves one tool on `<prefix>.tools.<name>` in a queue group, so replicas share the load. A call
 * first claims its idempotency key (KV create, which only one caller can win); a key already done
 * answers with the recorded reply and runs nothing; a key still running answers "in progress"
 * (retryable). Terminal outcomes are recorded; a retryable failure frees the claim for a retry,
 * except a timeout of a non-idempotent tool, whose outcome is unknown: its claim stays.
 * A pure tool (no side effect) skips the claim: running it twice costs only time, so it runs
 * first and its outcome is recorded with a create, and a twin call that recorded first wins (the
 * caller gets the recorded reply all the same). One KV write per call instead of two. A pure tool
 * that is idempotent too keeps no record at all: a repeated call runs again and gets the same
 * answer, and nobody reads its record (a cancel asks after calls with a side effect only).
 * Bad payloads get a structured INVALID_INPUT reply and the service keeps serving. Beside the
 * call, the service answers its descriptor and settles calls halted runs waited on (see serveSettle).
 */
export function serveTool(tool: AnyTool, deps: ToolServiceDeps): Subscription[] {
  const subject = deps.subjects.tool(tool.name);
  const descriptor = encode(ToolDescriptor, describeTool(tool));
  const describe = deps.nc.subscribe(deps.subjects.toolDescribe(tool.name), {
    queue: `tools.${tool.name}`,
    callback: (err, msg) => {
      if (!err && msg.reply) msg.respond(descriptor);
    },
  });
  const handler = tool.reversibility === "pure" && tool.idempotent ? handleUnrecorded : handle;
  const calls = deps.nc.subscribe(subject, {
    queue: `tools.${tool.name}`,
    callback: (err, msg) => {
      if (err) {
        deps.logger.error({ err, tool: tool.name }, "tool subscription failed");
        return;
      }
      const served = () => handler(tool, deps, msg);
      const handled = servedInSpan("tool.serve", msg, { "tool.name": tool.name }, served).catch(
        (e: unknown) => {
          deps.logger.error({ err: e, tool: tool.name }, "tool call handler failed");
          respond(msg, failure(toAgentError(e)));
        },
      );
      void deps.inFlight?.track(handled);
    },
  });
  return [calls, describe, serveSettle(tool.name, deps)];
}

function respond(msg: Msg, reply: ToolCallReply): void {
  if (msg.reply) msg.respond(encode(ToolCallReply, reply));
}

/**
 * The outcome label of `agents_tool_calls_total` on a tool service: `ok`, `failed`, `unknown` (a
 * non-idempotent timeout), `replayed` (answered from the record), `in_progress`, `late`, `invalid`.
 */
type ServiceOutcome = "ok" | "failed" | "unknown" | "replayed" | "in_progress" | "late" | "invalid";

/** The call's request; undefined when it is answered already: unreadable, or past its caller's deadline. */
function admitted(
  tool: AnyTool,
  deps: ToolServiceDeps,
  msg: Msg,
  count: (outcome: ServiceOutcome) => void,
): ToolCallRequest | undefined {
  let request: ToolCallRequest;
  try {
    request = decode(ToolCallRequest, msg.data);
  } catch (err) {
    count("invalid");
    respond(msg, failure(toAgentError(err, "INVALID_INPUT")));
    return undefined;
  }
  if (request.deadline > deps.clock.now()) return request;
  count("late");
  respond(msg, late(tool.name));
  return undefined;
}

/** A call of a tool that is pure and idempotent: run and answered, with no record (see serveTool). */
async function handleUnrecorded(tool: AnyTool, deps: ToolServiceDeps, msg: Msg): Promise<void> {
  const count = (outcome: ServiceOutcome): void => deps.metrics?.toolCalls.inc({ tool: tool.name, outcome });
  const request = admitted(tool, deps, msg, count);
  if (!request) return;
  const reply = await answered(tool, deps, request);
  count(reply.ok ? "ok" : "failed");
  respond(msg, reply);
}

async function handle(tool: AnyTool, deps: ToolServiceDeps, msg: Msg): Promise<void> {
  const count = (outcome: ServiceOutcome): void => deps.metrics?.toolCalls.inc({ tool: tool.name, outcome });
  const request = admitted(tool, deps, msg, count);
  if (!request) return;
  // Made only when a line is written: a pino child per call costs more than the call's own logging.
  const log = (): Logger =>
    deps.logger.child({ runId: request.runId, actionId: request.actionId, tool: tool.name });
  const pure = tool.reversibility === "pure";
  const key = idempotencyBucketKey(tool.name, request.idempotencyKey);
  const claimed = pure ? undefined : await claimToRun(tool, deps, { msg, request, key, count, log });
  if (claimed === "answered") return;
  const reply = await answered(tool, deps, request);
  const unknown = !reply.ok && !tool.idempotent && reply.error.code === "TOOL_TIMEOUT";
  if (unknown) {
    // The effect may or may not have happened: the claim stays, so no retry can run it again, and
    // the caller reconciles (a human decides) instead of guessing.
    log().warn({ idempotencyKey: request.idempotencyKey }, "non-idempotent call timed out: outcome unknown");
  } else if (reply.ok || !reply.error.retryable) {
    const done = encode(IdempotencyRecord, { status: "done", idempotencyKey: request.idempotencyKey, reply });
    if (claimed === undefined) {
      const first = await recordFirst(deps, key, done);
      if (typeof first === "object") {
        log().info({ idempotent: first.status }, "repeated idempotency key");
        answerRecorded(msg, first, count);
        return;
      }
    } else {
      const kept = await nowOrWhenRoom(deps, log, `recording the outcome of ${key}`, () =>
        recordOwnOutcome(deps, key, done, claimed, tool.timeoutMs),
      );
      // "later": a full store; the caller is answered all the same, the record following once
      // there is room.
      if (typeof kept === "object" && kept.status === "done") {
        log().warn(
          { reply, recorded: kept.reply },
          "the call ended after its record was settled: the record stands",
        );
        answerRecorded(msg, kept, count);
        return;
      }
      if (typeof kept === "object") {
        log().error(
          { reply },
          "the call ended after a human said it had not run, and a call made again has claimed its key: it ran twice",
        );
      }
    }
  } else if (claimed !== undefined) {
    await freeOwnClaim(deps, key, claimed, log, tool.timeoutMs);
  }
  count(unknown ? "unknown" : reply.ok ? "ok" : "failed");
  respond(msg, reply);
}

/**
 * Claims the call's key (see claim), or answers the call when it must not run: "answered" for a
 * repeated key (from its record), and for a call claimed after its caller's deadline, across an
 * outage that outlasted the caller's wait, whose claim is freed for the caller's retry (or a
 * human's settlement) rather than left running with nobody running the call.
 */
async function claimToRun(
  tool: AnyTool,
  deps: ToolServiceDeps,
  call: {
    msg: Msg;
    request: ToolCallRequest;
    key: string;
    count: (outcome: ServiceOutcome) => void;
    log: () => Logger;
  },
): Promise<number | "answered"> {
  const { msg, request, key, count, log } = call;
  const claimed = await claim(deps, key, request);
  if (typeof claimed === "object") {
    log().info({ idempotent: claimed.status }, "repeated idempotency key");
    answerRecorded(msg, claimed, count);
    return "answered";
  }
  if (request.deadline > deps.clock.now()) return claimed;
  await freeOwnClaim(deps, key, claimed, log, tool.timeoutMs);
  count("late");
  respond(msg, late(tool.name));
  return "answered";
}

/** A repeated key's answer: the recorded reply, or "in progress" while its first call runs. */
function answerRecorded(msg: Msg, record: IdempotencyRecord, count: (outcome: ServiceOutcome) => void): void {
  count(record.status === "done" ? "replayed" : "in_progress");
  respond(
    msg,
    record.status === "done"
      ? record.reply
      : failure(new AgentError("TOOL_IN_PROGRESS", `a call with this idempotency key is still running`)),
  );
}

/**
 * Records a pure tool's outcome unless a twin call recorded first: returns "recorded", or the
 * record that was there (whose reply the caller gets, so every answer for a key is the same).
 */
async function recordFirst(
  deps: ToolServiceDeps,
  key: string,
  done: Uint8Array,
): Promise<"recorded" | IdempotencyRecord> {
  const prior = await createOrRead(deps, key, done);
  if (prior === "created") return "recorded";
  if (prior.status === "done") return prior;
  // A claim left by an older, non-pure version of the tool: this outcome replaces it.
  await withBusRetry(`recording the outcome of ${key}`, deps, () => deps.idempotency.put(key, done));
  return "recorded";
}

/**
 * Records a non-pure call's outcome over its own claim, by compare-and-set on the claim's revision.
 * Like every write to the bucket it rides out a JetStream outage (a server restarting, a leader
 * election), and for as long as the tool's timeout (15 s at least): a worker that lost the reply
 * learns the outcome from this record only, and waits for it about that long before it halts the
 * run for a human. Refused, the key changed while the call ran: a human settled it (`ran`, whose
 * record stands: the run went on from it), or freed it (`not run`), when the outcome is recorded
 * all the same so that a call made again is answered from it rather than run twice, unless that
 * call claimed the key first. Returns "recorded", or the record the key keeps instead.
 */
async function recordOwnOutcome(
  deps: ToolServiceDeps,
  key: string,
  done: Uint8Array,
  claimRevision: number,
  timeoutMs: number,
): Promise<"recorded" | IdempotencyRecord> {
  const wrote = await withBusRetry(
    `recording the outcome of ${key}`,
    deps,
    () => deps.idempotency.update(key, done, claimRevision).then(() => true, refusedOnly),
    undefined,
    Math.max(BUDGET_MS, timeoutMs),
  );
  if (wrote) return "recorded";
  const entry = await withBusRetry(`reading ${key}`, deps, () => deps.idempotency.get(key));
  if (entry?.operation === "PUT") {
    // Its own write, whose ack an outage lost: the retry was refused by what it wrote.
    if (Buffer.from(entry.value).equals(done)) return "recorded";
    return decode(IdempotencyRecord, entry.value);
  }
  const created = await createOrReadEntry(deps, key, done);
  return created.created ? "recorded" : created.record;
}

/**
 * Frees a call's own claim for a retry (a retryable failure, or a call claimed too late), by
 * compare-and-set on the claim's revision: a record a human wrote over the claim while the call ran
 * stays. It rides out an outage as the outcome's record does (see recordOwnOutcome): given up
 * after 15 s, the claim stayed "running" for a call nobody runs, and the caller's retry was told
 * "in progress" until its run halted for a human.
 */
async function freeOwnClaim(
  deps: ToolServiceDeps,
  key: string,
  claimRevision: number,
  log: () => Logger,
  timeoutMs: number,
): Promise<void> {
  // A full store: freed once there is room, the caller's retry told "in progress" until then.
  await nowOrWhenRoom(deps, log, `freeing the claim on ${key}`, () =>
    freeClaimNow(deps, key, claimRevision, log, timeoutMs),
  );
}

async function freeClaimNow(
  deps: ToolServiceDeps,
  key: string,
  claimRevision: number,
  log: () => Logger,
  timeoutMs: number,
): Promise<void> {
  const freed = await withBusRetry(
    `freeing the claim on ${key}`,
    deps,
    () => deps.idempotency.delete(key, { previousSeq: claimRevision }).then(() => true, refusedOnly),
    undefined,
    Math.max(BUDGET_MS, timeoutMs),
  );
  if (freed) return;
  const entry = await withBusRetry(`reading ${key}`, deps, () => deps.idempotency.get(key));
  // A delete marker: its own, whose ack an outage lost, or a human's `not run`; freed either way.
  if (entry?.operation === "PUT")
    log().warn("the call failed after its claim was settled by hand: the record stands");
}

/**
 * Claims a key for a call about to run, returning the claim's revision (its outcome is written over
 * it by compare-and-set), or returns what a call with the same key recorded. The claim names this
 * call: when the create's ack is lost in an outage, the retry finds the claim taken, reads it
 * back, and must know it for its own, not a twin's (it would answer "in progress" for a call
 * nobody runs, and the run would halt once the tool's timeout passed). For the same reason the
 * claim rides out an outage until the caller's deadline and 15 s more, not 15 s alone: a claim
 * written whose ack a restart lost, given up on, stayed running with nobody running the call (a
 * server down 20 s: the caller's retry was told "in progress" until its run halted for a human).
 */
async function claim(
  deps: ToolServiceDeps,
  key: string,
  request: ToolCallRequest,
): Promise<number | IdempotencyRecord> {
  const claimId = Math.floor(deps.random.next() * 2 ** 52).toString(36);
  const now = deps.clock.now();
  const running = encode(IdempotencyRecord, {
    status: "running",
    idempotencyKey: request.idempotencyKey,
    since: now,
    claimId,
  });
  const budgetMs = Math.max(BUDGET_MS, request.deadline - now + BUDGET_MS);
  const prior = await createOrReadEntry(deps, key, running, budgetMs);
  if (prior.created) return prior.revision;
  if (prior.record.status === "running" && prior.record.claimId === claimId) return prior.revision;
  return prior.record;
}

/**
 * The call run, its reply redacted as it is recorded (see recordedReply): the caller is answered
 * with what a repeated key would be answered with, so a live answer and one from the record agree.
 */
/**
 * Serves tools as a tool actor does, on its bus: the worker already retried, so each service runs
 * a call once and records the outcome (an invoker without retries).
 */
export function serveToolsOf(
  tools: readonly AnyTool[],
  bus: Pick<ActorBus, "nc" | "subjects" | "buckets" | "clock" | "random">,
  deps: { logger: Logger; metrics?: ActorMetrics; redaction?: RedactionConfig },
): { subscriptions: Subscription[]; stop: () => Promise<void> } {
  const invoker = new ToolInvoker({ clock: bus.clock, random: bus.random, policy: { retries: 0 } });
  const inFlight = new InFlight();
  const subscriptions = tools.flatMap((tool) =>
    serveTool(tool, {
      nc: bus.nc,
      subjects: bus.subjects,
      idempotency: bus.buckets.idempotency,
      invoker,
      clock: bus.clock,
      random: bus.random,
      inFlight,
      ...deps,
    }),
  );
  // Calls under way finish, their outcomes recorded, before the connection drains.
  return { subscriptions, stop: () => stopServing(subscriptions, inFlight) };
}
