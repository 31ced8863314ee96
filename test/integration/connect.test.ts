import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { connectBus, logStatus, serverVersion } from "../../shared/bus/connect.js";
import { createLogger } from "../../shared/runtime/logger.js";
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
});
