import type { NatsConnection } from "@nats-io/transport-node";
import { SubmitRequest } from "../contracts/cluster.js";
import { SubmitReply } from "../contracts/control.js";
import { askUntilDecided } from "./decided.js";
import { requestJson, type ServiceWait } from "./request.js";

const SUBMIT_TIMEOUT_MS = 10_000;

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
): Promise<SubmitReply> {
  const ask = (w: ServiceWait | undefined): Promise<SubmitReply> =>
    requestJson(bus.nc, bus.subjects.runsSubmit(), { schema: SubmitRequest, value: request }, SubmitReply, {
      timeoutMs: SUBMIT_TIMEOUT_MS,
      wait: w,
    });
  if (request.runId === undefined || !wait) return ask(wait);
  return (await askUntilDecided(wait, ask)).reply;
}
