import { z } from "zod";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { SubmitReply } from "../../shared/contracts/control.js";
import type { ScriptStep } from "../../shared/contracts/model.js";
import { decode, encode } from "../../shared/bus/codec.js";
import { defineTool, type AnyTool } from "../../shared/tools/tool.js";
import { join } from "node:path";
import { repoRoot } from "../../services/local/paths.js";
import type { ClusterSuite, ClusterSuiteOptions } from "./cluster-suite.js";

// What the convergence-policy tests on a cluster share (test/e2e/policies.test.ts).

export const built = (...path: string[]): string => join(repoRoot(), "dist", ...path);

/**
 * One cluster for the file: a supervisor, a critic, and two agent workers registering the example
 * policies (examples/policies) two ways: agent-1 from an operator's own entry, in code; agent-2 the
 * stock worker, from AGENT_POLICY_MODULES. The `work` tool is served from this process.
 */
export const POLICY_CLUSTER: ClusterSuiteOptions = {
  actors: [
    { kind: "supervisor" },
    { kind: "critic" },
    {
      name: "agent-1",
      entry: built("examples", "policies", "worker.js"),
      user: "agent",
      env: { WORKER_ID: "agent-1" },
    },
    {
      kind: "agent",
      name: "agent-2",
      env: { AGENT_POLICY_MODULES: built("examples", "policies", "policies.js") },
    },
  ],
  env: { AGENT_BEAT_MS: "200", SUPERVISOR_WORKER_LISTEN_MS: "500" },
};

/** The `work` tool: reports success and emits the signals its input asks for, counting executions by run. */
export function workTool(executions: Map<string, number>): AnyTool {
  return defineTool({
    name: "work",
    description: "does work and reports progress",
    input: z.object({ n: z.number(), signals: z.array(z.string()).optional() }),
    capability: { kind: "compute" },
    execute: (input, ctx) => {
      executions.set(ctx.runId, (executions.get(ctx.runId) ?? 0) + 1);
      return Promise.resolve({ output: { success: true }, signals: input.signals ?? [] });
    },
  });
}

export const work = (n: number, signals?: string[]): ScriptStep => ({
  toolCalls: [{ name: "work", input: { n, ...(signals ? { signals } : {}) } }],
});
export const workCalls = (n: number, signals?: (i: number) => string[]): ScriptStep[] =>
  Array.from({ length: n }, (_, i) => work(i, signals?.(i)));

export const count = (audit: AuditEvent[], kind: string): number =>
  audit.filter((e) => e.kind === kind).length;
export const shape = (audit: AuditEvent[]): string[] => audit.map((e) => `${e.phase}:${e.kind}:${e.status}`);
export const committed = (audit: AuditEvent[]) => audit.find((e) => e.kind === "run.committed");

/** A submit as its bytes, past the client's own checks: what the supervisor answers. */
export async function rawSubmit(suite: ClusterSuite, body: unknown): Promise<SubmitReply> {
  const reply = await suite.bus.nc.request(suite.bus.subjects.runsSubmit(), encode(z.unknown(), body), {
    timeout: 10_000,
  });
  return decode(SubmitReply, reply.data);
}

export /** Every key of a JSON value, nested ones included (values aside: they carry what tools said). */
function keysOf(value: unknown, into: string[] = []): string[] {
  if (Array.isArray(value)) for (const v of value) keysOf(v, into);
  else if (typeof value === "object" && value !== null)
    for (const [k, v] of Object.entries(value)) {
      into.push(k);
      keysOf(v, into);
    }
  return into;
}

export const DOMAIN =
  /patch_applied|syntax_ok|order_placed|confirmation_received|sources_collected|analysis_complete|\btrad(e|es|ing)\b/i;
