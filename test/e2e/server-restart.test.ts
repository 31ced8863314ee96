import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { linkOf } from "../../shared/bus/link.js";
import { systemClock } from "../../shared/runtime/clock.js";
import {
  chargeTool,
  expectChargesInTrail,
  payingRun,
  serveFromTest,
  settled,
  useClusterSuite,
} from "../helpers/cluster-suite.js";
import { FAST_PRESENCE_ENV } from "../helpers/fake-worker.js";

const RUNS = 8;
const PAYMENTS = 6;
const PAYMENT_MS = 200;

/**
 * The only nats-server is killed with SIGKILL while runs pay, and started again on the same store
 * (a pod restarted; its volume kept). What it acknowledged is on disk; every actor reconnects. The
 * ack wait (60 s) is longer than the test allows for recovery.
 */
const suite = useClusterSuite("server-restart", {
  own: true,
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
  env: FAST_PRESENCE_ENV,
});

let payments: NatsConnection | undefined;
let executions: Map<string, number>;
beforeAll(async () => {
  executions = await servePay();
});
afterAll(async () => {
  await payments?.close();
});

/**
 * The payment service, on a connection of its own that retries every 50 ms: back before the
 * workers (which retry every second), so their calls after the restart find it serving.
 */
async function servePay(): Promise<Map<string, number>> {
  const { server, bus } = suite;
  payments = await connect({
    servers: server.url,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 50,
    reconnectJitter: 0,
    ...(server.user ? { user: server.user, pass: server.pass ?? "" } : {}),
  });
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
      // Before, a call sent while the client reconnected was dropped by it and waited out the tool's
      // timeout (2 minutes), and an outcome the tool service could not record left its claim running.
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
});
