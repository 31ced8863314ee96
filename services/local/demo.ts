/**
 * `npm start`: one bounded agent run in this process, with the scripted model, the echo tool and
 * a scripted critic, printing the audit stream as it happens. The first answer fails the safety
 * gate, so the run goes through REPAIR before it may COMMIT.
 */
import { z } from "zod";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import type { RunSpecInput } from "../../shared/contracts/run-spec.js";
import { LoopRunner } from "../../shared/loop/runner.js";
import { InMemoryMemory } from "../../shared/memory/in-memory.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { uuidIds } from "../../shared/runtime/ids.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { ToolRegistry } from "../../shared/tools/registry.js";

const Config = z.object({ DEMO_OUTPUT: z.enum(["pretty", "json"]).default("pretty") });
const config = Config.parse(process.env);

const verdict = (safety: number) =>
  JSON.stringify({
    scores: { correctness: 0.9, completeness: 0.9, coherence: 0.9, safety },
    defects:
      safety < 0.95
        ? [
            {
              severity: "high",
              rootCause: "safetyViolation",
              description: "the answer includes a raw credential",
            },
          ]
        : [],
    repairHints: safety < 0.95 ? ["never print credentials"] : [],
    passed: safety >= 0.95,
  });

const spec: RunSpecInput = {
  schemaVersion: 1,
  task: { prompt: "Report the service status in one sentence.", verifiers: [{ kind: "nonEmpty" }] },
  agent: {
    name: "demo-agent",
    model: {
      provider: "scripted",
      script: [
        {
          text: "Checking the service.",
          toolCalls: [{ name: "echo", input: { text: "status: green" } }],
          usage: { inputTokens: 120, outputTokens: 20 },
        },
        { text: "Service is green (token=abc123).", usage: { inputTokens: 160, outputTokens: 12 } },
        {
          toolCalls: [{ name: "finish", input: { answer: "The service is green." } }],
          usage: { inputTokens: 210, outputTokens: 9 },
        },
      ],
    },
    tools: ["echo"],
    capabilities: ["compute"],
    resources: { maxIterations: 10, maxToolCalls: 10, maxRepairs: 2 },
  },
  critic: { model: { provider: "scripted", script: [{ text: verdict(0.4) }, { text: verdict(1) }] } },
};

function print(event: AuditEvent): void {
  if (config.DEMO_OUTPUT === "json") {
    process.stdout.write(`${JSON.stringify(event)}\n`);
    return;
  }
  const reason = event.reason ? `  ${event.reason}` : "";
  process.stdout.write(
    `#${String(event.seq).padStart(2)}  ${event.phase.padEnd(9)} ${event.kind.padEnd(20)} ${event.status.padEnd(8)} ${event.actor}${reason}\n`,
  );
}

const runner = new LoopRunner({
  registry: new ToolRegistry([echoTool]),
  clock: systemClock,
  random: systemRandom,
  ids: uuidIds,
  memory: new InMemoryMemory(systemClock, uuidIds),
  onEffect: (effect) => {
    if (effect.type === "audit") print(effect.event);
  },
});

const result = await runner.run(spec);
const { state } = result;
process.stdout.write(
  `\nrun ${state.runId}: ${state.status} (${state.terminal?.reason ?? ""})\n` +
    `output: ${state.terminal?.output ?? ""}\n` +
    `model calls ${state.usage.modelCalls}, tool calls ${state.usage.toolCalls}, tokens ${state.usage.inputTokens}+${state.usage.outputTokens}, ` +
    `${result.audit.length} audit events, ${result.wal.length} WAL records, artifact ${state.terminal?.artifactHash.slice(0, 16) ?? ""}…\n`,
);
process.exitCode = state.status === "committed" ? 0 : 1;
