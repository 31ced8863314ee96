import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startLocalNats } from "../../services/local/nats-server.js";

export interface TestNats {
  url: string;
  /** Credentials the server wants (a container's), if any. */
  user?: string;
  pass?: string;
  /** Where the server came from: an external NATS_URL, a container, or a binary this suite started. */
  source: "env" | "container" | "binary";
  /** A server this suite started itself (`own`): crash it and start it again on the same store. */
  restart?: (options?: { signal?: NodeJS.Signals; downMs?: number }) => Promise<void>;
  /** A server this suite started itself: its JetStream store directory. */
  storeDir?: string;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

const CONTAINER_IMAGE = "nats:2.15.1-alpine";

/**
 * A real nats-server for one suite, found in this order: NATS_URL when set (the caller isolates
 * itself with its own prefix); a container from testcontainers when a Docker engine answered the
 * global setup's probe; else the `nats-server` binary on 127.0.0.1 with `-p -1` and its own store
 * directory, its port read from its log. `own` and `configFile` always start a binary (for tests
 * that stop the server or need nats.conf).
 */
export async function startNats(options: { own?: boolean; configFile?: string } = {}): Promise<TestNats> {
  const mine = Boolean(options.own || options.configFile);
  const external = mine ? undefined : process.env.NATS_URL;
  if (external) {
    const stop = (): Promise<void> => Promise.resolve();
    return { url: external, source: "env", stop, [Symbol.asyncDispose]: stop };
  }
  if (!mine && process.env.TEST_NATS_CONTAINER === "1") {
    const container = await startContainer().catch(() => undefined);
    if (container) return container;
  }
  const local = await startLocalNats(options.configFile ? { configFile: options.configFile } : {});
  const stop = (): Promise<void> => local.stop();
  const restart: TestNats["restart"] = (options) => local.restart(options);
  return {
    url: local.url,
    source: "binary",
    restart,
    storeDir: local.storeDir,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

async function startContainer(): Promise<TestNats> {
  // Imported lazily: testcontainers is only loaded when an engine is known to answer.
  const { NatsContainer } = await import("@testcontainers/nats");
  const started = await new NatsContainer(CONTAINER_IMAGE).withJetStream().start();
  const stop = async (): Promise<void> => {
    await started.stop();
  };
  return {
    url: `nats://${started.getHost()}:${started.getMappedPort(4222)}`,
    ...(started.username ? { user: started.username } : {}),
    ...(started.password ? { pass: started.password } : {}),
    source: "container",
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/**
 * A client of `server`, at `url` (the server's own by default, or a proxy's in front of it), that
 * tries to reconnect every `reconnectMs` for ever: back before the actors, which wait a second.
 */
export function connectRetrying(
  server: TestNats,
  reconnectMs: number,
  url = server.url,
): Promise<NatsConnection> {
  return connect({
    servers: url,
    maxReconnectAttempts: -1,
    reconnectTimeWait: reconnectMs,
    reconnectJitter: 0,
    ...(server.user ? { user: server.user, pass: server.pass ?? "" } : {}),
  });
}
