import type { JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { headers, type NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { AgentError } from "../runtime/errors.js";
import { AckPublisher } from "./ack-publisher.js";
import { decode, encode } from "./codec.js";
import { refusedOnly } from "./run-log.js";
import type { Subjects, TreeCounter } from "./subjects.js";

/**
 * The model calls a run tree (a root run and every descendant) may make, written by the supervisor
 * as it admits the root (SUPERVISOR_TREE_ITERATION_CAP then) to the pool bucket, where workers read
 * it once per tree. The calls made are counted on the tree's JetStream counter (see addIterations).
 */
export const TreeCap = z.object({
  cap: z.number().int().positive(),
  /** The root's `maxCostUsd`, which bounds the whole tree's cost (absent: unlimited). */
  maxCostUsd: z.number().positive().optional(),
  /** The root's `maxTokensBudget`, which bounds the whole tree's tokens (absent: unlimited). */
  maxTokens: z.number().int().nonnegative().optional(),
});
export type TreeCap = z.infer<typeof TreeCap>;

/** A run tree's cap in the pool bucket. */
export const treeCapKey = (rootRunId: string): string => `tree.${rootRunId}`;

/** A counter's total as JetStream says it: a decimal string, in the ack and in the subject's last message. */
const Total = z.string().regex(/^-?\d{1,15}$/, "a counter's total");
const CounterMessage = z.object({ val: Total });

/**
 * Writes the tree's cap unless it has one: a root admitted again (a copy of its submit, an
 * admission finished by another supervisor) keeps the cap it was first given.
 */
export async function openTree(
  kv: KV,
  rootRunId: string,
  cap: number,
  spend: Omit<TreeCap, "cap"> = {},
): Promise<void> {
  await kv.create(treeCapKey(rootRunId), encode(TreeCap, { cap, ...spend })).catch(refusedOnly);
}

/** The tree's budgets (iterations, and cost and tokens when its root has them); undefined as for readTreeCap. */
export async function readTreeBudget(kv: KV, rootRunId: string): Promise<TreeCap | undefined> {
  const entry = await kv.get(treeCapKey(rootRunId));
  return entry?.operation === "PUT" ? decode(TreeCap, entry.value) : undefined;
}

/**
 * The tree's cap; undefined when it has none: its root finished and its key went with the root's
 * status (SUPERVISOR_STATUS_RETAIN_MS), or the root was never admitted.
 */
export async function readTreeCap(kv: KV, rootRunId: string): Promise<number | undefined> {
  return (await readTreeBudget(kv, rootRunId))?.cap;
}

/**
 * Adds `delta` (negative to give back) to the tree's iteration counter, one publish with a
 * `Nats-Incr` header and no body; resolves with the counter's new total. Exact under any number of
 * concurrent writers: the stream adds. Not retried: an add whose ack never came may have landed,
 * and sent again would count twice.
 */
export async function addIterations(
  deps: { nc: NatsConnection; subjects: Subjects },
  rootRunId: string,
  delta: number,
): Promise<number> {
  return addToCounter(deps, rootRunId, "iterations", delta);
}

/** Adds `delta` to one of the tree's counters (see addIterations); resolves with its new total. */
export async function addToCounter(
  deps: { nc: NatsConnection; subjects: Subjects },
  rootRunId: string,
  what: TreeCounter,
  delta: number,
): Promise<number> {
  const h = headers();
  h.set("Nats-Incr", delta < 0 ? String(delta) : `+${delta}`);
  const subject = deps.subjects.treeCounter(rootRunId, what);
  const ack = await AckPublisher.of(deps.nc).publish(subject, new Uint8Array(0), { headers: h });
  const total = Total.safeParse(ack.val);
  if (!total.success) {
    throw new AgentError(
      "INTERNAL",
      `stream ${ack.stream} answered an add to ${subject} without a counter's total: is it a counter stream (allow_msg_counter)?`,
    );
  }
  return Number(total.data);
}

/** The tree's iteration counter now (a direct get of its last message); 0 when nothing was ever added. */
export async function readIterations(
  deps: { jsm: JetStreamManager; subjects: Subjects },
  rootRunId: string,
): Promise<number> {
  return readCounter(deps, rootRunId, "iterations");
}

/** One of the tree's counters now; 0 when nothing was ever added. */
export async function readCounter(
  deps: { jsm: JetStreamManager; subjects: Subjects },
  rootRunId: string,
  what: TreeCounter,
): Promise<number> {
  const { subjects } = deps;
  const last = await deps.jsm.direct.getMessage(subjects.streams().counters, {
    last_by_subj: subjects.treeCounter(rootRunId, what),
  });
  return last ? Number(decode(CounterMessage, last.data).val) : 0;
}

/**
 * How many of the `asked` iterations just added to a tree's counter are granted, the counter now
 * at `total`: those that fit under the cap on top of what was counted before this add (never
 * fewer than none, never more than asked). The rest is the add's overshoot, given back. Pure.
 */
export function grantOf(cap: number, total: number, asked: number): number {
  return Math.min(asked, Math.max(0, cap - (total - asked)));
}

/**
 * The refusal of a run whose tree has no cap: its root never ran (a child submitted naming a parent
 * that never ran), or its key was removed with the root's status (SUPERVISOR_STATUS_RETAIN_MS).
 */
export function retired(rootRunId: string): AgentError {
  return new AgentError(
    "GLOBAL_CAP",
    `run tree ${rootRunId} has no iteration budget: its root run finished and was removed after the cluster's status retention (or never ran), so no run of the tree may lease more`,
    { details: { retired: true } },
  );
}

/** The refusal of a run whose tree has made as many model calls as its cap allows. */
export function capReached(rootRunId: string, cap: number, used?: number): AgentError {
  return new AgentError("GLOBAL_CAP", `run tree ${rootRunId} used its global budget of ${cap} iterations`, {
    details: { cap, ...(used === undefined ? {} : { used }) },
  });
}
