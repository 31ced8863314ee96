import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { jetstreamManager, StorageType } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { provision, streamInfoIfAny } from "../../shared/bus/provision.js";
import { bucketStream, Subjects } from "../../shared/bus/subjects.js";
import { systemClock } from "../../shared/runtime/clock.js";
import type { ClusterHealth } from "../../services/cli/cluster-health.js";
import { actorEntry, LocalCluster } from "../../services/local/cluster.js";
import { startNatsCluster, type NatsCluster } from "../helpers/nats-cluster.js";
import { until } from "../helpers/until.js";

const runProcess = promisify(execFile);
const prefix = `quorum${process.pid}`;

/**
 * A 3-node JetStream cluster that loses two of its servers: the one left answers its clients, its
 * JetStream answers nothing useful (no meta leader: timeouts, then "temporarily unavailable").
 * Every actor here connects to that one server only, so its connection stays up throughout.
 */
describe("a 3-node JetStream cluster that loses servers: two (no quorum), or one (a copy down)", () => {
  let nats: NatsCluster;
  let cluster: LocalCluster;
  let logDir: string;
  const survivor = (): string => nats.nodes[0]?.url ?? "";
  const loseQuorum = async (): Promise<void> => {
    await Promise.all(nats.nodes.slice(1).map((node) => node.kill()));
  };
  const regainQuorum = async (): Promise<void> => {
    await Promise.all(nats.nodes.slice(1).map((node) => node.start()));
  };
  const supervisorLog = async (): Promise<string> =>
    readFile(join(logDir, "supervisor.log"), "utf8").catch(() => "");
  const readyz = async (): Promise<number> => {
    const port = cluster.actors.get("supervisor")?.healthPort;
    return (await fetch(`http://127.0.0.1:${String(port)}/readyz`)).status;
  };
  const answering = async (): Promise<string | undefined> => {
    const port = cluster.actors.get("supervisor")?.healthPort;
    const text = await (await fetch(`http://127.0.0.1:${String(port)}/metrics`)).text();
    return /^agents_jetstream_answering\{[^}]*\} (\d+)$/m.exec(text)?.[1];
  };

  /** One of the supervisor's per-store gauges, as /metrics says it. */
  const gauge = async (name: string, store: string): Promise<string | undefined> => {
    const port = cluster.actors.get("supervisor")?.healthPort;
    const text = await (await fetch(`http://127.0.0.1:${String(port)}/metrics`)).text();
    const line = text.split("\n").find((l) => l.startsWith(`${name}{`) && l.includes(`store="${store}"`));
    return line?.split(" ").at(-1);
  };
  /**
   * The test's own JetStream requests wait 30 s, not the client's 5 s: a 3-node cluster on a
   * loaded 2-core host (two test files at a time, coverage on) once took longer to delete an R3
   * stream just after its replicas changed.
   */
  const manager = (nc: NatsConnection) => jetstreamManager(nc, { timeout: 30_000 });
  /** Every stream's replicas, the buckets' under their streams' names (KV_<bucket>). */
  const everyStream = (subjects: Subjects, replicas: number): Record<string, number> =>
    Object.fromEntries(subjects.storeStreams().map((name) => [name, replicas]));
  const replicasOf = async (subjects: Subjects): Promise<Record<string, number>> => {
    const admin = await connect({ servers: nats.urls.split(",") });
    try {
      const jsm = await manager(admin);
      const entries = await Promise.all(
        Object.keys(everyStream(subjects, 0)).map(
          async (name) => [name, (await jsm.streams.info(name)).config.num_replicas] as const,
        ),
      );
      return Object.fromEntries(entries);
    } finally {
      await admin.close();
    }
  };

  beforeAll(async () => {
    nats = await startNatsCluster(3);
    // The streams exist, R3, as a cluster that ran before the servers were lost.
    const admin = await connect({ servers: nats.urls.split(",") });
    for (let i = 0; ; i++) {
      try {
        await provision(admin, { subjects: new Subjects(prefix), replicas: 3 });
        break;
      } catch (err) {
        if (i >= 60) throw err;
        await systemClock.sleep(500);
      }
    }
    // On nats-server 2.9.10 the stream created last before two servers were SIGKILLed came back
    // with no copy running on them, for good (1 run in 8; their cluster state had no entry for it,
    // as nats-server pull request 5946 describes). A server bug this test is not about: the last
    // stream created before the servers are lost is one nobody reads.
    await (
      await manager(admin)
    ).streams.add({
      name: `${prefix}_LAST`,
      subjects: [`${prefix}.last`],
      storage: StorageType.Memory,
      num_replicas: 1,
    });
    await admin.close();
    logDir = await mkdtemp(join(tmpdir(), "quorum-"));
    cluster = new LocalCluster({
      natsUrl: "",
      useConfUsers: false,
      logDir,
      // JetStream silent for 5 s, not 15 s, is said (and /readyz unready): the quorum lost here is.
      env: { AGENTS_PREFIX: prefix, AGENTS_REPLICAS: "3", JETSTREAM_SILENT_MS: "5000" },
      readyTimeoutMs: 90_000,
    });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop(5_000);
    await nats?.stop();
    if (logDir) await rm(logDir, { recursive: true, force: true });
  }, 30_000);

  it("agentctl says BUS_UNAVAILABLE naming the quorum after its wait, and an actor started meanwhile waits for JetStream instead of exiting, then starts", async () => {
    await loseQuorum();
    // The supervisor starts while agentctl waits (both on the survivor): two waits at once, not in turn.
    const supervisor = cluster.start("supervisor", "supervisor", { NATS_URL: survivor() });
    let waitingSince = 0;
    const waiting = until(
      async () => (await supervisorLog()).includes("its JetStream does not yet: waiting for it"),
      20_000,
      { what: "the supervisor waiting for JetStream" },
    ).then(() => (waitingSince = Date.now()));
    // Both awaited below: either failing meanwhile fails the test there, not as an unhandled rejection.
    supervisor.catch(() => undefined);
    waiting.catch(() => undefined);
    const started = Date.now();
    const failed = await runProcess(process.execPath, [actorEntry("cli"), "runs"], {
      env: {
        ...process.env,
        // The default AGENTS_REPLICAS (1), as an operator's shell has it: a stream's info that
        // timed out was taken for a missing stream, and the create that followed answered INTERNAL.
        NATS_URL: survivor(),
        AGENTS_PREFIX: prefix,
        AGENTCTL_WAIT_MS: "3000",
      },
    }).then(
      () => ({ code: 0, stderr: "" }),
      (err: { code: number; stderr: string }) => err,
    );
    // Its wait, and at most one question's timeout after it: not hung, not 'INTERNAL: timeout'.
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(failed.code).toBe(2);
    expect(failed.stderr).toContain("its JetStream does not yet: waiting up to 3000 ms");
    const printed = JSON.parse(failed.stderr.trim().split("\n").at(-1) ?? "{}") as {
      error?: { code: string; message: string };
    };
    expect(printed.error?.code).toBe("BUS_UNAVAILABLE");
    expect(printed.error?.message).toMatch(/answers, its JetStream does not .*quorum/);

    await waiting;
    // Still waiting 3 s after it said so (some of them spent while agentctl waited), not exited.
    const exited = await Promise.race([
      cluster.actors.get("supervisor")?.exited,
      systemClock.sleep(Math.max(0, waitingSince + 3_000 - Date.now())).then(() => "running"),
    ]);
    expect(exited).toBe("running");
    await regainQuorum();
    await supervisor;
    expect(await readyz()).toBe(200);
  }, 120_000);

  it("a running actor whose JetStream loses its quorum says so once and is not ready; with the quorum back it is ready again", async () => {
    expect(await answering()).toBe("1");
    await loseQuorum();
    // Both, not one after the other: an actor whose connection had moved to a server killed here
    // (it learns the cluster's other servers) is briefly unready while it reconnects to the survivor.
    await until(async () => (await readyz()) === 503 && (await answering()) === "0", 40_000, {
      what: "/readyz 503 and agents_jetstream_answering 0",
      everyMs: 500,
    });
    const said = (await supervisorLog())
      .split("\n")
      .filter((l) => l.includes("JetStream has not answered for"));
    expect(said).toHaveLength(1);
    expect(said[0]).toContain('"level":50');
    // Its connection is up all along: this is JetStream's silence, not the server's.
    expect(cluster.actors.get("supervisor")?.child.exitCode).toBeNull();

    await regainQuorum();
    await until(async () => (await readyz()) === 200, 60_000, { what: "/readyz 200", everyMs: 500 });
    expect(await answering()).toBe("1");
    expect(await supervisorLog()).toContain("JetStream answers again");
  }, 150_000);

  it("an agentctl or actor provisioning with fewer replicas than the streams and buckets have leaves them as they are", async () => {
    await runProcess(process.execPath, [actorEntry("cli"), "runs"], {
      env: { ...process.env, NATS_URL: nats.urls, AGENTS_PREFIX: prefix, AGENTS_REPLICAS: "1" },
    });
    expect(await replicasOf(new Subjects(prefix))).toEqual(everyStream(new Subjects(prefix), 3));
  }, 60_000);

  it("a cluster moved from one replica to three: its streams and buckets are raised, their data kept; five copies on three servers are refused in words that say so", async () => {
    const moved = new Subjects(`${prefix}m`);
    const admin = await connect({ servers: nats.urls.split(",") });
    try {
      await provision(admin, { subjects: moved, replicas: 1 });
      const claims = await new Kvm(admin).open(moved.buckets().idempotency);
      await claims.put("claim-1", "running");

      const raised = await provision(admin, { subjects: moved, replicas: 3 });
      expect(new Set([...Object.values(raised.streams), ...Object.values(raised.buckets)])).toEqual(
        new Set(["updated"]),
      );
      expect(await replicasOf(moved)).toEqual(everyStream(moved, 3));
      // A stream whose replicas change elects its leader again: read once it answers.
      let read: string | undefined;
      await until(
        async () => {
          read = (await claims.get("claim-1").catch(() => undefined))?.string();
          return read !== undefined;
        },
        30_000,
        { what: "the claim read back", everyMs: 250 },
      );
      expect(read).toBe("running");

      const again = await provision(admin, { subjects: moved, replicas: 1 });
      expect(new Set([...Object.values(again.streams), ...Object.values(again.buckets)])).toEqual(
        new Set(["unchanged"]),
      );
      expect(again.notes.filter((note) => note.includes("kept 3"))).toHaveLength(moved.storeStreams().length);
      expect(await replicasOf(moved)).toEqual(everyStream(moved, 3));

      // A bucket missing (new in a build, or said missing by a cluster in trouble) is created with
      // the replicas its siblings have, not with the one copy a default AGENTS_REPLICAS asks for.
      const memory = bucketStream(moved.buckets().memory);
      await (await manager(admin)).streams.delete(memory);
      const recreated = await provision(admin, { subjects: moved, replicas: 1 });
      expect(recreated.buckets[moved.buckets().memory]).toBe("created");
      expect(recreated.notes).toContain(
        `stream ${memory} was missing and AGENTS_REPLICAS is 1: created with 3 replicas, as the other streams and buckets have`,
      );
      expect(await replicasOf(moved)).toEqual(everyStream(moved, 3));

      // Five copies on three servers: neither raised nor created, and said in those words.
      const five =
        /^the JetStream cluster cannot place 5 copies of stream \S+ \(no suitable peers for placement\): fewer than 5 of its servers are up, or AGENTS_REPLICAS is above/;
      const raise = await provision(admin, { subjects: moved, replicas: 5 }).catch((err: unknown) => err);
      expect(raise).toMatchObject({ code: "BUS_UNAVAILABLE" });
      expect((raise as Error).message).toMatch(five);
      expect(await replicasOf(moved)).toEqual(everyStream(moved, 3));
      const fresh = new Subjects(`${prefix}f`);
      const create = await provision(admin, { subjects: fresh, replicas: 5 }).catch((err: unknown) => err);
      expect(create).toMatchObject({ code: "BUS_UNAVAILABLE" });
      expect((create as Error).message).toMatch(five);
      expect(await streamInfoIfAny(await manager(admin), fresh.streams().runs)).toBeUndefined();
    } finally {
      await admin.close();
    }
  }, 60_000);

  it("agentctl cluster and the supervisor's gauges name the copies a lost server held (exit code 1), and are healthy once it is back", async () => {
    // Only a supervisor runs here: no critic is expected (--no-critic), and no run has listed a tool.
    const report = async (): Promise<{ code: number; health: ClusterHealth }> => {
      const done = await runProcess(
        process.execPath,
        [actorEntry("cli"), "cluster", "--json", "--no-critic"],
        {
          env: { ...process.env, NATS_URL: nats.urls, AGENTS_PREFIX: prefix, AGENTS_REPLICAS: "3" },
        },
      ).then(
        (ok) => ({ code: 0, stdout: ok.stdout, stderr: ok.stderr }),
        (err: unknown) => err as { code: number; stdout: string; stderr: string },
      );
      if (!done.stdout) throw new Error(`agentctl cluster printed no report: ${done.stderr}`);
      return { code: done.code, health: JSON.parse(done.stdout) as ClusterHealth };
    };
    /** Reports until one exits 0 (within a minute); a timeout says what the last one named. */
    const untilHealthy = async (what: string): Promise<{ code: number; health: ClusterHealth }> => {
      let last: { code: number; health: ClusterHealth } | undefined;
      await until(
        async () => {
          last = await report();
          return last.code === 0;
        },
        60_000,
        {
          what: () =>
            `${what} (the last report, exit ${String(last?.code)}: ${JSON.stringify(last?.health.problems)})`,
          everyMs: 1_000,
        },
      );
      return last!;
    };
    // The cases before restarted two servers: their copies may still be catching up (not current).
    const healthy = await untilHealthy("a healthy cluster before one server is lost");
    expect(healthy.code).toBe(0);
    expect(healthy.health.problems).toEqual([]);
    expect(healthy.health.stores).toHaveLength(new Subjects().storeStreams().length);

    // The supervisor's gauges say the same: three replicas, three current copies, of each store.
    const log = new Subjects(prefix).streams().log;
    expect(await gauge("agents_store_replicas", log)).toBe("3");
    expect(await gauge("agents_store_copies_current", log)).toBe("3");

    const lost = nats.nodes[2];
    await lost?.kill();
    // Every store has a copy on the lost server (R3 on three servers): each is named.
    const everyCopyNamed = (health: ClusterHealth): boolean =>
      health.stores.every((store) =>
        health.problems.some(
          (problem) =>
            problem.startsWith(`${store.name}: its copy on ${lost?.name ?? ""} is`) &&
            /offline|not current/.test(problem),
        ),
      );
    let down: { code: number; health: ClusterHealth } | undefined;
    await until(
      async () => {
        down = await report();
        return everyCopyNamed(down.health);
      },
      40_000,
      { what: "a problem naming each store's copy on the lost server", everyMs: 1_000 },
    );
    expect(down?.code).toBe(1);
    expect(await gauge("agents_store_copies_current", log)).toBe("2");
    expect(await gauge("agents_store_replicas", log)).toBe("3");

    await lost?.start();
    await untilHealthy("healthy again");
    await until(async () => (await gauge("agents_store_copies_current", log)) === "3", 10_000, {
      what: "three current copies again",
      everyMs: 500,
    });
  }, 150_000);
});
