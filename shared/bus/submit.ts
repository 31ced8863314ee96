import type { NatsConnection } from "@nats-io/transport-node";
import { SubmitRequest } from "../contracts/cluster.js";
import { SubmitReply } from "../contracts/control.js";
import { servicePollDelay } from "../tools/backoff.js";
import { requestJson, type ServiceWait } from "./request.js";

const SUBMIT_TIMEOUT_MS = 10_000;

/**
 * The codes of a submit the supervisor could not decide: JetStream was out of reach while it read
 * or wrote the run's state (a server restarting, a stream's leader election), or it failed on its
 * own. No decision about the run, so none is recorded as one: not in the run's trail, not as a
 * spawned child's failure.
 */
const UNDECIDED = new Set(["BUS_UNAVAILABLE", "INTERNAL"]);

export function isUndecided(error: { code: string }): boolean {
  return UNDECIDED.has(error.code);
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
): Promise<SubmitReply> {
  const repeatable = request.runId !== undefined;
  const ask = (waitMs: number): Promise<SubmitReply> =>
    requestJson(bus.nc, bus.subjects.runsSubmit(), { schema: SubmitRequest, value: request }, SubmitReply, {
      timeoutMs: SUBMIT_TIMEOUT_MS,
      wait: wait && (repeatable ? { ...wait, repeatable, waitMs } : wait),
    });
  if (!repeatable || !wait) return ask(wait?.waitMs ?? 0);
  const until = wait.clock.now() + wait.waitMs;
  for (let asked = 0; ; asked++) {
    const reply = await ask(Math.max(0, until - wait.clock.now()));
    const left = until - wait.clock.now();
    if (reply.ok || !isUndecided(reply.error) || left <= 0) return reply;
    if (asked === 0) wait.onWait?.();
    await wait.clock.sleep(Math.min(left, servicePollDelay(asked, wait.random)));
  }
}
