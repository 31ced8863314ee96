import type { NatsConnection } from "@nats-io/transport-node";
import { SupervisorHello } from "../contracts/cluster.js";
import { callRoll } from "./roll-call.js";
import type { Subjects } from "./subjects.js";

/** The supervisors that answered a roll call within `listenedMs`, by instance. */
export interface SupervisorRoll {
  listenedMs: number;
  supervisors: SupervisorHello[];
  /** Why the roll could not be called: the server refused the publish (the NATS user's permissions). */
  refused?: string;
}

/** Calls the supervisors' roll: every replica answers at once with its settings (see SupervisorHello). */
export async function callSupervisorRoll(
  nc: NatsConnection,
  subjects: Subjects,
  listenMs: number,
): Promise<SupervisorRoll> {
  const { heard, ...roll } = await callRoll(nc, subjects.supervisorPing(), SupervisorHello, listenMs);
  return { ...roll, supervisors: heard };
}
