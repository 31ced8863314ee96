import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { WorkerBeat } from "../../shared/contracts/cluster.js";
import type { ScriptStep } from "../../shared/contracts/model.js";
import { RunSpec, type RunSpecInput } from "../../shared/contracts/run-spec.js";
import { publishJob } from "../../shared/bus/jobs.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { decode } from "../../shared/bus/codec.js";
import { repoRoot } from "../../services/local/paths.js";
import type { ClusterHealth } from "../../services/cli/cluster-health.js";
import {
  AGENTCTL,
  agentctlFails,
  agentctlOf,
  ended,
  runProcess,
  useClusterSuite,
} from "../helpers/cluster-suite.js";
import { echoCall, spec } from "../helpers/fixtures.js";
import {
  committed,
  count,
  DOMAIN,
  keysOf,
  rawSubmit,
  shape,
  workCalls,
  built,
  POLICY_CLUSTER,
  workTool,
} from "../helpers/policy-runs.js";

/** One cluster for the file (see POLICY_CLUSTER). */
const suite = useClusterSuite("policies", POLICY_CLUSTER);

/** Executions of the `work` tool, by run. */
const executions = new Map<string, number>();
let served = false;

/** Serves `work` once (see workTool). */
function serveWork(): void {
  if (served) return;
  served = true;
  suite.serveTool(workTool(executions));
}

/** A spec under `policy` calling `work`; verifiers none unless given (the policy decides). */
function under(policy: string, o: Parameters<typeof spec>[0] = {}): RunSpecInput {
  return { ...spec({ tools: ["work", "echo"], verifiers: [], ...o }), policy };
}

async function finished(input: RunSpecInput): Promise<{ status: RunStatus; audit: AuditEvent[] }> {
  serveWork();
  const { runId } = await suite.client.submit(input);
  const status = await suite.waitFor(runId, ended, 30_000);
  return { status, audit: await suite.audit(runId) };
}

/** Runs `[a, b]` signals through signalQuorum: one signal per `work` call, the second from call two on. */
function domainRun(signals: [string, string]): Promise<{ status: RunStatus; audit: AuditEvent[] }> {
  return finished(
    under("signalQuorum", {
      script: workCalls(10, (i) => [signals[Math.min(i, 1)] as string]),
      resources: { maxIterations: 8 },
    }),
  );
}
let neutralRun: ReturnType<typeof domainRun> | undefined;
const neutral = (): ReturnType<typeof domainRun> => (neutralRun ??= domainRun([":s1", ":s2"]));

async function sameAsNeutral(signals: [string, string]): Promise<void> {
  const [domain, plain] = await Promise.all([domainRun(signals), neutral()]);
  expect(domain.status.status).toBe("committed");
  expect(committed(domain.audit)?.data).toMatchObject({ policy: "signalQuorum" });
  expect(shape(domain.audit)).toEqual(shape(plain.audit));
  expect(domain.status.usage).toEqual(plain.status.usage);
}

describe("runtime invariants (seed 004) on a cluster of processes", () => {
  it("RT-01 on the cluster: an always-tool-calling model is stopped at maxIterations", async () => {
    const { status, audit } = await finished(
      under("neverConverges", {
        script: Array.from({ length: 50 }, (_, i) => echoCall(`varied ${i}`)),
        resources: { maxIterations: 5 },
      }),
    );
    expect(status.status).toBe("failed");
    expect(status.terminal?.reason).toBe("maxIterations");
    expect(count(audit, "model.called")).toBe(5);
  }, 60_000);

  it("RT-02 on the cluster: a registered policy's convergence stops the run before the next tool runs", async () => {
    const { status, audit } = await finished(under("twoSteps", { script: workCalls(10) }));
    expect(status.status).toBe("committed");
    expect(count(audit, "model.responded")).toBe(2);
    // Step 2's call was proposed, but the policy spoke first: only step 1's ran.
    expect(executions.get(status.runId)).toBe(1);
    expect(committed(audit)).toMatchObject({
      reason: "the model answered 2 times",
      data: { policy: "twoSteps" },
    });
  }, 60_000);

  it("RT-03 on the cluster: progress signals are recorded, never interpreted", async () => {
    const [noisy, quiet] = await Promise.all([
      finished(
        under("neverConverges", {
          script: workCalls(10, () => [":foo", ":bar", ":baz"]),
          resources: { maxIterations: 4 },
        }),
      ),
      finished(under("neverConverges", { script: workCalls(10), resources: { maxIterations: 4 } })),
    ]);
    const signalled = noisy.audit.filter((e) => e.kind === "tool.completed").map((e) => e.data?.signals);
    expect(signalled).toEqual(Array(4).fill([":foo", ":bar", ":baz"]));
    expect(noisy.audit.map((e) => e.kind)).toEqual(quiet.audit.map((e) => e.kind));
    expect(noisy.status.terminal?.reason).toBe(quiet.status.terminal?.reason);
  }, 60_000);

  it("RT-04 on the cluster: a tool's success does not end a run whose policy does not converge", async () => {
    const { status, audit } = await finished(
      under("neverConverges", { script: workCalls(10), resources: { maxIterations: 4 } }),
    );
    expect(executions.get(status.runId)).toBe(4);
    expect(count(audit, "model.called")).toBe(4);
    expect(count(audit, "tool.completed")).toBe(4);
    expect(status.status).toBe("failed");
  }, 60_000);

  it("RT-05 on the cluster: a tool emitting done/complete/finished does not control termination", async () => {
    const { status, audit } = await finished(
      under("neverConverges", {
        script: workCalls(10, () => ["done", "complete", "finished"]),
        resources: { maxIterations: 3 },
      }),
    );
    expect(
      audit.filter((e) => e.kind === "tool.completed").flatMap((e) => e.data?.signals as string[]),
    ).toHaveLength(9);
    expect(status.terminal?.reason).toBe("maxIterations");
  }, 60_000);

  it("RT-06 on the cluster: a policy that converges at once commits before any model call or tool", async () => {
    const { status, audit } = await finished(under("immediately", { script: workCalls(3), loop: true }));
    expect(status.status).toBe("committed");
    expect(count(audit, "model.called")).toBe(0);
    expect(executions.get(status.runId)).toBeUndefined();
    expect(committed(audit)?.data).toMatchObject({ policy: "immediately" });
  }, 60_000);

  it("RT-07 on the cluster: a spec with no convergence policy is refused; naming neverConverges runs to its bounds", async () => {
    const bare = spec({ verifiers: [], script: [{ text: "I am done!" }], loop: true });
    const refused = await rawSubmit(suite, bare);
    expect(refused).toMatchObject({ ok: false, error: { code: "INVALID_SPEC" } });
    expect(JSON.stringify(refused)).toContain("no convergence policy");
    const texts = [
      "I am done!",
      "Finished, trust me.",
      "42 is the answer",
      "Complete",
      "All good",
      "Nothing left",
    ];
    const { status, audit } = await finished({
      ...bare,
      policy: "neverConverges",
      agent: {
        ...bare.agent,
        model: { provider: "scripted", script: texts.map((text) => ({ text })) },
        resources: { maxIterations: 5, maxRepairs: 10 },
      },
    });
    expect(status.status).toBe("failed");
    expect(status.terminal?.reason).toBe("maxIterations");
    expect(count(audit, "run.committed")).toBe(0);
  }, 60_000);

  it("RT-08 on the cluster: coding signal names behave as neutral ones", async () => {
    await sameAsNeutral([":patch_applied", ":syntax_ok"]);
  }, 60_000);

  it("RT-09 on the cluster: trading signal names behave as neutral ones", async () => {
    await sameAsNeutral([":order_placed", ":confirmation_received"]);
  }, 60_000);

  it("RT-10 on the cluster: research signal names behave as neutral ones", async () => {
    await sameAsNeutral([":sources_collected", ":analysis_complete"]);
  }, 60_000);

  it("RT-11 on the cluster: no domain concept among the keys of a run's status, log records and audit", async () => {
    const { status, audit } = await domainRun([":order_placed", ":confirmation_received"]);
    const wal = (await suite.wal(status.runId)).map((r) => r.record);
    const keys = [...keysOf(status), ...keysOf(audit), ...keysOf(wal)];
    expect(keys.length).toBeGreaterThan(100);
    expect(keys.filter((k) => DOMAIN.test(k))).toEqual([]);
    // The signals are there, as values: recorded, not built in.
    expect(JSON.stringify(audit)).toContain(":order_placed");
  }, 60_000);

  it("RT-12 on the cluster: the code the actor processes run names no domain concept", () => {
    // The compiled runtime, file for file as its sources are now (a stale file an older build left
    // in dist/ is run by no actor).
    const sources: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(join(repoRoot(), dir))) {
        const path = join(dir, name);
        if (statSync(join(repoRoot(), path)).isDirectory()) walk(path);
        else if (path.endsWith(".ts")) sources.push(path);
      }
    };
    walk("shared");
    walk("services");
    const compiled = sources.map((source) => built(source.replace(/\.ts$/, ".js")));
    expect(compiled.length).toBeGreaterThan(100);
    expect(compiled.filter((f) => DOMAIN.test(readFileSync(f, "utf8")))).toEqual([]);
    // The entries this suite's workers run are among them, or built on them.
    expect(compiled).toContain(built("services", "agent", "main.js"));
    expect(readFileSync(built("examples", "policies", "worker.js"), "utf8")).toContain(
      "services/agent/start.js",
    );
  });

  it("RT-13 on the cluster: the same spec run three times, on either worker, gives the same result", async () => {
    const make = (): RunSpecInput =>
      spec({
        script: [echoCall("a"), echoCall("b"), { text: "final" }],
        verifiers: [{ kind: "regex", pattern: "final" }],
      });
    const runs = await Promise.all([finished(make()), finished(make()), finished(make())]);
    const [first] = runs;
    for (const { status, audit } of runs) {
      expect(status.status).toBe("committed");
      expect(status.terminal?.output).toBe("final");
      expect(status.iteration).toBe(first?.status.iteration);
      expect(status.usage).toEqual(first?.status.usage);
      expect(shape(audit)).toEqual(shape(first?.audit ?? []));
      expect(committed(audit)?.data).toMatchObject({ policy: "gates" });
    }
  }, 60_000);

  it("RT-14 on the cluster: a finish action goes to VERIFY at once; the policy, not the model, decides", async () => {
    const script: ScriptStep[] = [
      {
        toolCalls: [
          { name: "finish", input: { answer: "42" } },
          { name: "work", input: { n: 1 } },
        ],
      },
      { text: "again" },
    ];
    const [never, gated] = await Promise.all([
      finished(under("neverConverges", { script, loop: true, resources: { maxRepairs: 0 } })),
      finished(under("gates", { script, verifiers: [{ kind: "regex", pattern: "^42$" }] })),
    ]);
    const phases = never.audit.filter((e) => e.kind === "phase.entered").map((e) => e.phase);
    expect(phases.slice(phases.indexOf("ACT"), phases.indexOf("ACT") + 2)).toEqual(["ACT", "VERIFY"]);
    expect(executions.get(never.status.runId)).toBeUndefined();
    expect(count(never.audit, "model.called")).toBe(1);
    expect(never.status.status).toBe("failed");
    expect(gated.status.status).toBe("committed");
    expect(gated.status.terminal?.output).toBe("42");
  }, 60_000);
});

describe("named convergence policies on a cluster of processes", () => {
  it("CTL-6 a spec naming a policy no live worker registers is refused at submit with INVALID_SPEC", async () => {
    const reply = await rawSubmit(suite, under("nowhere", { script: [{ text: "x" }] }));
    expect(reply).toMatchObject({ ok: false, error: { code: "INVALID_SPEC", details: { field: "policy" } } });
    expect(reply.ok ? "" : reply.error.message).toMatch(
      /^policy 'nowhere': no live agent worker registers it \(heard: agent-1, agent-2\); register it in every agent worker/,
    );
    const bad = await rawSubmit(suite, under("not a name", { script: [{ text: "x" }] }));
    expect(bad).toMatchObject({ ok: false, error: { code: "INVALID_SPEC" } });
  }, 30_000);

  it("CTL-6 both workers announce their registered policies, in code and from AGENT_POLICY_MODULES", async () => {
    const heard = new Map<string, string[]>();
    const sub = suite.bus.nc.subscribe(suite.bus.subjects.workerBeatAll(), {
      callback: (err, msg) => {
        if (err) return;
        const beat = decode(WorkerBeat, msg.data);
        heard.set(beat.workerId, beat.policies ?? []);
      },
    });
    await expect.poll(() => heard.size, { timeout: 5_000 }).toBe(2);
    sub.unsubscribe();
    expect(Object.fromEntries(heard)).toEqual({
      "agent-1": ["immediately", "signalQuorum", "twoSteps"],
      "agent-2": ["immediately", "signalQuorum", "twoSteps"],
    });
  }, 30_000);

  it("CTL-6 under policy verifiers the critic reviews but does not decide; under gates it does", async () => {
    const critic = { checks: [{ kind: "regex" as const, pattern: "^never matches$" }] };
    const answers = ["first answer", "second answer", "third answer"].map((text) => ({ text }));
    const o = {
      critic,
      verifiers: [{ kind: "nonEmpty" as const }],
      script: answers,
      resources: { maxRepairs: 1 },
    };
    const [verifiers, gates] = await Promise.all([
      finished({ ...spec(o), policy: "verifiers" }),
      finished(spec(o)),
    ]);
    expect(verifiers.status.status).toBe("committed");
    expect(verifiers.audit.find((e) => e.kind === "critic.verdict")?.status).toBe("failed");
    expect(committed(verifiers.audit)).toMatchObject({
      reason: "all verifiers passed",
      data: { policy: "verifiers" },
    });
    expect(gates.status.status).toBe("failed");
    expect(gates.status.terminal?.reason).toBe("maxRepairs");
  }, 60_000);

  it("CTL-6 agentctl replay reproduces a run under a registered policy given the workers' policy modules", async () => {
    const { status } = await finished(under("twoSteps", { script: workCalls(5) }));
    const modules = built("examples", "policies", "policies.js");
    const { stdout } = await agentctlOf(suite).run(
      "replay",
      status.runId,
      "--policy-modules",
      modules,
      "--json",
    );
    expect(JSON.parse(stdout)).toMatchObject({ runId: status.runId, status: "committed" });
    // Without them, the replay cannot derive the run's commit: it says what to give.
    const without = await agentctlFails(suite, ["replay", status.runId]);
    expect(without.error).toMatchObject({
      code: "INVALID_INPUT",
      message: expect.stringContaining(
        "policy 'twoSteps', registered in the workers: give their modules",
      ) as unknown,
    });
  }, 60_000);

  it("CTL-6 a worker without the policy joins: submits naming it are refused naming that worker until it leaves; agentctl cluster says so", async () => {
    const quorum = (): RunSpecInput =>
      under("signalQuorum", { script: workCalls(3, (i) => [`:s${i}`]), resources: { maxIterations: 5 } });
    const plain = await suite.cluster.launch({ kind: "agent", name: "agent-3" });
    // Heard within a beat or two (AGENT_BEAT_MS 200).
    await expect
      .poll(async () => JSON.stringify(await rawSubmit(suite, quorum())), { timeout: 5_000 })
      .toContain("policy 'signalQuorum' is not registered by agent worker(s) agent-3");
    // agentctl cluster names the disagreement as a problem (exit 1) and lists who registers what.
    const report = await runProcess(process.execPath, [AGENTCTL, "cluster", "--json", "--listen-ms", "600"], {
      env: suite.env(),
    }).then(
      ({ stdout }) => ({ code: 0, stdout }),
      (err: { code: number; stdout: string }) => err,
    );
    expect(report.code).toBe(1);
    const health = JSON.parse(report.stdout) as ClusterHealth;
    expect(health.problems).toContain(
      "convergence policy 'signalQuorum' is not registered by agent worker(s) agent-3: runs naming it are refused until every live worker registers it (AGENT_POLICY_MODULES)",
    );
    const listed = new Map(health.workers.workers.map((w) => [w.workerId, w.policies]));
    expect(listed.get("agent-1")).toEqual(["immediately", "signalQuorum", "twoSteps"]);
    expect(listed.get("agent-3")).toBeUndefined();
    plain.child.kill("SIGTERM");
    await plain.exited;
    // Its last beat says it left: the policy is every live worker's again.
    const { status, audit } = await finished(quorum());
    expect(status.status).toBe("committed");
    expect(committed(audit)?.data).toMatchObject({ policy: "signalQuorum" });
  }, 60_000);

  it("CTL-6 a worker handed a run under a policy it does not register fails it at its start, calling no model", async () => {
    // As after a rollout that dropped the policy: the job reaches a worker without it.
    const runId = `orphaned${Date.now().toString(36)}`;
    const parsed = RunSpec.parse(under("droppedPolicy", { tools: ["echo"], script: [{ text: "x" }] }));
    await publishJob(
      suite.bus,
      { schemaVersion: 1, runId, rootRunId: runId, depth: 0, auditSeq: 0, spec: parsed },
      `${runId}:start`,
    );
    const status = await suite.waitFor(runId, ended);
    expect(status.status).toBe("failed");
    expect(status.terminal?.reason).toBe("unknownPolicy");
    const audit = await suite.audit(runId);
    expect(count(audit, "model.called")).toBe(0);
    expect(audit.find((e) => e.kind === "run.failed")?.reason).toMatch(/unknownPolicy|droppedPolicy/);
  }, 30_000);

  it("CTL-6 a worker whose AGENT_POLICY_MODULES cannot be loaded does not start", async () => {
    const missing = join(repoRoot(), "dist", "no-such-policies.js");
    await expect(
      suite.cluster.launch({ kind: "agent", name: "agent-4", env: { AGENT_POLICY_MODULES: missing } }),
    ).rejects.toThrow(/agent-4 exited with code 1 before it was ready[\s\S]*could not be loaded/);
  }, 30_000);
});
