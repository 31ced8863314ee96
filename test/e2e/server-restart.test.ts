import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ClusterClient } from "../../services/cli/client.js";
import { linkOf } from "../../shared/bus/link.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { serveModel } from "../../shared/bus/model-actor.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import {
  chargeTool,
  expectChargesInTrail,
  payingActorRun,
  payingPlanner,
  payingRun,
  serveFromTest,
  settled,
  useClusterSuite,
} from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { connectRetrying } from "../helpers/nats-server.js";
import { until } from "../helpers/until.js";

const RUNS = 8;
const PAYMENTS = 6;
const PAYMENT_MS = 200;
/** Runs submitted around the restart: fewer than the 16 the suite's pool holds. */
const SUBMITS = 14;

/**
 * The only nats-server is killed with SIGKILL while runs pay, and started again on the same store
 * (a pod restarted; its volume kept). What it acknowledged is on disk; every actor reconnects, and
 * the workers renew the jobs they held across the restart.
 */
const suite = useClusterSuite("server-restart", {
  own: true,
  // Two supervisor replicas, as deployed: a submit sent again after the restart may reach the one
  // that did not get its first copy.
  actors: [
    { kind: "supervisor", name: "supervisor-1" },
    { kind: "supervisor", name: "supervisor-2" },
    { kind: "agent", name: "agent-1" },
    { kind: "agent", name: "agent-2" },
  ],
});

/** How long a model actor's turn takes: the restart comes while every run's turn is in flight. */
const TURN_MS = 1_000;

let payments: NatsConnection | undefined;
let executions: Map<string, number>;
beforeAll(async () => {
  executions = await servePay();
});
afterAll(async () => {
  await payments?.close();
});

/** A connection that retries every 50 ms: back before the workers (which retry every second). */
function fastConnection(): Promise<NatsConnection> {
  return connectRetrying(suite.server, 50);
}

/**
 * The payment service, on a connection of its own (see fastConnection), so the workers' calls
 * after the restart find it serving.
 */
async function servePay(): Promise<Map<string, number>> {
  const { bus } = suite;
  payments = await fastConnection();
  const idempotency = await new Kvm(payments).open(bus.subjects.buckets().idempotency);
  const { tool, executions } = chargeTool(PAYMENT_MS, "pay");
  serveFromTest(tool, { nc: payments, subjects: bus.subjects, idempotency });
  await payments.flush();
  return executions;
}

describe("the nats-server killed and restarted on its store while runs pay", () => {
  // Down past a payment's end, so outcomes are known while it is; and down longer than the 15 s a
  // WAL append or an audit publish retries for.
  it.each([2_000, 20_000])(
    "down %i ms: every run commits within seconds of the restart, every payment happens once and is known to its run, every audit trail is gapless",
    async (downMs) => {
      executions.clear();
      const runIds: string[] = [];
      for (let run = 0; run < RUNS; run += 1) {
        runIds.push((await suite.client.submit(payingRun("pay", PAYMENTS, `paid run ${run}`))).runId);
      }
      await systemClock.sleep(3 * PAYMENT_MS);
      expect(executions.size).toBeGreaterThan(0);
      expect(executions.size).toBeLessThan(RUNS * PAYMENTS);
      await suite.server.restart?.({ downMs });
      const backAt = Date.now();
      // The test's own connection reconnects once a second, like the actors'.
      while (!linkOf(suite.bus.nc).connected()) await systemClock.sleep(50);

      const statuses = await Promise.all(runIds.map((id) => suite.waitFor(id, settled, 30_000)));
      // Within seconds, not a tool's timeout: no call waits on a reply the reconnect lost.
      expect(Date.now() - backAt).toBeLessThan(20_000);
      expect([...executions.values()].every((n) => n === 1)).toBe(true);
      for (const [i, runId] of runIds.entries()) {
        expect(statuses[i], runId).toMatchObject({
          status: "committed",
          terminal: { output: `paid run ${i}` },
        });
        await expectChargesInTrail(suite, runId, "pay", executions);
      }
      // The payment service was back first: no call found it missing.
      expect(executions.size).toBe(RUNS * PAYMENTS);
    },
    90_000,
  );

  it("down 2000 ms while every run waits on a model actor's turn: the turns whose replies were lost are asked again, and every run commits with its answer", async () => {
    const name = "planner";
    // No payment: each run's first turn is its answer.
    const planner = payingPlanner("pay", 0, (prompt) => `answered ${prompt}`, TURN_MS);
    const modelNc = await fastConnection();
    const model = serveModel(name, planner.complete, {
      nc: modelNc,
      subjects: suite.bus.subjects,
      logger: silentLogger,
    });
    await modelNc.flush();
    try {
      const runIds: string[] = [];
      for (let run = 0; run < RUNS; run += 1)
        runIds.push((await suite.client.submit(payingActorRun("pay", 0, name, `question ${run}`))).runId);
      await until(() => planner.asked.size === RUNS, 10_000, { what: "every run's turn asked" });
      await suite.server.restart?.({ downMs: 2_000 });
      while (!linkOf(suite.bus.nc).connected()) await systemClock.sleep(50);
      const statuses = await Promise.all(runIds.map((id) => suite.waitFor(id, settled, 30_000)));
      // Before, a turn whose reply the restart lost failed its run (modelError).
      for (const [i, runId] of runIds.entries())
        expect(
          statuses[i],
          `${runId}: ${statuses[i]?.terminal?.kind} ${statuses[i]?.terminal?.reason}`,
        ).toMatchObject({
          status: "committed",
          terminal: { output: `answered question ${i}` },
        });
      // Some turn was in flight at the restart and asked again.
      expect(Math.max(...planner.asked.values())).toBeGreaterThan(1);
    } finally {
      model.unsubscribe();
      await modelNc.close();
    }
  }, 60_000);

  it("down 2000 ms while runs are being submitted: each submit made meanwhile waits for the server and is admitted, its run commits once, and the pool ends empty", async () => {
    executions.clear();
    // As agentctl submits: waiting for the cluster when it does not answer (AGENTCTL_WAIT_MS).
    const client = new ClusterClient(suite.bus, {
      waitMs: 10_000,
      clock: systemClock,
      random: seededRandom(9),
    });
    const startedAt = Date.now();
    // Submits 80 ms apart for 1.1 s; the server dies 300 ms in, so most are sent while it is down.
    const restarted = systemClock.sleep(300).then(() => suite.server.restart?.({ downMs: 2_000 }));
    const replies = await Promise.all(
      Array.from({ length: SUBMITS }, async (_, i) => {
        await systemClock.sleep(i * 80);
        const sentAt = Date.now() - startedAt;
        const reply = await client.submit({
          ...payingRun("pay", 2, `submitted ${i}`),
          runId: `submitted-${i}`,
        });
        return { ...reply, sentAt };
      }),
    );
    await restarted;
    // Some were sent while the server was down (after the kill, before it was back).
    expect(replies.filter((r) => r.sentAt > 400 && r.sentAt < 2_000).length).toBeGreaterThan(5);
    // One in flight at the kill is asked again and answered "existing": its run is admitted all the same.
    expect(replies.every((r) => r.status === "admitted" || r.status === "existing")).toBe(true);
    while (!linkOf(suite.bus.nc).connected()) await systemClock.sleep(50);
    const statuses = await Promise.all(replies.map((r) => suite.waitFor(r.runId, settled, 30_000)));
    for (const [i, { runId }] of replies.entries()) {
      expect(statuses[i], runId).toMatchObject({
        status: "committed",
        terminal: { output: `submitted ${i}` },
      });
      const events = await expectChargesInTrail(suite, runId, "pay", executions);
      // Admitted once, never refused on the way.
      expect(
        events.filter((e) => e.kind === "run.admitted" || e.kind === "run.rejected").map((e) => e.kind),
        runId,
      ).toEqual(["run.admitted"]);
    }
    expect([...executions.values()].every((n) => n === 1)).toBe(true);
    expect(executions.size).toBe(SUBMITS * 2);
    // Every slot an admission took is given back once its run commits.
    const pool = PoolLedger.of(suite.bus);
    await until(async () => (await pool.active()).length === 0, 10_000, { what: "every pool slot released" });
  }, 60_000);

  it("a run awaiting approval and a halted one keep their places across a server restart and new supervisors; approve and resume finish both", async () => {
    const asking = (text: string) => spec({ requiresApproval: true, script: [{ text }] });
    const waiting = await suite.client.submit(asking("approved answer"));
    const halted = await suite.client.submit(asking("resumed answer"));
    const awaiting = (s: { status: string }): boolean => s.status === "awaiting_approval";
    for (const { runId } of [waiting, halted]) await suite.waitFor(runId, awaiting, 10_000);
    await suite.client.halt({ runId: halted.runId, by: "oncall", reason: "hold it" });
    await suite.waitFor(halted.runId, (s) => s.status === "halted", 10_000);

    await suite.server.restart?.({ downMs: 2_000 });
    for (const name of ["supervisor-1", "supervisor-2"]) suite.cluster.signal(name, "SIGKILL");
    while (!linkOf(suite.bus.nc).connected()) await systemClock.sleep(50);
    await suite.cluster.start("supervisor", "supervisor-3");

    expect((await suite.waitFor(waiting.runId, awaiting, 10_000)).status).toBe("awaiting_approval");
    await suite.client.decide(waiting.runId, { decision: "approve", by: "alice" });
    await suite.client.resume({ runId: halted.runId, by: "oncall" });
    await suite.waitFor(halted.runId, awaiting, 10_000);
    await suite.client.decide(halted.runId, { decision: "approve", by: "alice" });
    for (const [run, output] of [
      [waiting, "approved answer"],
      [halted, "resumed answer"],
    ] as const) {
      expect(await suite.waitFor(run.runId, settled, 20_000)).toMatchObject({
        status: "committed",
        terminal: { output },
      });
      const trail = await suite.audit(run.runId);
      expect(trail.map((e) => e.seq)).toEqual(trail.map((_, i) => i + 1));
      expect(trail.filter((e) => e.kind === "approval.decided")).toHaveLength(1);
    }
    const kinds = (await suite.audit(halted.runId)).map((e) => e.kind);
    expect(kinds.filter((k) => k === "run.halted" || k === "run.resumed")).toEqual([
      "run.halted",
      "run.resumed",
    ]);
  }, 60_000);
});
