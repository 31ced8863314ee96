import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { SupervisorHello } from "../../shared/contracts/cluster.js";
import { encode } from "../../shared/bus/codec.js";
import { answerRoll } from "../../shared/bus/roll-call.js";
import type { Subjects } from "../../shared/bus/subjects.js";
import type { SupervisorEnv } from "./env.js";

/** What this supervisor says when the roll is called: who it is, and the settings it decides by. */
export function helloOf(instance: string, startedAt: number, env: SupervisorEnv): SupervisorHello {
  return {
    schemaVersion: 1,
    instance,
    startedAt,
    poolCapacity: env.SUPERVISOR_POOL_CAPACITY,
    maxDepth: env.SUPERVISOR_MAX_DEPTH,
    treeIterationCap: env.SUPERVISOR_TREE_ITERATION_CAP,
    stallMs: env.SUPERVISOR_STALL_MS,
  };
}

/** Answers every roll call (`agentctl cluster`): every replica, so the caller compares their settings. */
export function answerRollCall(
  nc: NatsConnection,
  subjects: Subjects,
  hello: SupervisorHello,
): Promise<Subscription> {
  return answerRoll(nc, subjects.supervisorPing(), encode(SupervisorHello, hello));
}
