/**
 * The console's live feeds (server-sent events): a change of any run's status, and a run's status
 * with its progress at each step. The page reads the JSON views again when told.
 */
import { Hono, type Context } from "hono";
import { streamSSE, type SSEStreamingApi } from "hono/streaming";
import { KvWatchInclude } from "@nats-io/kv";
import type { ActorBus } from "../../../shared/bus/actor.js";
import { followRun } from "../../../shared/bus/run-progress.js";
import type { FeedLimit } from "../feed-limit.js";
import { consoleError } from "../http-error.js";
import { checkRunId } from "../reads.js";

/** A comment line every so often keeps proxies from closing a quiet feed. */
const KEEPALIVE_MS = 15_000;

type Feed = (stream: SSEStreamingApi) => Promise<void>;

/**
 * A feed within the limit, with its keepalive; its place is given back when it ends or its client
 * goes. A failure ends it with a structured `error` event, logged.
 */
function feed(c: Context, bus: ActorBus, limit: FeedLimit, body: Feed): Response {
  const leave = limit.enter();
  return streamSSE(
    c,
    async (stream) => {
      const keepalive = setInterval(
        () => void stream.write(": keepalive\n\n").catch(() => undefined),
        KEEPALIVE_MS,
      );
      stream.onAbort(() => {
        clearInterval(keepalive);
        leave();
      });
      try {
        await body(stream);
      } finally {
        clearInterval(keepalive);
        leave();
      }
    },
    async (err, stream) => {
      const error = consoleError(err);
      bus.logger.warn({ err: error, path: c.req.path }, "console live feed failed");
      await stream.writeSSE({ event: "error", data: JSON.stringify({ error: error.toBody() }) });
    },
  );
}

export function liveRoutes(bus: ActorBus, limit: FeedLimit): Hono {
  const app = new Hono();
  app.get("/runs", (c) =>
    feed(c, bus, limit, async (stream) => {
      // Registered before the watch starts: a client gone while it starts still stops it.
      const held: { watcher?: { stop(): void } } = {};
      stream.onAbort(() => held.watcher?.stop());
      const watcher = await bus.buckets.runs.watch({ include: KvWatchInclude.UpdatesOnly });
      held.watcher = watcher;
      if (stream.aborted) {
        watcher.stop();
        return;
      }
      await stream.writeSSE({ event: "ready", data: "{}" });
      for await (const entry of watcher) {
        await stream.writeSSE({ event: "change", data: JSON.stringify({ runId: entry.key }) });
      }
    }),
  );
  app.get("/runs/:runId", (c) => {
    const runId = checkRunId(c.req.param("runId"));
    return feed(c, bus, limit, async (stream) => {
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
