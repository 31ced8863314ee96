import {
  NoRespondersError,
  PermissionViolationError,
  type NatsConnection,
  type Subscription,
} from "@nats-io/transport-node";
import type { z } from "zod";
import { decode } from "./codec.js";
import { linkOf } from "./link.js";

/** The answers to a roll call heard within `listenedMs`, one per instance, by instance. */
export interface RollAnswers<T> {
  listenedMs: number;
  heard: T[];
  /** Why the roll could not be called: the server refused the publish (the NATS user's permissions). */
  refused?: string;
}

/**
 * Calls a roll on `subject`: every process that answers it (not in a queue group) replies at once.
 * Waits `listenMs` for the answers, less when nobody serves the subject (the server says so at
 * once). An answer that cannot be read as `schema` is left out: not one this build can report.
 */
export async function callRoll<S extends z.ZodType<{ instance: string }>>(
  nc: NatsConnection,
  subject: string,
  schema: S,
  listenMs: number,
): Promise<RollAnswers<z.output<S>>> {
  const heard = new Map<string, z.output<S>>();
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
        const hello = decode(schema, msg.data);
        heard.set(hello.instance, hello);
      } catch {
        // Left out, as above.
      }
    }
  } catch (err) {
    if (err instanceof PermissionViolationError) denied = err;
    else if (!(err instanceof NoRespondersError)) throw err;
  } finally {
    stopListening();
  }
  const answers = [...heard.values()].sort((a, b) => a.instance.localeCompare(b.instance));
  if (!denied) return { listenedMs: listenMs, heard: answers };
  return { listenedMs: listenMs, heard: answers, refused: refusedPublish(denied) };
}

/** What a roll's `refused` says: the subject the server would not take, and its words. */
export function refusedPublish(err: PermissionViolationError): string {
  return `the NATS server refused a publish to '${err.subject}': ${err.message}`;
}

/**
 * Answers every roll call on `subject` with `hello` (already encoded). Not in a queue group:
 * every replica answers, so the caller counts them. The call's body is ignored. Settles once the
 * server has the subscription: a process that says it is ready then answers the next roll call.
 */
export async function answerRoll(
  nc: NatsConnection,
  subject: string,
  hello: Uint8Array,
): Promise<Subscription> {
  const sub = nc.subscribe(subject, {
    callback: (err, msg) => {
      if (!err && msg.reply) msg.respond(hello);
    },
  });
  await nc.flush();
  return sub;
}
