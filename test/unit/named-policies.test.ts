import { describe, expect, it } from "vitest";
import { RunSpec, type RunSpecInput } from "../../shared/contracts/run-spec.js";
import { namedPolicy, type ConvergencePolicy } from "../../shared/loop/policy.js";
import { registerPolicies } from "../../shared/loop/policy-registry.js";
import { isAgentError } from "../../shared/runtime/errors.js";
import { loadPolicyModules } from "../../shared/runtime/policy-modules.js";
import { policyRefusal, type WorkerPolicySet } from "../../services/supervisor/worker-policies.js";
import { workerPolicyProblems } from "../../services/cli/cluster-health.js";
import { policies as examplePolicies, signalQuorum } from "../../examples/policies/policies.js";
import { startRun, transition } from "../../shared/loop/fsm.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { describeTool } from "../../shared/tools/tool.js";
import { kinds, modelCalls, runner, spec, START } from "../helpers/fixtures.js";

const named = (policy: string, o: Parameters<typeof spec>[0] = {}): RunSpecInput => ({ ...spec(o), policy });
const issues = (input: unknown): string => JSON.stringify(RunSpec.safeParse(input).error?.issues ?? []);
const committedData = (audit: { kind: string; data?: unknown }[]) =>
  audit.find((e) => e.kind === "run.committed")?.data as { policy?: string } | undefined;
/** A critic whose deterministic check fails every answer: its gates never pass. */
const strictCritic = { checks: [{ kind: "regex" as const, pattern: "^never matches$" }] };

describe("named convergence policies", () => {
  it("a spec may name neverConverges with neither verifiers nor critic; gates still needs one of them", () => {
    const bare = named("neverConverges", { verifiers: [] });
    expect(RunSpec.safeParse(bare).success).toBe(true);
    expect(issues(named("gates", { verifiers: [] }))).toContain("no convergence policy");
    expect(issues(named("verifiers", { verifiers: [] }))).toContain('policy \\"verifiers\\"');
    expect(issues(named("9lives"))).toContain("policy name");
    expect(RunSpec.safeParse(named("signalQuorum", { verifiers: [] })).success).toBe(true);
  });

  it("the default is gates: a spec without a policy resolves as it did, verifiers and critic", () => {
    const plain = RunSpec.parse({ ...spec({ critic: strictCritic }), verifiers: undefined });
    expect(plain.policy).toBeUndefined();
    expect(namedPolicy(plain)?.name).toBe("gates");
    expect(namedPolicy(RunSpec.parse(named("verifiers")))?.name).toBe("verifiers");
    expect(namedPolicy(RunSpec.parse(named("neverConverges")))?.name).toBe("neverConverges");
    expect(namedPolicy(RunSpec.parse(named("signalQuorum")))).toBeUndefined();
    const registered = registerPolicies([signalQuorum]);
    expect(namedPolicy(RunSpec.parse(named("signalQuorum")), registered)).toBe(signalQuorum);
  });

  it("under verifiers the critic reviews but does not decide; under gates its failed gates repair", async () => {
    const script = [{ text: "an answer" }];
    const verifiersOnly = await runner().run(
      named("verifiers", { critic: strictCritic, verifiers: [{ kind: "nonEmpty" }], script, loop: true }),
    );
    expect(verifiersOnly.state.status).toBe("committed");
    expect(verifiersOnly.audit.find((e) => e.kind === "critic.verdict")?.status).toBe("failed");
    expect(committedData(verifiersOnly.audit)?.policy).toBe("verifiers");

    const gated = await runner().run(
      named("gates", { critic: strictCritic, script, loop: true, resources: { maxRepairs: 1 } }),
    );
    expect(gated.state.status).toBe("failed");
    expect(gated.state.terminal?.reason).toBe("maxRepairs");
  });

  it("neverConverges ends only through the bounds, whatever the verifiers say", async () => {
    const result = await runner().run(
      named("neverConverges", {
        script: ["done", "really done", "trust me"].map((text) => ({ text })),
        resources: { maxIterations: 3, maxRepairs: 10 },
      }),
    );
    expect(result.state.status).toBe("failed");
    expect(result.state.terminal?.reason).toBe("maxIterations");
    expect(kinds(result)).not.toContain("run.committed");
  });

  it("a registered policy the spec names decides, and run.committed says which policy it was", async () => {
    const twice: ConvergencePolicy = {
      name: "secondAnswer",
      evaluate: (v) => ({ converged: v.step >= 2, reason: `step ${v.step}` }),
    };
    const result = await runner({ policies: registerPolicies([twice]) }).run(
      named("secondAnswer", { script: [{ text: "a" }, { text: "b" }, { text: "c" }], verifiers: [] }),
    );
    expect(result.state.status).toBe("committed");
    expect(result.state.output).toBe("b");
    expect(committedData(result.audit)).toMatchObject({ policy: "secondAnswer" });
    expect(result.audit.find((e) => e.kind === "run.committed")?.reason).toBe("step 2");
  });

  it("a registered policy converging mid-loop still waits for the approval the spec requires", async () => {
    const second: ConvergencePolicy = {
      name: "secondAnswer",
      evaluate: (v) => ({ converged: v.step >= 2, reason: `step ${v.step}` }),
    };
    const script = [{ text: "a" }, { text: "b" }, { text: "c" }];
    const parked = await runner({ policies: registerPolicies([second]) }).run(
      named("secondAnswer", { script, verifiers: [], requiresApproval: true }),
    );
    expect(parked.state.status).toBe("awaiting_approval");
    expect(kinds(parked)).not.toContain("run.committed");
    expect(parked.audit.find((e) => e.kind === "approval.requested")?.data).toMatchObject({
      policy: "secondAnswer",
    });
  });

  it("a registered policy is not consulted inside a round of samples: the round's majority is what commits", async () => {
    const early: ConvergencePolicy = {
      name: "afterFirst",
      evaluate: (v) => ({ converged: v.step >= 1, reason: `step ${v.step}` }),
    };
    const base = named("afterFirst", {
      script: [{ text: "A" }, { text: "B" }, { text: "A" }],
      verifiers: [],
    });
    const result = await runner({ policies: registerPolicies([early]) }).run({
      ...base,
      task: { ...base.task, samples: 3 },
    });
    expect(result.state.status).toBe("committed");
    expect(result.state.output).toBe("A");
    expect(kinds(result)).toContain("samples.clustered");
    expect(result.state.sampling).toBeUndefined();
  });

  it("a worker without the policy the spec names fails the run at its start, calling no model", async () => {
    const result = await runner().run(named("elsewhere", { verifiers: [] }));
    expect(result.state.status).toBe("failed");
    expect(result.state.terminal?.reason).toBe("unknownPolicy");
    expect(result.state.terminal?.artifact).toMatchObject({
      diagnosis: "policy 'elsewhere' is not registered in this worker",
    });
    expect(modelCalls(result)).toBe(0);
  });

  it("a run under way whose new worker lacks its policy is handed back (POLICY_UNAVAILABLE), never judged by another", () => {
    const mine: ConvergencePolicy = {
      name: "mine",
      evaluate: () => ({ converged: false, reason: "not yet" }),
    };
    const runSpec = RunSpec.parse(named("mine", { verifiers: [] }));
    const start = { type: "start", at: START, spec: runSpec, runId: "r", rootRunId: "r", depth: 0 } as const;
    const tools = [describeTool(echoTool)];
    const started = startRun(start, { tools, policies: registerPolicies([mine]) });
    expect(started.state.pending?.kind).toBe("memory");
    const recalled = { type: "memoryRecalled" as const, at: START, memories: [] };
    const elsewhere = (): unknown => transition(started.state, recalled, { tools });
    expect(elsewhere).toThrow(/policy 'mine' is not registered in this worker/);
    try {
      elsewhere();
    } catch (error) {
      expect(isAgentError(error) && error.code === "POLICY_UNAVAILABLE" && error.retryable).toBe(true);
    }
    const here = transition(started.state, recalled, { tools, policies: registerPolicies([mine]) });
    expect(here.state.pending?.kind).toBe("model");
  });

  it("registration refuses a built-in name, a name twice, a bad name and what is not a policy", () => {
    const p = (name: string): ConvergencePolicy => ({
      name,
      evaluate: () => ({ converged: false, reason: "" }),
    });
    const refusal = (list: unknown[]): string => {
      try {
        registerPolicies(list);
        return "registered";
      } catch (err) {
        return isAgentError(err) ? `${err.code}: ${err.message}` : String(err);
      }
    };
    expect(refusal([p("gates")])).toMatch(/INVALID_INPUT: policy 'gates' is built in/);
    expect(refusal([p("a"), p("a")])).toMatch(/registered twice/);
    expect(refusal([p("has space")])).toMatch(/not 1-64/);
    expect(refusal([{ name: "x" }])).toMatch(/evaluate/);
    expect([...registerPolicies(examplePolicies).keys()]).toEqual([
      "signalQuorum",
      "twoSteps",
      "immediately",
    ]);
  });

  it("AGENT_POLICY_MODULES: a module's policies export is loaded; a missing module stops the start", async () => {
    const loaded = await loadPolicyModules(["examples/policies/policies.ts"], process.cwd());
    expect(loaded.map((p) => (p as ConvergencePolicy).name)).toEqual([
      "signalQuorum",
      "twoSteps",
      "immediately",
    ]);
    await expect(loadPolicyModules(["no/such/module.js"], process.cwd())).rejects.toMatchObject({
      code: "INVALID_INPUT",
      message: expect.stringContaining("'no/such/module.js' could not be loaded") as unknown,
    });
  });

  it("the supervisor admits a registered policy only when every live worker registers it", () => {
    const now = 1_000;
    const worker = (
      workerId: string,
      policies: string[],
      over: Partial<WorkerPolicySet> = {},
    ): WorkerPolicySet => ({
      workerId,
      policies,
      until: now + 2_000,
      leaving: false,
      ...over,
    });
    expect(policyRefusal(undefined, [], now)).toBeUndefined();
    expect(policyRefusal("neverConverges", [], now)).toBeUndefined();
    expect(policyRefusal("q", [worker("a", ["q"]), worker("b", ["q", "r"])], now)).toBeUndefined();
    expect(policyRefusal("q", [], now)).toMatchObject({
      code: "INVALID_SPEC",
      message: expect.stringContaining("no agent worker is heard") as unknown,
      details: { field: "policy" },
    });
    expect(policyRefusal("q", [worker("a", ["q"]), worker("b", [])], now)?.message).toMatch(
      /^policy 'q' is not registered by agent worker\(s\) b;/,
    );
    expect(policyRefusal("q", [worker("a", [])], now)?.message).toMatch(
      /^policy 'q': no live agent worker registers it \(heard: a\)/,
    );
    // A worker that left, or whose beats stopped, decides nothing either way.
    expect(policyRefusal("q", [worker("a", ["q"]), worker("b", [], { leaving: true })], now)).toBeUndefined();
    expect(
      policyRefusal("q", [worker("a", ["q"]), worker("b", [], { until: now - 1 })], now),
    ).toBeUndefined();
    expect(policyRefusal("q", [worker("a", ["q"], { until: now - 1 })], now)?.code).toBe("INVALID_SPEC");
  });

  it("agentctl cluster names a registered policy some live workers lack, and only that", () => {
    const w = (workerId: string, policies?: string[], leaving = false) => ({
      workerId,
      instance: `${workerId}-i`,
      jobs: 0,
      leaving,
      ...(policies ? { policies } : {}),
    });
    const roll = (...workers: ReturnType<typeof w>[]) => ({ listenedMs: 500, workers });
    expect(workerPolicyProblems(roll(w("a", ["q"]), w("b", ["q"])))).toEqual([]);
    expect(workerPolicyProblems(roll(w("a"), w("b")))).toEqual([]);
    expect(workerPolicyProblems(roll(w("a", ["q", "r"]), w("b", ["r"]), w("c")))).toEqual([
      "convergence policy 'q' is not registered by agent worker(s) b, c: runs naming it are refused until every live worker registers it (AGENT_POLICY_MODULES)",
      "convergence policy 'r' is not registered by agent worker(s) c: runs naming it are refused until every live worker registers it (AGENT_POLICY_MODULES)",
    ]);
    expect(workerPolicyProblems(roll(w("a", ["q"]), w("b", [], true)))).toEqual([]);
  });
});
