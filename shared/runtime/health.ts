import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { ActorMetrics } from "./metrics.js";

export interface HealthServer {
  port: number;
  close(): Promise<void>;
}

export interface HealthOptions {
  port: number;
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
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
