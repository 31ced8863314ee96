/**
 * The console's live feeds (server-sent events): a change of any run's status, and a run's status
 * with its progress at each step. The page reads the JSON views again when told.
 */
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { KvWatchInclude } from "@nats-io/kv";
import type { ActorBus } from "../../../shared/bus/actor.js";
import { followRun } from "../../../shared/bus/run-progress.js";
import { checkRunId } from "../reads.js";

/** A comment line every so often keeps proxies from closing a quiet feed. */
const KEEPALIVE_MS = 15_000;

export function liveRoutes(bus: ActorBus): Hono {
  const app = new Hono();
  app.get("/runs", (c) =>
    streamSSE(c, async (stream) => {
      const watcher = await bus.buckets.runs.watch({ include: KvWatchInclude.UpdatesOnly });
      const keepalive = setInterval(() => void stream.write(": keepalive\n\n"), KEEPALIVE_MS);
      stream.onAbort(() => {
        clearInterval(keepalive);
        watcher.stop();
      });
      await stream.writeSSE({ event: "ready", data: "{}" });
      for await (const entry of watcher) {
        await stream.writeSSE({ event: "change", data: JSON.stringify({ runId: entry.key }) });
      }
      clearInterval(keepalive);
    }),
  );
  app.get("/runs/:runId", (c) => {
    const runId = checkRunId(c.req.param("runId"));
    return streamSSE(c, async (stream) => {
      const stop = new AbortController();
      stream.onAbort(() => stop.abort());
      await stream.writeSSE({ event: "ready", data: "{}" });
      for await (const status of followRun(bus, runId, stop.signal)) {
        await stream.writeSSE({ event: "status", data: JSON.stringify(status) });
      }
    });
  });
  return app;
}
