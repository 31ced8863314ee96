import { connect as tcpConnect, createServer, type Socket } from "node:net";
import type { NatsConnection } from "@nats-io/transport-node";
import { connectRetrying, type TestNats } from "./nats-server.js";

/**
 * A TCP proxy on 127.0.0.1 in front of a NATS server, for one client connection's faults the server
 * itself cannot stage: it cuts its clients the moment one sends a marker (the server gets what
 * was sent, the client never hears back: an ack lost), and refuses clients until told otherwise.
 */
export interface CuttingProxy {
  url: string;
  /**
   * Resolves when a client sent `marker`: that client is cut and new clients are refused. What it
   * sent with the marker reaches the server unless `forward` is false (the message lost).
   */
  cutOn(marker: string, options?: { forward?: boolean }): Promise<void>;
  /** Lets clients connect again. */
  admit(): void;
  close(): Promise<void>;
}

export async function startCuttingProxy(target: string): Promise<CuttingProxy> {
  const { hostname, port } = new URL(target.includes("://") ? target : `nats://${target}`);
  let refusing = false;
  let cut: { marker: string; forward: boolean; done: () => void } | undefined;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = tcpConnect(Number(port), hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => undefined);
    }
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    upstream.on("data", (chunk) => client.write(chunk));
    client.on("data", (chunk: Buffer) => {
      const armed = cut;
      if (!armed || !chunk.toString("latin1").includes(armed.marker)) {
        upstream.write(chunk);
        return;
      }
      if (armed.forward) upstream.write(chunk);
      cut = undefined;
      refusing = true;
      // The server reads what was written before it sees the close: it acts on a message
      // forwarded, and its answer goes nowhere.
      upstream.removeAllListeners("data");
      client.destroy();
      setTimeout(() => upstream.destroy(), 200);
      armed.done();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("the proxy has no port");
  return {
    url: `nats://127.0.0.1:${address.port}`,
    cutOn: (marker, options) =>
      new Promise<void>((resolve) => (cut = { marker, forward: options?.forward ?? true, done: resolve })),
    admit: () => {
      refusing = false;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A client of `server` through `proxy`, back within 100 ms of being admitted again. */
export function connectThrough(proxy: CuttingProxy, server: TestNats): Promise<NatsConnection> {
  return connectRetrying(server, 100, proxy.url);
}

/**
 * A client of `server` through a proxy that cuts it the moment it sends `marker` (the server gets
 * the message, the client never hears back) and lets it back `backAfterMs` later: `work` gets the
 * connection and returns what to do across the cut, which is started, cut, and awaited.
 */
export async function acrossCut<T>(
  server: TestNats,
  marker: string,
  work: (nc: NatsConnection) => Promise<() => Promise<T>>,
  backAfterMs = 1_000,
): Promise<T> {
  const proxy = await startCuttingProxy(server.url);
  const nc = await connectThrough(proxy, server);
  try {
    const act = await work(nc);
    const cut = proxy.cutOn(marker);
    const done = act();
    await cut;
    await new Promise((resolve) => setTimeout(resolve, backAfterMs));
    proxy.admit();
    return await done;
  } finally {
    await nc.close();
    await proxy.close();
  }
}
