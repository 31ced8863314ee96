import type { Subscription } from "@nats-io/transport-node";
import { HoldsQuery, HoldsReply } from "../../shared/contracts/cluster.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode, encode } from "../../shared/bus/codec.js";
import { requestJson } from "../../shared/bus/request.js";
import { workerOfWriter } from "./writer-id.js";

/**
 * Answers other workers asking whether this one still holds a job by a delivery other than theirs
 * (see HoldsQuery). `held`: the jobs held now, by ack subject, each with its stream sequence.
 */
export function answerHolds(
  bus: Pick<ActorBus, "nc" | "subjects" | "logger">,
  workerId: string,
  held: () => ReadonlyMap<string, number>,
): Subscription {
  return bus.nc.subscribe(bus.subjects.workerHolds(workerId), {
    callback: (err, msg) => {
      if (err) return;
      try {
        const { jobSeq, except } = decode(HoldsQuery, msg.data);
        const found = [...held()].some(([ack, seq]) => seq === jobSeq && ack !== except);
        msg.respond(encode(HoldsReply, { schemaVersion: 1, held: found }));
      } catch (error) {
        bus.logger.warn({ err: error, subject: msg.subject }, "unreadable question about a held job ignored");
      }
    },
  });
}

/**
 * Whether the worker whose lease `writerId` wrote the run last still holds the job by another
 * delivery than `query.except`: it renewed the job too late (a busy event loop), and drives the
 * run still. A worker gone (its connection closed: the server answers at once) or silent for
 * `timeoutMs` does not.
 */
export async function stillHeldBy(
  bus: Pick<ActorBus, "nc" | "subjects">,
  writerId: string,
  query: Omit<HoldsQuery, "schemaVersion">,
  timeoutMs: number,
): Promise<boolean> {
  const workerId = workerOfWriter(writerId);
  if (workerId === undefined) return false;
  try {
    const reply = await requestJson(
      bus.nc,
      bus.subjects.workerHolds(workerId),
      { schema: HoldsQuery, value: { schemaVersion: 1, ...query } },
      HoldsReply,
      { timeoutMs },
    );
    return reply.held;
  } catch {
    return false;
  }
}
