import { PermissionViolationError, type NatsConnection } from "@nats-io/transport-node";
import type { JetStreamManager } from "@nats-io/jetstream";
import { CriticHello } from "../contracts/cluster.js";
import { readBucket } from "./bucket-read.js";
import { linkOf } from "./link.js";
import { callRoll, refusedPublish } from "./roll-call.js";
import type { Subjects } from "./subjects.js";

/** The critics that answered a roll call within `listenedMs`, by instance. */
export interface CriticRoll {
  listenedMs: number;
  critics: CriticHello[];
  /** Why the roll could not be called: the server refused the publish (the NATS user's permissions). */
  refused?: string;
}

/** Calls the critics' roll: every replica answers at once (see CriticHello). */
export async function callCriticRoll(
  nc: NatsConnection,
  subjects: Subjects,
  listenMs: number,
): Promise<CriticRoll> {
  const { heard, ...roll } = await callRoll(nc, subjects.criticPing(), CriticHello, listenMs);
  return { ...roll, critics: heard };
}

/** A tool the workers have described, and whether a service answered its describe now. */
export interface ToolAnswer {
  name: string;
  answered: boolean;
}

/** The tools the workers share descriptors of, each asked to describe itself. */
export interface ToolRoll {
  listenedMs: number;
  tools: ToolAnswer[];
  /** Why a tool could not be asked: the server refused the publish (the NATS user's permissions). */
  refused?: string;
  /** Why no tool was asked: the bucket that names them could not be read. */
  unlisted?: string;
}

/**
 * Asks every tool the workers know of (the keys of the shared descriptors bucket: a tool some run
 * has used) to describe itself, all at once, each waiting at most `listenMs`. A describe has no
 * side effect; its services share a queue group, so one answer says the tool is served, not by
 * how many replicas.
 */
export async function askTools(
  nc: NatsConnection,
  subjects: Subjects,
  jsm: JetStreamManager,
  listenMs: number,
): Promise<ToolRoll> {
  const names: string[] = [];
  try {
    for await (const { key } of readBucket(jsm, subjects.buckets().toolDescriptors)) names.push(key);
  } catch (err) {
    // The bucket has no leader (a server lost, an election under way): the rest of the report stands.
    const unlisted = `the workers' tool descriptors could not be read: ${err instanceof Error ? err.message : String(err)}`;
    return { listenedMs: listenMs, tools: [], unlisted };
  }
  const asked = new Map(names.sort().map((name) => [subjects.toolDescribe(name), name]));
  let denied: PermissionViolationError | undefined;
  const stopListening = linkOf(nc).onPublishDenied((err) => {
    if (asked.has(err.subject)) denied = err;
  });
  try {
    const tools = await Promise.all(
      [...asked].map(async ([subject, name]) => {
        try {
          await nc.request(subject, undefined, { timeout: listenMs });
          return { name, answered: true };
        } catch (err) {
          if (err instanceof PermissionViolationError) denied = err;
          // Nobody serving it (the server says so at once), or no answer in time: not served now.
          return { name, answered: false };
        }
      }),
    );
    if (!denied) return { listenedMs: listenMs, tools };
    return { listenedMs: listenMs, tools, refused: refusedPublish(denied) };
  } finally {
    stopListening();
  }
}
