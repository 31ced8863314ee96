import { hostname } from "node:os";
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { SupervisorHello } from "../../shared/contracts/cluster.js";
import { encode } from "../../shared/bus/codec.js";
import type { Subjects } from "../../shared/bus/subjects.js";
import type { Random } from "../../shared/runtime/random.js";
import type { SupervisorEnv } from "./env.js";

/** This process's instance name: the host (a pod's name in Kubernetes), the pid, a random suffix. */
export function supervisorInstance(random: Random, host = hostname(), pid = process.pid): string {
  const suffix = Math.floor(random.next() * 0x1_0000_0000)
    .toString(16)
    .padStart(8, "0");
  return `${host}-${pid}-${suffix}`.slice(0, 200);
}

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

/**
 * Answers every roll call (`agentctl cluster`) on the ping subject. Not in a queue group: every
 * replica answers, so the caller counts them and compares their settings. The body is ignored.
 */
export function answerRollCall(nc: NatsConnection, subjects: Subjects, hello: SupervisorHello): Subscription {
  const reply = encode(SupervisorHello, hello);
  return nc.subscribe(subjects.supervisorPing(), {
    callback: (err, msg) => {
      if (!err && msg.reply) msg.respond(reply);
    },
  });
}
