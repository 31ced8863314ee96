import type { Msg, NatsConnection, Subscription } from "@nats-io/transport-node";
import type { InFlight } from "./in-flight.js";
import { SettleReply, SettleRequest } from "../contracts/tool-settle.js";
import type { ToolCallReply } from "../contracts/tool.js";
import { AgentError, toAgentError } from "../runtime/errors.js";
import type { Logger } from "../runtime/logger.js";
import type { ActorMetrics } from "../runtime/metrics.js";
import { decode, encode } from "./codec.js";
import {
  createOrRead,
  IdempotencyRecord,
  idempotencyBucketKey,
  type IdempotencyBucketDeps,
} from "./idempotency-record.js";
import { requestJson, type ServiceWait } from "./request.js";
import { withBusRetry } from "./retry.js";
import type { Subjects } from "./subjects.js";
import { isWrongLastSequence } from "./run-log.js";

type SettleDeps = IdempotencyBucketDeps & {
  logger: Logger;
  /** Counts refused requests (`agents_bad_requests_total`), when given. */
  metrics?: Pick<ActorMetrics, "badRequests">;
  /** The settlements under way, when the service is to stop gracefully (see stopServing). */
  inFlight?: InFlight;
};

/** Rewrites of a claim that keeps changing under a human's settlement before giving up. */
const MAX_RACES = 5;

/**
 * Settling a call a halted run was waiting on, served beside the call on
 * `<prefix>.tools.<name>.settle` (see SettleRequest). An abandoned call's record is written in the
 * same create a call's claim races, so exactly one wins: won, a late copy of the call (a retry
 * still in flight from the halted worker) is answered from it and runs nothing; lost, the reply
 * says what the call did or is doing. A human's `ran` or `notRun` replaces a claim still marked
 * running (its call's outcome unknown: the service lost it, or the call hung) by compare-and-set,
 * and never a finished call's record. A cancelled run can then undo a call that happened and drop
 * one that did not, and a run halted for a reconciliation goes on from what a human found, where
 * both were left to someone writing `agents-idempotency` by hand.
 */
export function serveSettle(tool: string, deps: SettleDeps): Subscription {
  return deps.nc.subscribe(deps.subjects.toolSettle(tool), {
    queue: `tools.${tool}`,
    callback: (err, msg) => {
      if (err) {
        deps.logger.error({ err, tool }, "tool settle subscription failed");
        return;
      }
      const settled = settle(tool, deps, msg).then(
        (reply) => {
          if (reply.outcome === "refused") deps.metrics?.badRequests.inc({ subject: msg.subject });
          respond(msg, reply);
        },
        (e: unknown) => {
          deps.logger.error({ err: e, tool }, "settling a call failed");
          respond(msg, { outcome: "refused", error: toAgentError(e).toBody() });
        },
      );
      void deps.inFlight?.track(settled);
    },
  });
}

function respond(msg: Msg, reply: SettleReply): void {
  if (msg.reply) msg.respond(encode(SettleReply, reply));
}

async function settle(tool: string, deps: SettleDeps, msg: Msg): Promise<SettleReply> {
  let request: SettleRequest;
  try {
    request = decode(SettleRequest, msg.data);
  } catch (err) {
    return { outcome: "refused", error: toAgentError(err, "INVALID_INPUT").toBody() };
  }
  const key = idempotencyBucketKey(tool, request.idempotencyKey);
  const log = deps.logger.child({ tool, runId: request.runId, actionId: request.actionId, by: request.by });
  if (request.decision === "abandon") {
    const reply: ToolCallReply = {
      ok: false,
      error: new AgentError(
        "RUN_CANCELLED",
        `the run was cancelled by ${request.by} before this call ran: ${request.reason}`,
      ).toBody(),
    };
    const prior = await createOrRead(deps, key, done(request, reply));
    if (prior !== "created") return known(prior);
    log.info("call abandoned before it ran: its run was cancelled");
    return { outcome: "abandoned" };
  }
  const outcome = await byHand(deps, key, request);
  if (outcome.outcome !== "done")
    log.warn({ decision: request.decision, reason: request.reason }, "call settled by hand");
  return outcome;
}

function done(request: SettleRequest, reply: ToolCallReply): Uint8Array {
  return encode(IdempotencyRecord, { status: "done", idempotencyKey: request.idempotencyKey, reply });
}

function known(record: IdempotencyRecord): SettleReply {
  return record.status === "done"
    ? { outcome: "done", reply: record.reply }
    : { outcome: "running", since: record.since };
}

/**
 * A human's `ran` (its output recorded as the call's result) or `notRun` (the claim freed), written
 * over a claim still marked running, or where no record is, by compare-and-set on what was read.
 */
async function byHand(deps: SettleDeps, key: string, request: SettleRequest): Promise<SettleReply> {
  const { idempotency } = deps;
  const result = done(request, { ok: true, output: request.output ?? null });
  for (let race = 0; race < MAX_RACES; race++) {
    const entry = await withBusRetry(`reading the idempotency record ${key}`, deps, () =>
      idempotency.get(key),
    );
    const record = entry?.operation === "PUT" ? decode(IdempotencyRecord, entry.value) : undefined;
    if (record?.status === "done") return known(record);
    if (!record && request.decision === "notRun") return { outcome: "freed" };
    const revision = entry?.revision ?? 0;
    const write =
      request.decision === "ran"
        ? () => idempotency.update(key, result, revision)
        : () => idempotency.delete(key, { previousSeq: revision });
    // Refused when a call wrote the key meanwhile (its claim, or its outcome): read again.
    const wrote = await withBusRetry(`settling ${key}`, deps, () =>
      write().then(
        () => true,
        (err: unknown) => {
          if (isWrongLastSequence(err)) return false;
          throw err;
        },
      ),
    );
    if (wrote) return request.decision === "ran" ? { outcome: "recorded" } : { outcome: "freed" };
  }
  throw new AgentError("TOOL_IN_PROGRESS", `the record ${key} kept changing while it was settled`);
}

/**
 * Asks the tool's service to settle a call (see serveSettle), waiting for a service as `wait` says
 * when none serves the tool yet (one restarting). Throws a bus error (no service answered: none
 * runs, or one of a build without settling) for the caller to fall back on. A request is safe to
 * send twice: each decision writes only over what it read.
 */
export async function settleCall(
  nc: NatsConnection,
  subjects: Subjects,
  tool: string,
  request: SettleRequest,
  timeoutMs: number,
  wait?: ServiceWait,
): Promise<SettleReply> {
  return requestJson(nc, subjects.toolSettle(tool), { schema: SettleRequest, value: request }, SettleReply, {
    timeoutMs,
    unavailable: "TOOL_UNAVAILABLE",
    timeout: "TOOL_TIMEOUT",
    ...(wait ? { wait: { ...wait, repeatable: true } } : {}),
  });
}
