import type { Msg, NatsConnection, Subscription } from "@nats-io/transport-node";
import { AbandonReply, AbandonRequest } from "../contracts/tool-abandon.js";
import type { ToolCallReply } from "../contracts/tool.js";
import { AgentError, toAgentError } from "../runtime/errors.js";
import type { Logger } from "../runtime/logger.js";
import { decode, encode } from "./codec.js";
import {
  createOrRead,
  IdempotencyRecord,
  idempotencyBucketKey,
  type IdempotencyBucketDeps,
} from "./idempotency-record.js";
import type { Subjects } from "./subjects.js";

/**
 * A call's abandonment, served beside the call on `<prefix>.tools.<name>.abandon`: the record of a
 * call that never ran is written as done with RUN_CANCELLED, in the same create a call's claim
 * races, so exactly one wins. Won, a late copy of the call (a retry still in flight from the worker
 * that was halted) is answered from that record and runs nothing; lost, the reply says what the
 * call did or is doing. A cancelled run can then undo a call that happened and drop one that did
 * not, instead of leaving both to a human.
 */
export function serveAbandon(tool: string, deps: IdempotencyBucketDeps & { logger: Logger }): Subscription {
  return deps.nc.subscribe(deps.subjects.toolAbandon(tool), {
    queue: `tools.${tool}`,
    callback: (err, msg) => {
      if (err) {
        deps.logger.error({ err, tool }, "tool abandon subscription failed");
        return;
      }
      abandon(tool, deps, msg).then(
        (reply) => respond(msg, reply),
        (e: unknown) => {
          deps.logger.error({ err: e, tool }, "abandoning a call failed");
          respond(msg, { outcome: "refused", error: toAgentError(e).toBody() });
        },
      );
    },
  });
}

function respond(msg: Msg, reply: AbandonReply): void {
  if (msg.reply) msg.respond(encode(AbandonReply, reply));
}

async function abandon(
  tool: string,
  deps: IdempotencyBucketDeps & { logger: Logger },
  msg: Msg,
): Promise<AbandonReply> {
  let request: AbandonRequest;
  try {
    request = decode(AbandonRequest, msg.data);
  } catch (err) {
    return { outcome: "refused", error: toAgentError(err, "INVALID_INPUT").toBody() };
  }
  const reply: ToolCallReply = {
    ok: false,
    error: new AgentError(
      "RUN_CANCELLED",
      `the run was cancelled by ${request.by} before this call ran: ${request.reason}`,
    ).toBody(),
  };
  const key = idempotencyBucketKey(tool, request.idempotencyKey);
  const record = encode(IdempotencyRecord, { status: "done", idempotencyKey: request.idempotencyKey, reply });
  const prior = await createOrRead(deps, key, record);
  if (prior === "created") {
    deps.logger.info(
      { tool, runId: request.runId, actionId: request.actionId },
      "call abandoned before it ran: its run was cancelled",
    );
    return { outcome: "abandoned" };
  }
  return prior.status === "done"
    ? { outcome: "done", reply: prior.reply }
    : { outcome: "running", since: prior.since };
}

/**
 * Asks the tool's service to abandon a call (see serveAbandon). Throws a bus error (no service
 * answered: none runs, or one of a build without abandonment) for the caller to fall back on.
 */
export async function abandonCall(
  nc: NatsConnection,
  subjects: Subjects,
  tool: string,
  request: AbandonRequest,
  timeoutMs: number,
): Promise<AbandonReply> {
  const msg = await nc.request(subjects.toolAbandon(tool), encode(AbandonRequest, request), {
    timeout: timeoutMs,
  });
  return decode(AbandonReply, msg.data);
}
