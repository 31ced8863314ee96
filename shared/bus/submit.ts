import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { SubmitRequest } from "../contracts/cluster.js";
import { SubmitReply } from "../contracts/control.js";
import { describeUnknown, unknownFields } from "../contracts/unknown-fields.js";
import { AgentError } from "../runtime/errors.js";
import { askUntilDecided } from "./decided.js";
import { requestJson, type ServiceWait } from "./request.js";

const SUBMIT_TIMEOUT_MS = 10_000;

/**
 * A submit's RunSpec as its sender wrote it, checked: INVALID_SPEC with the schema's issues, or
 * naming the fields no schema knows (a typo would otherwise be dropped without a word).
 */
export function parseSubmitRequest(raw: unknown): SubmitRequest {
  const parsed = SubmitRequest.safeParse(raw);
  if (!parsed.success) {
    throw new AgentError("INVALID_SPEC", `invalid RunSpec:\n${z.prettifyError(parsed.error)}`, {
      details: parsed.error.issues,
    });
  }
  const unknown = unknownFields(SubmitRequest, raw);
  if (unknown.length > 0)
    throw new AgentError("INVALID_SPEC", `invalid RunSpec: ${describeUnknown(unknown)}`, {
      details: unknown,
    });
  return parsed.data;
}

/**
 * Submits a run to the supervisors. A named run's submit may be sent twice (its second copy is
 * answered as the first: `existing`), so within `wait` it is asked again when the connection drops
 * before its reply, and when the supervisor answers that it could not decide. An unnamed one is
 * asked once: a second copy would start a second run.
 */
export async function submitRun(
  bus: { nc: NatsConnection; subjects: { runsSubmit(): string } },
  request: SubmitRequest,
  wait: ServiceWait | undefined,
  /**
   * What goes on the wire, when not `request` itself: the spec as its author wrote it (checked
   * into `request`), without this build's defaults, which an older supervisor may not know.
   */
  asWritten?: unknown,
): Promise<SubmitReply> {
  const body: { schema: z.ZodType; value: unknown } =
    asWritten === undefined
      ? { schema: SubmitRequest, value: request }
      : { schema: z.unknown(), value: asWritten };
  const ask = (w: ServiceWait | undefined): Promise<SubmitReply> =>
    requestJson(bus.nc, bus.subjects.runsSubmit(), body, SubmitReply, {
      timeoutMs: SUBMIT_TIMEOUT_MS,
      wait: w,
    });
  if (request.runId === undefined || !wait) return ask(wait);
  return (await askUntilDecided(wait, ask)).reply;
}
