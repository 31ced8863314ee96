import { spawn } from "node:child_process";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { openActorBus, type ActorBus } from "../../shared/bus/actor.js";
import { WORKER_CONSUMER } from "../../shared/bus/jobs.js";
import { provision } from "../../shared/bus/provision.js";
import { Subjects } from "../../shared/bus/subjects.js";
import { readLog, type StoredRecord } from "../../shared/bus/run-log.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { ActorEnv } from "../../shared/runtime/config.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { defineTool } from "../../shared/tools/tool.js";
import { ClusterClient } from "../../services/cli/client.js";
import { LocalCluster } from "../../services/local/cluster.js";
import { serveFromTest, settled } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { startNatsCluster, type NatsCluster } from "../helpers/nats-cluster.js";
import { until } from "../helpers/until.js";

const RUNS = 6;
const STEPS = 4;
const SUBSCRIBER = fileURLToPath(new URL("../../examples/audit-subscriber.mjs", import.meta.url));
const prefix = `r3${process.pid}`;
const subjects = new Subjects(prefix);
const streams = subjects.streams();

/** A tool slow enough that the runs are mid-flight when a server dies. */
const slow = defineTool({
  name: "slow_lookup",
  description: "Looks something up, slowly.",
  input: z.object({ key: z.string() }),
  capability: { kind: "compute" },
  reversibility: "reversible",
  idempotent: true,
  // A reply lost in the failover is settled by this timeout (then a retry), not by waiting 2 min.
  timeoutMs: 3_000,
  execute: async (input) => {
    await systemClock.sleep(250);
    return { output: { value: `value of ${input.key}` } };
  },
});

/**
 * A real 3-node JetStream cluster on loopback with R3 streams and buckets: the server leading the
 * WAL stream is killed (SIGKILL) while runs are in progress. The runs commit, nothing acknowledged
 * is lost, the audit subscriber sees every seq, and the restarted node catches up.
 */
describe("a 3-node JetStream cluster loses a server mid-workload", () => {
  let nats: NatsCluster;
  let cluster: LocalCluster;
  let bus: ActorBus;
  let client: ClusterClient;

  beforeAll(async () => {
    nats = await startNatsCluster(3);
    // The cluster elects its JetStream meta leader after the routes connect: provision when it has.
    const admin = await connect({ servers: nats.urls.split(",") });
    for (let i = 0; ; i++) {
      try {
        await provision(admin, { subjects, replicas: 3 });
        break;
      } catch (err) {
        if (i >= 60) throw err;
        await systemClock.sleep(500);
      }
    }
    await admin.close();
    const env = {
      AGENTS_PREFIX: prefix,
      AGENTS_REPLICAS: "3",
      AGENT_ACK_WAIT_MS: "3000",
      AGENT_RETRY_DELAY_MS: "500",
      // The test waits for every run's status to show a tool call: status on every transition.
    };
    cluster = new LocalCluster({
      natsUrl: nats.urls,
      useConfUsers: false,
      logDir: await mkdtemp(join(tmpdir(), "r3-")),
      env,
    });
    await cluster.start("supervisor");
    await Promise.all([
      cluster.start("critic"),
      cluster.start("agent", "agent-1"),
      cluster.start("agent", "agent-2"),
    ]);
    bus = await openActorBus(ActorEnv.parse({ NATS_URL: nats.urls, ...env }), "r3-test", {
      clock: systemClock,
      random: systemRandom,
      logger: silentLogger,
    });
    serveFromTest(slow, { nc: bus.nc, subjects: bus.subjects, idempotency: bus.buckets.idempotency });
    client = new ClusterClient(bus);
  }, 90_000);
  afterAll(async () => {
    await cluster?.stop(5_000);
    await bus?.nc.close();
    await nats?.stop();
  }, 30_000);

  it("runs commit, no acknowledged WAL or audit record is lost, and the restarted node catches up", async () => {
    const subscriber = spawn(process.execPath, [SUBSCRIBER], {
      env: { ...process.env, NATS_URL: nats.urls, AGENTS_PREFIX: prefix, AUDIT_CONSUMER: "r3-audit" },
    });
    let seen = "";
    let gaps = "";
    subscriber.stdout.on("data", (chunk: Buffer) => (seen += chunk.toString()));
    subscriber.stderr.on("data", (chunk: Buffer) => (gaps += chunk.toString()));
    await until(() => gaps.includes("subscribed to"), 30_000, { everyMs: 200 });

    const script = [
      ...Array.from({ length: STEPS }, (_, i) => ({
        toolCalls: [{ name: "slow_lookup", input: { key: `k${i}` } }],
      })),
      { toolCalls: [{ name: "finish", input: { answer: "Looked everything up." } }] },
    ];
    const runIds: string[] = [];
    for (let i = 0; i < RUNS; i++) {
      const reply = await client.submit({
        ...spec({ script, tools: ["slow_lookup"] }),
        runId: `r3-run-${i}`,
      });
      runIds.push(reply.runId);
    }
    // Every run has done real work when the server dies.
    await Promise.all(
      runIds.map((id) => waitFor(client, id, (s) => s.usage.toolCalls >= 1 && s.status === "running")),
    );
    const before = new Map<string, { wal: StoredRecord[]; audit: AuditEvent[] }>();
    for (const id of runIds) {
      before.set(id, {
        wal: (await readLog(bus, id)).records,
        audit: await client.audit(id),
      });
    }
    const leader = (await bus.jsm.streams.info(streams.log)).cluster?.leader;
    const victim = nats.nodes.find((n) => n.name === leader);
    expect(victim, `log leader ${String(leader)}`).toBeDefined();
    await victim?.kill();

    for (const id of runIds) {
      const status = await waitFor(client, id, settled, 60_000).catch(async (err: unknown) => {
        const jobs = await bus.jsm.consumers.info(streams.runs, WORKER_CONSUMER).catch(String);
        throw new Error(`${(err as Error).message}; jobs consumer: ${JSON.stringify(jobs)}`);
      });
      expect(status, id).toMatchObject({ status: "committed" });
    }
    for (const id of runIds) {
      const wal = (await readLog(bus, id)).records;
      const audit = await client.audit(id);
      const earlier = before.get(id);
      // Everything acknowledged before the crash is still there, unchanged, at the same sequence.
      expect(wal.slice(0, earlier?.wal.length)).toEqual(earlier?.wal);
      expect(audit.slice(0, earlier?.audit.length)).toEqual(earlier?.audit);
      expect(audit.map((e) => e.seq)).toEqual(audit.map((_, i) => i + 1));
      expect(audit.at(-1)?.kind).toBe("run.committed");
      // Each call has an outcome; one whose reply the failover lost may end "in progress" (retryable).
      const outcomes = audit.filter((e) => e.kind === "tool.completed" || e.kind === "tool.aborted");
      expect(audit.filter((e) => e.kind === "tool.intent")).toHaveLength(STEPS);
      expect(outcomes).toHaveLength(STEPS);
    }

    // The subscriber (a durable consumer, reconnecting on its own) saw every seq of every run.
    const totals = new Map<string, number>();
    for (const id of runIds) totals.set(id, (await client.audit(id)).length);
    await until(
      () => {
        const got = seqsByRun(seen);
        return runIds.every((id) => got.get(id)?.size === totals.get(id));
      },
      40_000,
      { everyMs: 200 },
    ).catch((err: unknown) => {
      const got = [...seqsByRun(seen)].map(([id, seqs]) => `${id}: ${seqs.size}/${totals.get(id) ?? 0}`);
      throw new Error(`the subscriber saw ${got.join(", ")}; stderr: ${gaps}`, { cause: err });
    });
    subscriber.kill();
    const got = seqsByRun(seen);
    for (const id of runIds) {
      expect(
        [...(got.get(id) ?? [])].sort((a, b) => a - b),
        id,
      ).toEqual(Array.from({ length: totals.get(id) ?? 0 }, (_, i) => i + 1));
    }
    expect(gaps).not.toMatch(/GAP/);

    // The node comes back and catches up on every stream and bucket.
    await victim?.start();
    const names = subjects.storeStreams();
    const caughtUp = async (): Promise<boolean> => {
      for (const name of names) {
        // A stream still electing its leader answers nothing yet: not caught up.
        const info = await bus.jsm.streams.info(name).catch(() => undefined);
        const replica = info?.cluster?.replicas?.find((r) => r.name === victim?.name);
        const current =
          info?.cluster?.leader === victim?.name || (replica?.current === true && (replica.lag ?? 0) === 0);
        if (!current) return false;
      }
      return true;
    };
    await until(caughtUp, 30_000, { everyMs: 200 }).catch(async (err: unknown) => {
      const infos = await Promise.all(
        names.map((name) => bus.jsm.streams.info(name).then((i) => i.cluster, String)),
      );
      throw new Error(`${victim?.name} did not catch up: ${JSON.stringify(infos)}`, { cause: err });
    });
  }, 150_000);
});

async function waitFor(
  client: ClusterClient,
  runId: string,
  done: (s: { status: string; usage: { toolCalls: number } }) => boolean,
  timeoutMs = 30_000,
): Promise<unknown> {
  let last: unknown;
  await until(
    async () => {
      const status = await client.statusOf(runId).catch(() => undefined);
      last = status;
      return status !== undefined && done(status);
    },
    timeoutMs,
    { everyMs: 200 },
  ).catch((err: unknown) => {
    throw new Error(`run ${runId}: ${(err as Error).message} (last: ${JSON.stringify(last)})`);
  });
  return last;
}

function seqsByRun(output: string): Map<string, Set<number>> {
  const runs = new Map<string, Set<number>>();
  for (const line of output.split("\n")) {
    if (!line.startsWith("{")) continue;
    const event = JSON.parse(line) as { runId: string; seq: number };
    runs.set(event.runId, (runs.get(event.runId) ?? new Set()).add(event.seq));
  }
  return runs;
}
