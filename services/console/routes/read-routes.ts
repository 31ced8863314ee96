/** The console's read API: runs, one run, its tree, the cluster (JSON). */
import { Hono } from "hono";
import { parseTimelinePage } from "../log-window.js";
import type { ConsoleReads } from "../reads.js";
import { parseRunsFilter } from "../runs-filter.js";

export function readRoutes(reads: ConsoleReads): Hono {
  const app = new Hono();
  app.get("/runs", async (c) => c.json(await reads.runs(parseRunsFilter(c.req.query()))));
  app.get("/runs/:runId", async (c) =>
    c.json(await reads.run(c.req.param("runId"), parseTimelinePage(c.req.query()))),
  );
  app.get("/runs/:runId/tree", async (c) => c.json(await reads.tree(c.req.param("runId"))));
  app.get("/cluster", async (c) => c.json(await reads.clusterView()));
  return app;
}
