/**
 * `npm run demo:inprocess`: one bounded agent run in this process (no NATS), with the scripted model, the echo tool and
 * a scripted critic, printing the audit stream as it happens. The first answer fails the safety
 * gate, so the run goes through REPAIR before it may COMMIT.
 */
import { z } from "zod";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { LoopRunner } from "../../shared/loop/runner.js";
import { InMemoryMemory } from "../../shared/memory/in-memory.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { uuidIds } from "../../shared/runtime/ids.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { ToolRegistry } from "../../shared/tools/registry.js";
import { demoSpec } from "./demo-spec.js";

const Config = z.object({ DEMO_OUTPUT: z.enum(["pretty", "json"]).default("pretty") });
const config = Config.parse(process.env);

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
  memory: new InMemoryMemory(systemClock),
  onEffect: (effect) => {
    if (effect.type === "audit") print(effect.event);
  },
});

const result = await runner.run(demoSpec);
const { state } = result;
process.stdout.write(
  `\nrun ${state.runId}: ${state.status} (${state.terminal?.reason ?? ""})\n` +
    `output: ${state.terminal?.output ?? ""}\n` +
    `model calls ${state.usage.modelCalls}, tool calls ${state.usage.toolCalls}, tokens ${state.usage.inputTokens}+${state.usage.outputTokens}, ` +
    `${result.audit.length} audit events, ${result.wal.length} WAL records, artifact ${state.terminal?.artifactHash.slice(0, 16) ?? ""}…\n`,
);
process.exitCode = state.status === "committed" ? 0 : 1;
