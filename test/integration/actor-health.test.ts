import { describe, expect, it } from "vitest";
import { openActorBus, startActorHealth, type ActorBus } from "../../shared/bus/actor.js";
import { ActorEnv } from "../../shared/runtime/config.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { startHealthServer } from "../../shared/runtime/health.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { startNats } from "../helpers/nats-server.js";
import { until } from "../helpers/until.js";

async function get(port: number, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.text() };
}

describe("an actor's health endpoints", () => {
  it("answer /healthz always, /readyz as the actor says, /metrics from its registry, anything else 404", async () => {
    let ready = false;
    const metrics = new ActorMetrics("probe");
    metrics.steps.inc(3);
    const server = await startHealthServer({ port: 0, host: "127.0.0.1", metrics, ready: () => ready });
    try {
      expect(await get(server.port, "/healthz")).toEqual({ status: 200, body: "ok\n" });
      expect(await get(server.port, "/readyz")).toEqual({ status: 503, body: "not ready\n" });
      ready = true;
      // A probe's query string does not change the path.
      expect(await get(server.port, "/readyz?verbose=1")).toEqual({ status: 200, body: "ready\n" });
      const scraped = await get(server.port, "/metrics");
      expect(scraped.status).toBe(200);
      expect(scraped.body).toContain('agents_steps_total{actor="probe"} 3');
      expect((await get(server.port, "/")).status).toBe(404);
      expect((await get(server.port, "/metricsx")).status).toBe(404);
    } finally {
      await server.close();
    }
    await expect(fetch(`http://127.0.0.1:${server.port}/healthz`)).rejects.toThrow();
  });

  it("a taken port: the default one moves to a free port, a port chosen explicitly is refused naming HEALTH_PORT", async () => {
    const metrics = new ActorMetrics("probe");
    const first = await startHealthServer({ port: 0, host: "127.0.0.1", metrics, ready: () => true });
    const taken = first.port;
    const options = { port: taken, host: "127.0.0.1", metrics, ready: () => true };
    try {
      const second = await startHealthServer({ ...options, fallback: true });
      expect(second.movedFrom).toBe(taken);
      expect(second.port).not.toBe(taken);
      expect(await get(second.port, "/healthz")).toEqual({ status: 200, body: "ok\n" });
      await second.close();
      await expect(startHealthServer(options)).rejects.toMatchObject({
        code: "INVALID_INPUT",
        message: expect.stringMatching(
          new RegExp(`^HEALTH_PORT ${taken} is in use .*set HEALTH_PORT`),
        ) as string,
      });
    } finally {
      await first.close();
    }
  });

  it("are ready while the actor is connected to NATS with JetStream answering, not while its server is down, and ready again once it is back", async () => {
    const nats = await startNats({ own: true });
    const env = ActorEnv.parse({
      NATS_URL: nats.url,
      ...(nats.user ? { NATS_USER: nats.user, NATS_PASSWORD: nats.pass ?? "" } : {}),
      AGENTS_PREFIX: `health${process.pid}`,
      HEALTH_PORT: "0",
    });
    let bus: ActorBus | undefined;
    try {
      bus = await openActorBus(env, "health-test", {
        clock: systemClock,
        random: seededRandom(1),
        logger: silentLogger,
      });
      // What openActorBus provisioned is there, under the actor's prefix.
      const streams = await bus.jsm.streams.names().next();
      expect(streams).toEqual(expect.arrayContaining(bus.subjects.storeStreams()));
      await bus.buckets.toolState.put("k", "v");
      expect((await bus.buckets.toolState.get("k"))?.string()).toBe("v");

      let alsoReady = true;
      const metrics = new ActorMetrics("health-test");
      const health = await startActorHealth(bus, env, metrics, () => alsoReady);
      try {
        const readyz = async () => (await get(health.port, "/readyz")).status;
        expect(await readyz()).toBe(200);
        expect((await get(health.port, "/metrics")).body).toContain(
          'agents_jetstream_answering{actor="health-test"} 1',
        );
        alsoReady = false;
        expect(await readyz()).toBe(503);
        alsoReady = true;

        const restarting = nats.restart?.({ downMs: 4_000 });
        await until(async () => (await readyz()) === 503, 4_000, {
          what: "/readyz saying 503 while the server is down",
        });
        // Alive all along: the orchestrator must not restart an actor for its server's outage.
        expect((await get(health.port, "/healthz")).status).toBe(200);
        await restarting;
        await until(async () => (await readyz()) === 200, 10_000, {
          what: "/readyz saying 200 once the server is back",
        });
      } finally {
        await health.close();
      }
    } finally {
      await bus?.nc.close();
      await nats.stop();
    }
  }, 30_000);
});
