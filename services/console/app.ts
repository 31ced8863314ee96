/**
 * The console's HTTP application: its page's files, the read API and live feeds for whoever may
 * read, the operate API for whoever may operate, every refusal a structured error.
 */
import { Hono } from "hono";
import type { ActorBus } from "../../shared/bus/actor.js";
import { AgentError } from "../../shared/runtime/errors.js";
import type { ClusterClient } from "../cli/client.js";
import { accessOf, hostRefusal, operateRefusal, type AccessConfig } from "./access.js";
import type { FeedLimit } from "./feed-limit.js";
import { httpError } from "./http-error.js";
import type { ConsoleReads } from "./reads.js";
import { liveRoutes } from "./routes/live-routes.js";
import { operateRoutes } from "./routes/operate-routes.js";
import { readRoutes } from "./routes/read-routes.js";
import type { StaticFile } from "./static-files.js";

export interface ConsoleDeps {
  bus: ActorBus;
  reads: ConsoleReads;
  client: ClusterClient;
  access: AccessConfig;
  files: ReadonlyMap<string, StaticFile>;
  feeds: FeedLimit;
}

type Vars = { Variables: { operate: boolean } };

export function consoleApp(deps: ConsoleDeps): Hono<Vars> {
  const app = new Hono<Vars>();
  app.onError((err, c) => {
    const { status, body } = httpError(err);
    if (status === 401) c.header("WWW-Authenticate", 'Basic realm="agents console", charset="UTF-8"');
    if (status >= 500) deps.bus.logger.warn({ err, path: c.req.path }, "console request failed");
    return c.json(body, status);
  });
  app.use("*", async (c, next) => {
    const misdirected = hostRefusal(deps.access, c.req.header("host"));
    if (misdirected) throw misdirected;
    const access = accessOf(deps.access, {
      authorization: c.req.header("authorization"),
      operateToken: c.req.header("x-operate-token"),
    });
    if (!access.read) throw access.error;
    c.set("operate", access.operate);
    c.header("Cache-Control", "no-store");
    c.header("X-Content-Type-Options", "nosniff");
    c.header("Content-Security-Policy", "default-src 'self'; img-src 'self' data:");
    await next();
  });
  app.get("/api/whoami", (c) =>
    c.json({ operate: c.get("operate"), operateConfigured: deps.access.operateToken !== undefined }),
  );
  app.route("/api", readRoutes(deps.reads));
  app.route("/api/live", liveRoutes(deps.bus, deps.feeds));
  app.use("/api/operate/*", async (c, next) => {
    if (!c.get("operate")) throw operateRefusal(deps.access);
    // A browser says when another site's page sent the request: an operator's own page never does.
    if (c.req.header("sec-fetch-site") === "cross-site")
      throw new AgentError(
        "FORBIDDEN",
        "operate requests from another site's page are refused: operate from the console's own page, or agentctl",
      );
    await next();
  });
  app.route("/api/operate", operateRoutes(deps.client));
  app.all("/api/*", () => {
    throw new AgentError("NOT_FOUND", "no such API path: see docs/console.md");
  });
  app.get("*", (c) => {
    // The page routes in the browser (`/runs/<id>`…): any other path is the page itself.
    const file = deps.files.get(c.req.path) ?? deps.files.get("/index.html");
    if (!file) throw new AgentError("NOT_FOUND", "the console's page files are missing");
    return c.body(file.body as Uint8Array<ArrayBuffer>, 200, { "Content-Type": file.type });
  });
  return app;
}
