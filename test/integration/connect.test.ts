import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { connectBus, logStatus } from "../../shared/bus/connect.js";
import { serverVersion } from "../../shared/bus/server-version.js";
import { createLogger } from "../../shared/runtime/logger.js";
import { NATS_CONF } from "../../services/local/ensure-nats.js";
import { startNats } from "../helpers/nats-server.js";

function captured() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { lines, logger: createLogger({ actor: "agent", destination: sink, level: "debug" }) };
}

describe("connection helper", () => {
  it("logs a clear line when the server goes away, and keeps trying to reconnect", async () => {
    // A server of its own even when NATS_URL is set: this test stops it.
    const server = await startNats({ own: true });
    expect(server.source).toBe("binary");
    const { lines, logger } = captured();
    const nc = await connectBus({ servers: server.url, name: "connect-test", logger });
    expect(serverVersion(nc)[0]).toBe(2);
    await server.stop();
    for (let i = 0; i < 50 && !lines.some((l) => l.msg === "disconnected from NATS; reconnecting"); i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(lines.find((l) => l.msg === "disconnected from NATS; reconnecting")).toMatchObject({
      level: 40,
      actor: "agent",
    });
    expect(nc.isClosed()).toBe(false);
    await nc.close();
  });

  it("maps every status kind to a log level", () => {
    const { lines, logger } = captured();
    logStatus(logger, { type: "reconnect", server: "s1" });
    logStatus(logger, { type: "slowConsumer", sub: "x", pending: 1 } as never);
    logStatus(logger, { type: "reconnecting" } as never);
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [30, "reconnected to NATS"],
      [40, "NATS slowConsumer"],
      [20, "NATS status"],
    ]);
  });

  it("waits for a server that is not up yet, says so once, and connects when it comes", async () => {
    await using server = await startNats({ own: true });
    const restarted = server.restart?.({ downMs: 2_000 });
    // The server is down now (its port refuses) and comes back on the same port in 2 s.
    await new Promise((r) => setTimeout(r, 300));
    const { lines, logger } = captured();
    const waits: string[] = [];
    const began = Date.now();
    const nc = await connectBus({
      servers: server.url,
      name: "connect-wait",
      logger,
      waitMs: 15_000,
      onWait: (err) => waits.push(err.message),
    });
    expect(Date.now() - began).toBeGreaterThan(1_000);
    expect(waits).toEqual([expect.stringMatching(/refused/)]);
    expect(lines.filter((l) => l.msg === "no NATS server answers yet: waiting for one")).toHaveLength(1);
    await nc.close();
    await restarted;
  });

  it("gives up with BUS_UNAVAILABLE after the wait; with none, at once", async () => {
    await using server = await startNats({ own: true });
    await server.stop();
    const { logger } = captured();
    const attempt = async (waitMs: number) => {
      const began = Date.now();
      const error = await connectBus({ servers: server.url, name: "connect-none", logger, waitMs }).then(
        () => undefined,
        (err: unknown) => err,
      );
      return { error, ms: Date.now() - began };
    };
    const waited = await attempt(1_500);
    expect(waited.error).toMatchObject({ code: "BUS_UNAVAILABLE", retryable: true });
    expect(waited.ms).toBeGreaterThanOrEqual(1_400);
    const once = await attempt(0);
    expect(once.error).toMatchObject({ code: "BUS_UNAVAILABLE" });
    expect(once.ms).toBeLessThan(1_000);
  });

  it("does not wait for a server that answers and refuses the credentials: BUS_AUTH names the fix", async () => {
    await using server = await startNats({ configFile: NATS_CONF });
    const { logger } = captured();
    const began = Date.now();
    const error = await connectBus({
      servers: server.url,
      name: "connect-denied",
      logger,
      user: "cli",
      pass: "not-the-password",
      waitMs: 10_000,
    }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(Date.now() - began).toBeLessThan(3_000);
    // Its own code, naming who was refused and what to set.
    expect(error).toMatchObject({
      code: "BUS_AUTH",
      retryable: false,
      message: expect.stringMatching(
        new RegExp(`^the NATS server at ${server.url} refused user 'cli': set NATS_USER and NATS_PASSWORD`),
      ) as string,
    });
  });
});
