import { Writable } from "node:stream";
import { JetStreamApiError } from "@nats-io/jetstream";
import { errors } from "@nats-io/transport-node";
import { Gauge, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import {
  isJetStreamSilent,
  jetStreamSilent,
  whenJetStreamAnswers,
} from "../../shared/bus/jetstream-silent.js";
import {
  DEFAULT_JETSTREAM_WATCH,
  JetStreamWatch,
  jetStreamWatchFor,
} from "../../shared/bus/jetstream-watch.js";
import { InstantClock, ManualClock } from "../../shared/runtime/clock.js";
import { ActorEnv } from "../../shared/runtime/config.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { createLogger } from "../../shared/runtime/logger.js";

/** A watch asking a JetStream the test answers or not, with its log lines and gauge. */
function watched(): {
  watch: JetStreamWatch;
  clock: ManualClock;
  lines: { level: number; msg: string; silentMs?: number }[];
  gauge: Gauge;
  jetStream: { answers: boolean; connected: boolean; asked: number };
} {
  const clock = new ManualClock(0);
  const lines: { level: number; msg: string; silentMs?: number }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
      done();
    },
  });
  const gauge = new Gauge({ name: "answering", help: "h", registers: [new Registry()] });
  const jetStream = { answers: true, connected: true, asked: 0 };
  const watch = new JetStreamWatch(
    {
      clock,
      logger: createLogger({ actor: "test", destination: sink }),
      ask: () => {
        jetStream.asked++;
        return jetStream.answers ? Promise.resolve({}) : Promise.reject(new errors.TimeoutError());
      },
      connected: () => jetStream.connected,
      gauge,
    },
    { everyMs: 5_000, silentAfterMs: 15_000 },
  );
  return { watch, clock, lines, gauge, jetStream };
}

const gaugeValue = async (gauge: Gauge): Promise<number | undefined> => (await gauge.get()).values[0]?.value;

describe("a JetStream that stops answering while the connection is up", () => {
  it("is said once, as an error naming what to check, after 15 s of silence; not ready meanwhile; back, it is said again", async () => {
    const { watch, clock, lines, gauge, jetStream } = watched();
    await watch.check();
    expect(watch.answering()).toBe(true);
    expect(await gaugeValue(gauge)).toBe(1);

    jetStream.answers = false;
    for (let t = 5_000; t < 15_000; t += 5_000) {
      await clock.advance(5_000);
      await watch.check();
      // A leader election's few seconds are not an outage to page anyone for.
      expect(watch.answering()).toBe(true);
    }
    expect(lines).toEqual([]);
    await clock.advance(5_000);
    await watch.check();
    expect(watch.answering()).toBe(false);
    expect(await gaugeValue(gauge)).toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50, silentMs: 15_000 });
    expect(lines[0]?.msg).toMatch(/has not answered for 15 s.*quorum.*full disk/);
    await clock.advance(5_000);
    await watch.check();
    expect(lines).toHaveLength(1);

    jetStream.answers = true;
    await clock.advance(5_000);
    await watch.check();
    expect(watch.answering()).toBe(true);
    expect(await gaugeValue(gauge)).toBe(1);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ level: 30, msg: "JetStream answers again", silentMs: 25_000 });
  });

  it("is not asked while the connection is down, and counts its silence from the reconnection", async () => {
    const { watch, clock, lines, jetStream } = watched();
    jetStream.connected = false;
    jetStream.answers = false;
    for (let i = 0; i < 6; i++) {
      await clock.advance(5_000);
      await watch.check();
    }
    expect(jetStream.asked).toBe(0);
    jetStream.connected = true;
    await clock.advance(5_000);
    await watch.check();
    expect(watch.answering()).toBe(true);
    expect(lines).toEqual([]);
  });

  it("asks every everyMs until stopped", async () => {
    const { watch, clock, jetStream } = watched();
    // Each question's answer, and the sleep after it, are a few turns of the event loop away.
    const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
    const running = watch.run();
    await settle();
    expect(jetStream.asked).toBe(1);
    for (const asked of [2, 3]) {
      await clock.advance(5_000);
      await settle();
      expect(jetStream.asked).toBe(asked);
    }
    watch.stop();
    await running;
    await clock.advance(10_000);
    await settle();
    expect(jetStream.asked).toBe(3);
  });

  it("waits JETSTREAM_SILENT_MS (15 s unless set), asked three times in it and at most every 5 s", () => {
    expect(jetStreamWatchFor(ActorEnv.parse({}).JETSTREAM_SILENT_MS)).toEqual(DEFAULT_JETSTREAM_WATCH);
    expect(jetStreamWatchFor(ActorEnv.parse({ JETSTREAM_SILENT_MS: "3000" }).JETSTREAM_SILENT_MS)).toEqual({
      everyMs: 1_000,
      silentAfterMs: 3_000,
    });
    expect(jetStreamWatchFor(60_000)).toEqual({ everyMs: 5_000, silentAfterMs: 60_000 });
  });
});

describe("an error JetStream's silence caused", () => {
  it("is a timeout or 'temporarily unavailable', a few causes deep; told as BUS_UNAVAILABLE with what to check", () => {
    const unavailable = new JetStreamApiError({
      code: 503,
      err_code: 10008,
      description: "JetStream system temporarily unavailable",
    });
    expect(isJetStreamSilent(new errors.TimeoutError())).toBe(true);
    expect(isJetStreamSilent(unavailable)).toBe(true);
    expect(isJetStreamSilent(new Error("reading", { cause: new errors.TimeoutError() }))).toBe(true);
    expect(
      isJetStreamSilent(
        new JetStreamApiError({ code: 404, err_code: 10059, description: "stream not found" }),
      ),
    ).toBe(false);
    expect(isJetStreamSilent(new Error("timeout"))).toBe(false);
    const told = jetStreamSilent("the command", unavailable, "127.0.0.1:4222");
    expect(told).toMatchObject({ code: "BUS_UNAVAILABLE", retryable: true, cause: unavailable });
    expect(told?.message).toMatch(
      /^the command: the NATS server at 127.0.0.1:4222 answers, its JetStream does not/,
    );
    // An error that says its own code already is left as it is.
    expect(
      jetStreamSilent("x", new AgentError("BUS_UNAVAILABLE", "y", { cause: unavailable }), "s"),
    ).toBeUndefined();
  });
});

describe("an actor's setup on a JetStream that does not answer", () => {
  const nc = { getServer: (): string => "127.0.0.1:4222" };
  const lines: string[] = [];
  const logger = createLogger({
    actor: "test",
    destination: new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    }),
  });

  it("is asked again every second until JetStream answers, said once; another error is thrown at once", async () => {
    const clock = new InstantClock(0);
    let asked = 0;
    const bound = await whenJetStreamAnswers("the consumer", { clock, logger, nc }, () => {
      asked++;
      return asked < 5 ? Promise.reject(new errors.TimeoutError()) : Promise.resolve("bound");
    });
    expect(bound).toBe("bound");
    expect(clock.now()).toBe(4_000);
    expect(
      lines.filter((l) => l.includes("the consumer: the NATS server answers, its JetStream does not yet")),
    ).toHaveLength(1);

    const refused = new JetStreamApiError({
      code: 400,
      err_code: 10013,
      description: "consumer name already in use",
    });
    let tries = 0;
    const failed = await whenJetStreamAnswers("the consumer", { clock, logger, nc }, () => {
      tries++;
      return Promise.reject(refused);
    }).catch((err: unknown) => err);
    expect(failed).toBe(refused);
    expect(tries).toBe(1);
  });

  it("gives up after its wait with BUS_UNAVAILABLE saying what to check", async () => {
    const clock = new InstantClock(0);
    const failed = await whenJetStreamAnswers(
      "the consumer",
      { clock, logger, nc },
      () => Promise.reject(new errors.TimeoutError()),
      { waitMs: 10_000 },
    ).catch((err: unknown) => err);
    expect(failed).toMatchObject({ code: "BUS_UNAVAILABLE" });
    expect((failed as Error).message).toMatch(
      /^the consumer \(waited 10000 ms\): .*answers, its JetStream does not.*quorum/,
    );
    expect(clock.now()).toBe(10_000);
  });
});
