import { Kvm } from "@nats-io/kv";
import { describe, expect, it } from "vitest";
import { currentCopies, readClusterState, type StoreHealth } from "../../shared/bus/cluster-state.js";
import { writeKillSwitch } from "../../shared/bus/kill-switch.js";
import { readKillSwitchReport } from "../../services/cli/cluster-health.js";
import { encode } from "../../shared/bus/codec.js";
import { ensureWorkerConsumer, publishJob } from "../../shared/bus/jobs.js";
import { answerRoll } from "../../shared/bus/roll-call.js";
import { askTools, callCriticRoll } from "../../shared/bus/service-roll.js";
import { sharedDescriptors } from "../../shared/bus/tool-descriptors.js";
import { listenForWorkers } from "../../shared/bus/worker-roll.js";
import { CriticHello, WorkerBeat } from "../../shared/contracts/cluster.js";
import { ToolDescriptor } from "../../shared/contracts/tool.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { describeTool } from "../../shared/tools/tool.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { useBusSuite } from "../helpers/bus-suite.js";

/** What `agentctl cluster` asks of the cluster, each answered by real subscribers on a real server. */
const suite = useBusSuite("roll");

const beat = (workerId: string, instance: string, jobs: number, leaving?: boolean): WorkerBeat => ({
  schemaVersion: 1,
  workerId,
  instance,
  deadAfterMs: 1_000,
  jobs: Array.from({ length: jobs }, (_, i) => `$JS.ACK.R.c.1.${i}.1.0.0`),
  ...(leaving ? { leaving } : {}),
});

describe("roll calls", () => {
  it("the critics' roll hears every replica once, sorted, leaves out an answer it cannot read, and ends at once when nobody serves it", async () => {
    const began = Date.now();
    const nobody = await callCriticRoll(suite.nc, suite.subjects, 5_000);
    expect(nobody).toEqual({ listenedMs: 5_000, critics: [] });
    // The server says at once that nobody serves the subject: no 5 s wait.
    expect(Date.now() - began).toBeLessThan(2_000);

    const hello = (instance: string): CriticHello => ({ schemaVersion: 1, instance, startedAt: 1 });
    const subs = await Promise.all([
      answerRoll(suite.nc, suite.subjects.criticPing(), encode(CriticHello, hello("critic-b"))),
      answerRoll(suite.nc, suite.subjects.criticPing(), encode(CriticHello, hello("critic-a"))),
      answerRoll(suite.nc, suite.subjects.criticPing(), new TextEncoder().encode('{"instance":7}')),
    ]);
    try {
      const roll = await callCriticRoll(suite.nc, suite.subjects, 500);
      expect(roll.critics.map((c) => c.instance)).toEqual(["critic-a", "critic-b"]);
      expect(roll.refused).toBeUndefined();
    } finally {
      for (const sub of subs) sub.unsubscribe();
    }
  });

  it("listening for workers hears each instance's latest beat, sorted by worker, and leaves out what is not a beat", async () => {
    const beats = [
      beat("w-2", "w-2-i1", 3),
      beat("w-1", "w-1-i9", 0),
      beat("w-1", "w-1-i1", 1),
      beat("w-2", "w-2-i1", 1, true),
    ];
    const listening = listenForWorkers(suite.nc, suite.subjects, 600, systemClock);
    await suite.nc.flush();
    for (const b of beats) suite.nc.publish(suite.subjects.workerBeat(b.instance), encode(WorkerBeat, b));
    suite.nc.publish(suite.subjects.workerBeat("junk"), new TextEncoder().encode("not json"));
    const roll = await listening;
    expect(roll).toEqual({
      listenedMs: 600,
      workers: [
        { workerId: "w-1", instance: "w-1-i1", jobs: 1, leaving: false },
        { workerId: "w-1", instance: "w-1-i9", jobs: 0, leaving: false },
        { workerId: "w-2", instance: "w-2-i1", jobs: 1, leaving: true },
      ],
    });
  });

  it("asking the tools the workers described says which a service answers now", async () => {
    expect(await askTools(suite.nc, suite.subjects, suite.jsm, 300)).toEqual({
      listenedMs: 300,
      tools: [],
    });
    const kv = await new Kvm(suite.nc).open(suite.subjects.buckets().toolDescriptors);
    const descriptors = sharedDescriptors(kv);
    const echo = describeTool(echoTool);
    const hungTools = ["hung-1", "hung-2", "hung-3"];
    for (const name of ["served", ...hungTools, "gone"]) await descriptors.put(name, { ...echo, name });
    expect(await descriptors.get("served")).toEqual({ ...echo, name: "served" });
    await kv.delete("gone");
    expect(await descriptors.get("gone")).toBeUndefined();
    expect(await descriptors.get("never")).toBeUndefined();

    const served = suite.nc.subscribe(suite.subjects.toolDescribe("served"), {
      callback: (_err, msg) => {
        msg.respond(encode(ToolDescriptor, { ...echo, name: "served" }));
      },
    });
    // Each takes the describe and answers nothing, as a hung service does.
    const hung = hungTools.map((name) =>
      suite.nc.subscribe(suite.subjects.toolDescribe(name), { callback: () => undefined }),
    );
    try {
      await suite.nc.flush();
      const began = Date.now();
      const roll = await askTools(suite.nc, suite.subjects, suite.jsm, 1_000);
      expect(roll).toEqual({
        listenedMs: 1_000,
        tools: [...hungTools.map((name) => ({ name, answered: false })), { name: "served", answered: true }],
      });
      // Asked side by side: one wait of 1 s, not one per hung tool (3 s).
      expect(Date.now() - began).toBeLessThan(2_500);
    } finally {
      served.unsubscribe();
      for (const sub of hung) sub.unsubscribe();
    }
  });
});

describe("the cluster's state as agentctl cluster reads it", () => {
  it("lists every stream and bucket of the prefix with its messages, the server, storage, and the work queue once workers made it", async () => {
    const before = await readClusterState(suite);
    expect(before.server.version).toBe(suite.nc.info?.version);
    expect(before.stores.map((s) => s.name)).toEqual(suite.subjects.storeStreams());
    for (const store of before.stores) {
      expect(store).toMatchObject({ replicas: 1, followers: [] });
      expect(store.leader).toBeUndefined();
      expect(currentCopies(store, false)).toBe(1);
    }
    expect(before.jobs).toBeUndefined();

    await ensureWorkerConsumer(suite.jsm, suite.subjects, { ackWaitMs: 30_000 });
    const deps = { nc: suite.nc, subjects: suite.subjects, clock: suite.clock, random: suite.random };
    for (const runId of ["r-1", "r-2"])
      await publishJob(
        deps,
        { schemaVersion: 1, runId, rootRunId: runId, depth: 0, auditSeq: 0 },
        `${runId}:start`,
      );
    const after = await readClusterState(suite);
    expect(after.jobs).toEqual({ waiting: 2, held: 0, redelivered: 0, pulls: 0 });
    const runs = after.stores.find((s) => s.name === suite.subjects.streams().runs);
    expect(runs?.messages).toBe(2);
    expect(runs?.bytes).toBeGreaterThan(0);
    expect(after.storage.used).toBeGreaterThanOrEqual(runs?.bytes ?? Infinity);
    expect(after.storage.limit).toBeUndefined();
  });

  it("reads the kill switch from the pool bucket: off when never set, then as last set, who and why", async () => {
    expect(await readKillSwitchReport(suite.buckets.pool)).toEqual({ active: false });
    await writeKillSwitch(suite.buckets.pool, {
      active: true,
      by: "oncall",
      reason: "bad deploy",
      at: 1_000,
    });
    expect(await readKillSwitchReport(suite.buckets.pool)).toEqual({
      active: true,
      by: "oncall",
      reason: "bad deploy",
      at: 1_000,
    });
  });

  it("counts a store's current copies: none when missing, the leader and each current follower online when clustered", () => {
    const store = (over: Partial<StoreHealth>): StoreHealth => ({
      name: "S",
      kind: "stream",
      followers: [],
      ...over,
    });
    const peer = (current: boolean, offline: boolean) => ({ server: "n", current, offline });
    expect(currentCopies(store({}), true)).toBe(0);
    expect(currentCopies(store({}), false)).toBe(0);
    expect(currentCopies(store({ replicas: 3 }), true)).toBe(0);
    const three = store({
      replicas: 3,
      leader: "n1",
      followers: [peer(true, false), peer(false, false), peer(true, true)],
    });
    expect(currentCopies(three, true)).toBe(2);
    expect(currentCopies(three, false)).toBe(1);
    expect(currentCopies({ ...three, followers: [peer(true, false), peer(true, false)] }, true)).toBe(3);
  });
});
