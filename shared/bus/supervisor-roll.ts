import { NoRespondersError, PermissionViolationError, type NatsConnection } from "@nats-io/transport-node";
import { SupervisorHello } from "../contracts/cluster.js";
import { decode } from "./codec.js";
import { linkOf } from "./link.js";
import type { Subjects } from "./subjects.js";

/** The supervisors that answered a roll call within `listenedMs`, by instance. */
export interface SupervisorRoll {
  listenedMs: number;
  supervisors: SupervisorHello[];
  /** Why the roll could not be called: the server refused the publish (the NATS user's permissions). */
  refused?: string;
}

/**
 * Calls the supervisors' roll: every replica answers at once with its settings (see
 * SupervisorHello). Waits `listenMs` for the answers, less when nobody serves the subject (the
 * server says so at once). An answer that cannot be read is left out.
 */
export async function callSupervisorRoll(
  nc: NatsConnection,
  subjects: Subjects,
  listenMs: number,
): Promise<SupervisorRoll> {
  const subject = subjects.supervisorPing();
  const heard = new Map<string, SupervisorHello>();
  let denied: PermissionViolationError | undefined;
  const stopListening = linkOf(nc).onPublishDenied((err) => {
    if (err.subject === subject) denied = err;
  });
  try {
    for await (const msg of await nc.requestMany(subject, undefined, {
      maxWait: listenMs,
      strategy: "timer",
    })) {
      try {
        const hello = decode(SupervisorHello, msg.data);
        heard.set(hello.instance, hello);
      } catch {
        // Not an answer this build reads: not a supervisor it can report.
      }
    }
  } catch (err) {
    if (err instanceof PermissionViolationError) denied = err;
    else if (!(err instanceof NoRespondersError)) throw err;
  } finally {
    stopListening();
  }
  const supervisors = [...heard.values()].sort((a, b) => a.instance.localeCompare(b.instance));
  if (denied) {
    const refused = `the NATS server refused a publish to '${subject}': ${denied.message}`;
    return { listenedMs: listenMs, supervisors, refused };
  }
  return { listenedMs: listenMs, supervisors };
}
