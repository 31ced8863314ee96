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
      [names.wal]: "created",
      [names.audit]: "created",
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
    const audit = (await jsm.streams.info(names.audit)).config;
    expect(audit).toMatchObject({ deny_delete: true, deny_purge: true, storage: "file" });
    for (const log of [names.wal, names.audit]) {
      expect((await jsm.streams.info(log)).config).toMatchObject({ allow_direct: true, compression: "s2" });
    }
  });

  it("converges a stream whose configuration drifted", async () => {
    const jsm = await jetstreamManager(nc);
    const names = subjects.streams();
    const info = await jsm.streams.info(names.wal);
    // A stream made before direct reads and compression: both are switched on in place, data kept.
    await jsm.streams.update(names.wal, {
      ...info.config,
      duplicate_window: 5_000_000_000,
      allow_direct: false,
      compression: StoreCompression.None,
    });
    const ack = await jetstream(nc).publish(subjects.wal("drifted"), "{}");
    const report = await provision(nc, { subjects, replicas: 1 });
    expect(report.streams[names.wal]).toBe("updated");
    expect((await jsm.streams.info(names.wal)).config).toMatchObject({
      duplicate_window: 120_000_000_000,
      allow_direct: true,
      compression: "s2",
    });
    expect((await jsm.direct.getMessage(names.wal, { seq: ack.seq }))?.subject).toBe(subjects.wal("drifted"));
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

  it("the audit stream refuses purge and message deletion", async () => {
    // deny_delete/deny_purge guard the stream's messages. Deleting the stream itself is not refused by
    // its configuration on any server version: the per-user permissions in nats.conf must deny
    // $JS.API.STREAM.DELETE for the audit stream (the cluster's least-privilege accounts).
    const js = jetstream(nc);
    const jsm = await jetstreamManager(nc);
    const audit = subjects.streams().audit;
    const ack = await js.publish(subjects.audit("run1", "phase.entered"), "{}");
    await expect(jsm.streams.purge(audit)).rejects.toThrow();
    await expect(jsm.streams.deleteMessage(audit, ack.seq)).rejects.toThrow();
    expect((await jsm.streams.info(audit)).state.messages).toBeGreaterThanOrEqual(1);
  });
});

describe("WAL primitives the cluster relies on", () => {
  it("a repeated message id is acknowledged as a duplicate and stored once", async () => {
    const js = jetstream(nc);
    const subject = subjects.wal("dedupe-run");
    const a = await js.publish(subject, "{}", { msgID: "dedupe-run:1" });
    const b = await js.publish(subject, "{}", { msgID: "dedupe-run:1" });
    expect(b.duplicate).toBe(true);
    expect(b.seq).toBe(a.seq);
  });

  it("the expected last subject sequence fences a stale writer (error 10071)", async () => {
    const js = jetstream(nc);
    const subject = subjects.wal("fenced-run");
    const first = await js.publish(subject, "{}", {
      msgID: "fenced-run:1",
      expect: { lastSubjectSequence: 0 },
    });
    await js.publish(subject, "{}", { msgID: "fenced-run:2", expect: { lastSubjectSequence: first.seq } });
    const stale = await js
      .publish(subject, "{}", { msgID: "fenced-run:2b", expect: { lastSubjectSequence: first.seq } })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(apiCode(stale)).toBe(10071);
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
