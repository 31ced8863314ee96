import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { ClusterHealth } from "../../services/cli/cluster-health.js";
import { AuditEvent } from "../../shared/contracts/audit.js";
import { SubmitReply } from "../../shared/contracts/control.js";
import { encode } from "../../shared/bus/codec.js";
import { publishJob } from "../../shared/bus/jobs.js";
import { AGENTCTL, FULL_CLUSTER, runProcess, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

const SUBSCRIBER = fileURLToPath(new URL("../../examples/audit-subscriber.mjs", import.meta.url));

const suite = useClusterSuite("e2e", FULL_CLUSTER);

/** A critic model's verdict, as its JSON answer: passed, or failed with a defect and a hint. */
function verdict(passed: boolean): string {
  const s = passed ? 0.95 : 0.5;
  return JSON.stringify({
    scores: { correctness: s, completeness: s, coherence: s, safety: passed ? 1 : 0.5 },
    defects: passed ? [] : [{ severity: "high", rootCause: "incompleteness", description: "too short" }],
    repairHints: passed ? [] : ["say more"],
    passed,
  });
}

describe("cluster: actors as processes on a real nats-server", () => {
  it("a run goes end to end to run.committed with a gapless, schema-valid audit trail", async () => {
    const asked = spec({
      script: [
        { toolCalls: [{ name: "echo", input: { text: "green" } }] },
        { text: "The service is green, mostly." },
        { toolCalls: [{ name: "finish", input: { answer: "The service is green." } }] },
      ],
      verifiers: [],
      critic: {
        model: { provider: "scripted", script: [{ text: verdict(false) }, { text: verdict(true) }] },
      },
    });
    const reply = await suite.client.submit(asked);
    expect(reply.status).toBe("admitted");
    const status = await suite.waitFor(reply.runId, settled);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "The service is green." } });
    const events = await suite.audit(reply.runId);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    for (const event of events) expect(AuditEvent.safeParse(event).success).toBe(true);
    const kinds = events.map((e) => e.kind);
    expect(kinds[0]).toBe("run.admitted");
    expect(events[0]?.actor).toBe("supervisor");
    expect(kinds.at(-1)).toBe("run.committed");
    expect(kinds.filter((k) => k === "run.committed" || k === "run.failed")).toHaveLength(1);
    const order: AuditEvent["kind"][] = [
      "run.admitted",
      "tool.intent",
      "tool.completed",
      "critic.verdict",
      "repair.started",
      "run.committed",
    ];
    // The critic's verdict was read as given (a malformed one is a failed review with no scores).
    expect(events.find((e) => e.kind === "critic.verdict")?.data).toMatchObject({ defects: 1 });
    const positions = order.map((k) => kinds.indexOf(k));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    // agentctl replay re-derives every transition from the WAL and finds them identical.
    const { stdout } = await runProcess(process.execPath, [AGENTCTL, "replay", reply.runId], {
      env: suite.env(),
    });
    expect(stdout).toMatch(/reproduced identically.*\ncheckpoints: none on record or replayed\n/);
    // The README's subscriber (plain nats.js, a durable consumer) sees the same events in order.
    const sub = await runProcess(process.execPath, [SUBSCRIBER, reply.runId, "--until-final"], {
      env: suite.env(),
    });
    const seen = sub.stdout
      .trim()
      .split("\n")
      .map((line) => AuditEvent.parse(JSON.parse(line)));
    expect(seen.map((e) => e.seq)).toEqual(events.map((e) => e.seq));
    // The subscriber's gap report (the random stream prefix may itself spell "GAP").
    expect(sub.stderr).not.toMatch(/GAP in /);
    // Re-submitting the runId returns the existing run and starts nothing; another spec under it is refused.
    const again = await suite.client.submit({ ...asked, runId: reply.runId });
    expect(again.status).toBe("existing");
    await expect(suite.client.submit({ ...spec(), runId: reply.runId })).rejects.toMatchObject({
      code: "RUN_ID_TAKEN",
    });
  });

  it("the critic service runs deterministic checks; a checks-only critic sends a bad answer back once", async () => {
    const reply = await suite.client.submit(
      spec({
        script: [{ text: "hi" }, { text: "Hello there" }],
        verifiers: [],
        critic: { checks: [{ kind: "regex", pattern: "^Hello" }] },
      }),
    );
    const status = await suite.waitFor(reply.runId, settled);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "Hello there" } });
    const verdicts = (await suite.audit(reply.runId)).filter((e) => e.kind === "critic.verdict");
    expect(verdicts.map((e) => e.status)).toEqual(["failed", "passed"]);
  }, 60_000);

  it("agentctl: submit --watch, status, audit tail, contracts; a bad flag is a structured INVALID_INPUT", async () => {
    const env = { ...process.env, NATS_URL: suite.server.url, AGENTS_PREFIX: suite.prefix };
    const hello = fileURLToPath(new URL("../../examples/hello.json", import.meta.url));
    const submitted = await runProcess(process.execPath, [AGENTCTL, "submit", hello, "--watch"], { env });
    const runId = /^admitted (\S+)/.exec(submitted.stdout)?.[1] as string;
    expect(submitted.stdout).toMatch(/committed\s+COMMIT/);
    expect(submitted.stdout).toMatch(/Hello, operator!/);
    // With its log turned up, stdout still holds only the answer: the log goes to stderr.
    const status = await runProcess(process.execPath, [AGENTCTL, "status", runId], {
      env: { ...env, LOG_LEVEL: "debug" },
    });
    expect(JSON.parse(status.stdout)).toMatchObject({ runId, status: "committed" });
    expect(status.stderr).toMatch(/"level":20/);
    const tail = await runProcess(process.execPath, [AGENTCTL, "audit", "tail", runId, "--json"], { env });
    const lines = tail.stdout
      .trim()
      .split("\n")
      .map((l) => AuditEvent.parse(JSON.parse(l)));
    expect(lines[0]?.kind).toBe("run.admitted");
    expect(lines.at(-1)?.kind).toBe("run.committed");
    const quick = await runProcess(
      process.execPath,
      [
        AGENTCTL,
        "submit",
        "--prompt",
        "Greet",
        "--model",
        "scripted:Hi there",
        "--pattern",
        "^Hi",
        "--watch",
      ],
      { env },
    );
    expect(quick.stdout).toMatch(/committed\s+COMMIT[\s\S]*Hi there/);
    const contracts = await runProcess(process.execPath, [AGENTCTL, "contracts"], { env });
    expect(contracts.stdout).toMatch(/INV-001\s+loop-terminates/);
    const bad = await runProcess(process.execPath, [AGENTCTL, "status", "not a run id"], { env }).catch(
      (err: { code: number; stderr: string }) => err,
    );
    expect(bad).toMatchObject({ code: 2 });
    expect(JSON.parse((bad as { stderr: string }).stderr.trim().split("\n").at(-1) ?? "")).toMatchObject({
      error: { code: "INVALID_INPUT" },
    });
  }, 60_000);

  it("kill switch: admissions are refused and running runs halt at their next step; agentctl resume continues them", async () => {
    const slow = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "echo", input: { text: "x" } }], delayMs: 1_000 },
          { toolCalls: [{ name: "echo", input: { text: "y" } }], delayMs: 300 },
          { toolCalls: [{ name: "finish", input: { answer: "resumed and done" } }] },
        ],
      }),
    );
    await suite.waitFor(slow.runId, (s) => s.status === "running");
    expect(await suite.client.killSwitch({ active: true, reason: "incident 42", by: "oncall" })).toMatch(
      /on/,
    );
    try {
      await expect(suite.client.submit(spec())).rejects.toMatchObject({ code: "KILL_SWITCH_ACTIVE" });
      const halted = await suite.waitFor(slow.runId, settled, 15_000);
      expect(halted).toMatchObject({ status: "halted" });
      expect(halted.terminal?.reason).toMatch(/incident 42/);
      expect((await suite.audit(slow.runId)).some((e) => e.kind === "run.halted")).toBe(true);
      // agentctl cluster shows the switch, who threw it and why, and counts it a problem (exit 1).
      const report = await runProcess(
        process.execPath,
        [AGENTCTL, "cluster", "--json", "--listen-ms", "300"],
        { env: suite.env() },
      ).then(
        ({ stdout }) => ({ code: 0, stdout }),
        (err: { code: number; stdout: string }) => err,
      );
      expect(report.code).toBe(1);
      const health = JSON.parse(report.stdout) as ClusterHealth;
      expect(health.killSwitch).toMatchObject({ active: true, by: "oncall", reason: "incident 42" });
      expect(health.problems).toContainEqual(expect.stringMatching(/^the kill switch is on \(set by oncall/));
    } finally {
      await suite.client.killSwitch({ active: false, reason: "resolved", by: "oncall" });
    }
    const after = await suite.client.submit(spec());
    expect((await suite.waitFor(after.runId, settled)).status).toBe("committed");
    const env = suite.env();
    const resumed = await runProcess(process.execPath, [AGENTCTL, "resume", slow.runId, "--by", "oncall"], {
      env,
    });
    expect(resumed.stdout).toMatch(/resume queued/);
    const done = await suite.waitFor(
      slow.runId,
      (s) => s.status === "committed" || s.status === "failed",
      20_000,
    );
    expect(done).toMatchObject({ status: "committed", terminal: { output: "resumed and done" } });
    const events = await suite.audit(slow.runId);
    expect(events.find((e) => e.kind === "run.resumed")).toMatchObject({
      actor: "human",
      data: { by: "oncall" },
    });
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  }, 60_000);

  it("malformed JSON and schema-invalid payloads on every request subject get structured errors; the actors keep serving", async () => {
    const { nc, subjects } = suite.bus;
    const ask = async (subject: string, body: string) =>
      JSON.parse(new TextDecoder().decode((await nc.request(subject, body, { timeout: 5_000 })).data)) as {
        ok: boolean;
        error?: { code: string };
      };
    const cases: [string, string, string][] = [
      [subjects.runsSubmit(), "{not json", "INVALID_INPUT"],
      [subjects.runsSubmit(), JSON.stringify({ schemaVersion: 1, task: {} }), "INVALID_SPEC"],
      [subjects.runsSubmit(), JSON.stringify({ ...spec(), task: { prompt: "p" } }), "INVALID_SPEC"],
      [subjects.approvals("nobody"), "{", "INVALID_INPUT"],
      [subjects.approvals("nobody"), JSON.stringify({ decision: "maybe", by: "x" }), "INVALID_INPUT"],
      [subjects.approvals("nobody"), JSON.stringify({ decision: "approve", by: "x" }), "NOT_FOUND"],
      [subjects.killSwitch(), "[]", "INVALID_INPUT"],
      [subjects.killSwitch(), JSON.stringify({ active: "yes" }), "INVALID_INPUT"],
      [subjects.halt(), "{", "INVALID_INPUT"],
      [subjects.halt(), JSON.stringify({ runId: "nobody", by: "x" }), "INVALID_INPUT"],
      [subjects.halt(), JSON.stringify({ runId: "nobody", by: "x", reason: "r" }), "NOT_FOUND"],
      [subjects.resume(), "{", "INVALID_INPUT"],
      [subjects.resume(), JSON.stringify({ runId: "nobody", by: "x" }), "NOT_FOUND"],
      [subjects.cancel(), JSON.stringify({ runId: "nobody", by: "x" }), "INVALID_INPUT"],
      [subjects.cancel(), JSON.stringify({ runId: "nobody", by: "x", reason: "r", tree: true }), "NOT_FOUND"],
      [subjects.criticReview(), "\u0000", "INVALID_INPUT"],
      [subjects.criticReview(), JSON.stringify({ schemaVersion: 1 }), "INVALID_INPUT"],
      [subjects.tool("echo"), "nope", "INVALID_INPUT"],
      [subjects.tool("echo"), JSON.stringify({ schemaVersion: 1, runId: "r" }), "INVALID_INPUT"],
    ];
    for (const [subject, body, code] of cases) {
      const reply = await ask(subject, body);
      expect({ subject, body, reply }).toMatchObject({ reply: { ok: false, error: { code } } });
    }
    const spec400 = SubmitReply.parse(await ask(subjects.runsSubmit(), JSON.stringify({ schemaVersion: 1 })));
    expect(spec400.ok).toBe(false);
    // A field the RunSpec does not know (a typo) is refused, naming it and the field it may mean.
    const typo = spec();
    const withTypo = { ...typo, agent: { ...typo.agent, resources: { maxIteration: 5 } }, samples: 3 };
    expect(await ask(subjects.runsSubmit(), JSON.stringify(withTypo))).toMatchObject({
      ok: false,
      error: {
        code: "INVALID_SPEC",
        message:
          "invalid RunSpec: unknown fields 'agent.resources.maxIteration' (did you mean 'maxIterations'?), 'samples': remove them or fix the name",
      },
    });
    // Everyone still serves, and a bad job on the queue is dropped without hurting the next run.
    await suite.bus.js.publish(subjects.runQueue("garbage"), encode(z.object({ x: z.number() }), { x: 1 }));
    // A well-formed job that can never start (no spec, no WAL) is dropped once, not retried forever.
    const orphan = `orphan${Date.now().toString(36)}`;
    await publishJob(
      suite.bus,
      { schemaVersion: 1, runId: orphan, rootRunId: orphan, depth: 0, auditSeq: 0 },
      `${orphan}:start`,
    );
    const fine = await suite.client.submit(spec());
    expect((await suite.waitFor(fine.runId, settled)).status).toBe("committed");
    await new Promise((r) => setTimeout(r, 1_200)); // more than twice the retry delay (500 ms)
    const dropped = new RegExp(`"runId":"${orphan}"[^\\n]*job dropped`, "g");
    expect((await suite.logs()).match(dropped)).toHaveLength(1);
  }, 60_000);
});
