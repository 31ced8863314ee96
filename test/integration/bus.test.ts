import { jetstream, jetstreamManager, JetStreamApiError, StoreCompression } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectBus } from "../../shared/bus/connect.js";
import { provision } from "../../shared/bus/provision.js";
import { Subjects } from "../../shared/bus/subjects.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";

// Each suite has its own prefix, so suites can share one server (NATS_URL) without touching each other.
const subjects = new Subjects(`t${process.pid}x${Date.now().toString(36)}`);
let server: TestNats;
let nc: NatsConnection;

beforeAll(async () => {
  server = await startNats();
  nc = await connectBus({
    servers: server.url,
    name: "bus-test",
    logger: silentLogger,
    ...(server.user ? { user: server.user, pass: server.pass ?? "" } : {}),
  });
});

afterAll(async () => {
  await nc?.drain();
  await server?.stop();
});

const apiCode = (err: unknown): number | undefined =>
  err instanceof JetStreamApiError ? err.code : undefined;

describe("provisioning on a real nats-server", () => {
  it("creates the three streams and seven buckets, then changes nothing on a second run", async () => {
    const first = await provision(nc, { subjects, replicas: 1 });
    const names = subjects.streams();
    expect(first.streams).toEqual({
      [names.runs]: "created",
      [names.log]: "created",
      [names.counters]: "created",
    });
    expect(first.buckets).toEqual(
      Object.fromEntries(subjects.bucketList().map((bucket) => [bucket, "created"])),
    );
    expect(first.serverVersion).toMatch(/^\d+\.\d+\.\d+/);
    const second = await provision(nc, { subjects, replicas: 1 });
    expect(Object.values(second.streams)).toEqual(["unchanged", "unchanged", "unchanged"]);
    expect(new Set(Object.values(second.buckets))).toEqual(new Set(["unchanged"]));

    const jsm = await jetstreamManager(nc);
    const runs = (await jsm.streams.info(names.runs)).config;
    expect(runs).toMatchObject({
      retention: "workqueue",
      storage: "file",
      subjects: [subjects.runQueueAll()],
    });
    // One stream for every run's records and events, and the refused submits beside them.
    const log = (await jsm.streams.info(names.log)).config;
    expect(log).toMatchObject({
      subjects: [subjects.logAll(), subjects.rejectedAll()],
      retention: "limits",
      storage: "file",
      duplicate_window: 120_000_000_000,
      deny_delete: true,
      deny_purge: true,
      allow_direct: true,
      compression: "s2",
    });
    // Kept until the supervisor sets a max_age (SUPERVISOR_LOG_MAX_AGE_MS).
    expect(log.max_age).toBe(0);
    // Run trees' counters: one message per counter, its total.
    expect((await jsm.streams.info(names.counters)).config).toMatchObject({
      subjects: [subjects.countersAll()],
      storage: "file",
      allow_msg_counter: true,
      allow_direct: true,
      max_msgs_per_subject: 1,
    });
  });

  it("converges a stream whose configuration drifted", async () => {
    const jsm = await jetstreamManager(nc);
    const names = subjects.streams();
    const info = await jsm.streams.info(names.log);
    // A log made before direct reads, compression and refused submits: each is put right in place, data kept.
    await jsm.streams.update(names.log, {
      ...info.config,
      subjects: [subjects.logAll()],
      duplicate_window: 5_000_000_000,
      allow_direct: false,
      compression: StoreCompression.None,
    });
    const ack = await jetstream(nc).publish(subjects.log("drifted", "step"), "{}");
    const report = await provision(nc, { subjects, replicas: 1 });
    expect(report.streams[names.log]).toBe("updated");
    expect((await jsm.streams.info(names.log)).config).toMatchObject({
      subjects: [subjects.logAll(), subjects.rejectedAll()],
      duplicate_window: 120_000_000_000,
      allow_direct: true,
      compression: "s2",
      deny_delete: true,
      deny_purge: true,
    });
    expect((await jsm.direct.getMessage(names.log, { seq: ack.seq }))?.subject).toBe(
      subjects.log("drifted", "step"),
    );
  });

  it("refuses more than one replica on a server not in a cluster (INVALID_INPUT, nothing created)", async () => {
    // A server of its own: NATS_URL may name a cluster.
    await using single = await startNats({ own: true });
    const alone = await connectBus({ servers: single.url, name: "bus-test-single", logger: silentLogger });
    const jsm = await jetstreamManager(alone);
    const mine = new Subjects(`single${process.pid}`);
    const refused = await provision(alone, { subjects: mine, replicas: 3 }).catch((err: unknown) => err);
    expect(refused).toMatchObject({ code: "INVALID_INPUT", retryable: false });
    expect((refused as Error).message).toMatch(
      /^invalid configuration: AGENTS_REPLICAS is 3 and the NATS server at .* is not in a cluster, .*set AGENTS_REPLICAS=1/,
    );
    expect(await jsm.streams.names().next()).toEqual([]);
    await alone.close();
  });

  it("the run log refuses purge, a run's purge and message deletion", async () => {
    // deny_delete/deny_purge guard the stream's messages: a finished run's log is never removed by
    // hand, only by the stream's max_age. Deleting the stream itself is not refused by its
    // configuration on any server version: the per-user permissions in nats.conf must deny
    // $JS.API.STREAM.DELETE for the run log (the cluster's least-privilege accounts).
    const js = jetstream(nc);
    const jsm = await jetstreamManager(nc);
    const log = subjects.streams().log;
    const ack = await js.publish(subjects.log("run1", "run.committed"), "{}");
    const count = async () =>
      Object.values(
        (await jsm.streams.info(log, { subjects_filter: subjects.logAll("run1") })).state.subjects ?? {},
      );
    await expect(jsm.streams.purge(log)).rejects.toThrow();
    await expect(jsm.streams.purge(log, { filter: subjects.logAll("run1") })).rejects.toThrow();
    await expect(jsm.streams.deleteMessage(log, ack.seq)).rejects.toThrow();
    await expect(jsm.streams.deleteMessage(log, ack.seq, false)).rejects.toThrow();
    expect(await count()).toEqual([1]);
  });
});

describe("run log primitives the cluster relies on", () => {
  it("a repeated message id is acknowledged as a duplicate and stored once", async () => {
    const js = jetstream(nc);
    const subject = subjects.log("dedupe-run", "step");
    const a = await js.publish(subject, "{}", { msgID: "dedupe-run:1" });
    const b = await js.publish(subject, "{}", { msgID: "dedupe-run:1" });
    expect(b.duplicate).toBe(true);
    expect(b.seq).toBe(a.seq);
  });

  it("the expected last sequence of a run's whole log fences a stale writer, whatever headline it writes under (error 10071)", async () => {
    const js = jetstream(nc);
    const fence = subjects.logAll("fenced-run");
    const after = (seq: number) => ({ lastSubjectSequence: seq, lastSubjectSequenceSubject: fence });
    const first = await js.publish(subjects.log("fenced-run", "run.admitted"), "{}", {
      msgID: "fenced-run:1",
      expect: after(0),
    });
    // Another run's message does not move this run's fence.
    await js.publish(subjects.log("other-run", "step"), "{}", { msgID: "other-run:1" });
    await js.publish(subjects.log("fenced-run", "step"), "{}", {
      msgID: "fenced-run:2",
      expect: after(first.seq),
    });
    // The stale writer's subject last had the message it names: the fence is the run's whole log.
    const stale = (kind: string, msgID: string) =>
      js.publish(subjects.log("fenced-run", kind), "{}", { msgID, expect: after(first.seq) }).then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(apiCode(await stale("run.admitted", "fenced-run:2b"))).toBe(10071);
    expect(apiCode(await stale("run.committed", "fenced-run:2c"))).toBe(10071);
  });

  it("KV create and update compare-and-set on the revision", async () => {
    const kv = await new Kvm(nc).open(subjects.buckets().pool);
    const rev = await kv.create("active", new TextEncoder().encode("1"));
    await expect(kv.create("active", new TextEncoder().encode("1"))).rejects.toThrow();
    const next = await kv.update("active", new TextEncoder().encode("2"), rev);
    await expect(kv.update("active", new TextEncoder().encode("3"), rev)).rejects.toThrow();
    expect(next).toBeGreaterThan(rev);
  });
});
