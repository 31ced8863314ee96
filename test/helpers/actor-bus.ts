import { afterAll, beforeAll } from "vitest";
import { openActorBus, type ActorBus } from "../../shared/bus/actor.js";
import { systemClock, type Clock } from "../../shared/runtime/clock.js";
import { ActorEnv } from "../../shared/runtime/config.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom, type Random } from "../../shared/runtime/random.js";
import { startNats, type TestNats } from "./nats-server.js";

export interface ActorBusSuite {
  server: TestNats;
  /** Connected and provisioned under a prefix of the suite's own, as an actor's is. */
  bus: ActorBus;
}

/**
 * A real nats-server and an actor's bus on it for one suite (filled in beforeAll, closed afterAll),
 * for tests that drive the runtime's own modules rather than actor processes.
 */
export function useActorBus(name: string, deps: { clock?: Clock; random?: Random } = {}): ActorBusSuite {
  const suite = {} as ActorBusSuite;
  beforeAll(async () => {
    suite.server = await startNats();
    const { server } = suite;
    suite.bus = await openActorBus(
      ActorEnv.parse({
        NATS_URL: server.url,
        AGENTS_PREFIX: `${name}${process.pid}x${Date.now().toString(36)}`,
        ...(server.user ? { NATS_USER: server.user, NATS_PASSWORD: server.pass ?? "" } : {}),
      }),
      `${name}-test`,
      { clock: deps.clock ?? systemClock, random: deps.random ?? seededRandom(1), logger: silentLogger },
    );
  }, 30_000);
  afterAll(async () => {
    await suite.bus?.nc.drain();
    await suite.server?.stop();
  });
  return suite;
}
