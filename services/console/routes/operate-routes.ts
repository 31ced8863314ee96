/**
 * The console's operate API: approve or reject a waiting run, halt and resume, the kill switch.
 * Each goes through agentctl's client, on the same subjects, so it is recorded in the run log as
 * agentctl's are; who and why are the operator's. Who is the basic auth user when there is one, as
 * the browser's login says it: a name in the body is the client's word, which a shared token cannot check.
 */
import { Hono, type Context } from "hono";
import { z } from "zod";
import type { ClusterClient } from "../../cli/client.js";
import { AgentError } from "../../../shared/runtime/errors.js";
import { basicUser } from "../access.js";
import { checkRunId } from "../reads.js";

const By = z.string().trim().min(1, "say who acts (by)").max(128).optional();
const Reason = z.string().trim().max(1_000).optional();
const Decision = z.object({ by: By, reason: Reason });
const Stop = z.object({ by: By, reason: Reason });
const Resume = z.object({ by: By });
const Switch = z.object({ active: z.boolean(), by: By, reason: Reason });

/**
 * The request's JSON body, validated: INVALID_INPUT naming what is wrong. Only a JSON body is read:
 * a cross-site form can post text/plain that parses as JSON, never application/json.
 */
async function bodyOf<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  const type = (c.req.header("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== "application/json")
    throw new AgentError(
      "UNSUPPORTED_MEDIA_TYPE",
      `an operate request's body is JSON: send it with \`Content-Type: application/json\`, not '${(type ?? "").slice(0, 80) || "none"}'`,
    );
  const raw: unknown = await c.req.json().catch(() => {
    throw new AgentError("INVALID_INPUT", "the body is not JSON");
  });
  const parsed = schema.safeParse(raw);
  if (!parsed.success)
    throw new AgentError(
      "INVALID_INPUT",
      parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; "),
    );
  return parsed.data;
}

/** Who acts: the basic auth user, else the body's `by`, else "console". */
const who = (c: Context, by: string | undefined): string =>
  basicUser(c.req.header("authorization")) ?? by ?? "console";

export function operateRoutes(client: ClusterClient): Hono {
  const app = new Hono();
  for (const decision of ["approve", "reject"] as const) {
    app.post(`/runs/:runId/${decision}`, async (c) => {
      const runId = checkRunId(c.req.param("runId"));
      const { by, reason } = await bodyOf(c, Decision);
      const message = await client.decide(runId, { decision, by: who(c, by), ...(reason ? { reason } : {}) });
      return c.json({ ok: true, message });
    });
  }
  app.post("/runs/:runId/halt", async (c) => {
    const runId = checkRunId(c.req.param("runId"));
    const { by, reason } = await bodyOf(c, Stop);
    return c.json({
      ok: true,
      message: await client.halt({ runId, by: who(c, by), reason: reason ?? "halted from the console" }),
    });
  });
  app.post("/runs/:runId/resume", async (c) => {
    const runId = checkRunId(c.req.param("runId"));
    const { by } = await bodyOf(c, Resume);
    return c.json({ ok: true, message: await client.resume({ runId, by: who(c, by) }) });
  });
  app.post("/killswitch", async (c) => {
    const { active, by, reason } = await bodyOf(c, Switch);
    const message = await client.killSwitch({
      active,
      by: who(c, by),
      reason: reason ?? "set from the console",
    });
    return c.json({ ok: true, message });
  });
  return app;
}
