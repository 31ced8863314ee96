import type { ActorBus } from "../../shared/bus/actor.js";
import { lastAuditEvent } from "../../shared/bus/audit.js";
import { queuedJobs } from "../../shared/bus/jobs.js";

/**
 * Who asked for the halt (or cancel) of the run that a request found queued already, at this
 * state of the run (one is queued per state: the later one is a duplicate, dropped by the queue):
 * the job's, while it waits or a worker holds it, else, for a halt, the `run.halted` its worker
 * recorded. Undefined when neither says.
 */
export async function firstStopBy(
  bus: ActorBus,
  runId: string,
  type: "halt" | "cancel",
): Promise<string | undefined> {
  const queued = (await queuedJobs(bus, runId)).findLast((job) => job?.event?.type === type);
  const event = queued?.event;
  if (event && "by" in event && typeof event.by === "string") return event.by;
  if (type === "cancel") return undefined;
  const halted = await lastAuditEvent(bus, runId, "run.halted");
  const by = (halted?.event.data as { by?: unknown } | undefined)?.by;
  return typeof by === "string" ? by : undefined;
}

/**
 * What a stop queued already tells who asked for it again: nothing more when it is the same person
 * (a copy asked again after a lost reply); otherwise who asked first, and that this request is not
 * recorded (its reason neither): the run stops once.
 */
export function alreadyQueued(what: "halt" | "cancel", firstBy: string | undefined, by: string): string {
  if (firstBy === by) return "";
  const who = firstBy === undefined ? "an earlier request" : firstBy;
  return ` (already, by ${who}: the run stops once, and this ${what} by ${by} is not recorded)`;
}
