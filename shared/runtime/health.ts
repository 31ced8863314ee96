import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { AgentError } from "./errors.js";
import type { ActorMetrics } from "./metrics.js";

export interface HealthServer {
  port: number;
  /** The port asked for, when it was taken and a free one was used instead (see `fallback`). */
  movedFrom?: number;
  close(): Promise<void>;
}

export interface HealthOptions {
  port: number;
  /**
   * When `port` is taken, serve on a free port instead: the default port, which a second actor on
   * one machine finds taken by the first. A port chosen explicitly is refused instead.
   */
  fallback?: boolean;
  host: string;
  metrics: ActorMetrics;
  /** Whether the actor can do its work now (connected, streams and consumers bound). */
  ready: () => boolean;
}

/**
 * `/healthz` (the process is alive), `/readyz` (it can do its work) and `/metrics` (Prometheus),
 * on one small HTTP server per actor. Port 0 picks a free port (reported in `port`).
 */
export async function startHealthServer(options: HealthOptions): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
    } else if (path === "/readyz") {
      const ready = options.ready();
      res
        .writeHead(ready ? 200 : 503, { "content-type": "text/plain" })
        .end(ready ? "ready\n" : "not ready\n");
    } else if (path === "/metrics") {
      options.metrics.registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": options.metrics.registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    } else {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
    }
  });
  const listen = (port: number): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      // Left on once listening: a later error (an accept that fails) must not crash the actor.
      server.once("error", reject);
      server.listen(port, options.host, () => resolve());
    });
  let movedFrom: number | undefined;
  await listen(options.port).catch(async (err: unknown) => {
    if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE") throw err;
    if (!options.fallback)
      throw new AgentError(
        "INVALID_INPUT",
        `HEALTH_PORT ${options.port} is in use on ${options.host} (another actor on this machine?): set HEALTH_PORT to a free port, or 0 for any`,
        { cause: err },
      );
    movedFrom = options.port;
    await listen(0);
  });
  return {
    port: (server.address() as AddressInfo).port,
    ...(movedFrom === undefined ? {} : { movedFrom }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
