/** agentctl's commands that act on runs: approvals, halt, resume, cancel and the kill switch. */
import { InvalidArgumentError, type Command } from "commander";
import { z } from "zod";
import { decodeText } from "../../shared/bus/codec.js";
import type { CallSettlement } from "../../shared/contracts/loop-event.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { out, runIdArg, withClient } from "./command-kit.js";

/** The flags of `halt` and `cancel`. */
interface StopFlags {
  by: string;
  reason: string;
  tree?: boolean;
}

/** A halt's or a cancel's request (HaltRequest and CancelRequest have one shape). */
const stopRequest = (runId: string, opts: StopFlags) => ({
  runId,
  by: opts.by,
  reason: opts.reason,
  ...(opts.tree ? { tree: true } : {}),
});

interface ResumeFlags {
  by: string;
  tree?: boolean;
  settle?: "ran" | "notRun";
  output?: { value: unknown };
}

const settleArg = (value: string): "ran" | "notRun" => {
  if (value === "ran") return "ran";
  if (value === "not-run") return "notRun";
  throw new InvalidArgumentError("ran or not-run");
};

/** JSON, boxed so that `null` is a result too. */
const jsonArg = (value: string): { value: unknown } => {
  try {
    return { value: decodeText(z.unknown(), value) };
  } catch {
    throw new InvalidArgumentError("not valid JSON");
  }
};

/** A resume's settlement, from --settle and --output (INVALID_INPUT when they do not go together). */
function settlement(opts: ResumeFlags): { settle?: CallSettlement } {
  if (opts.settle === "ran") {
    if (!opts.output) throw new AgentError("INVALID_INPUT", "--settle ran needs the call's --output");
    return { settle: { decision: "ran", output: opts.output.value } };
  }
  if (opts.output) throw new AgentError("INVALID_INPUT", "--output goes with --settle ran");
  return opts.settle === "notRun" ? { settle: { decision: "notRun" } } : {};
}

/** Adds the commands that act on runs to `cmd`. */
export function addControlCommands(cmd: Command): void {
  for (const decision of ["approve", "reject"] as const) {
    cmd
      .command(decision)
      .description(`${decision} a run waiting for approval`)
      .argument("<runId>", "the run", runIdArg)
      .option("--by <name>", "who decides (recorded in the audit)", process.env.USER ?? "operator")
      .option("--reason <text>", "why")
      .action((runId: string, opts: { by: string; reason?: string }) =>
        withClient(async (client) =>
          out(
            await client.decide(runId, {
              decision,
              by: opts.by,
              ...(opts.reason ? { reason: opts.reason } : {}),
            }),
          ),
        ),
      );
  }
  cmd
    .command("modify")
    .description(
      "send a run waiting for approval back to its agent with what to change; it asks again when revised",
    )
    .argument("<runId>", "the run", runIdArg)
    .requiredOption("--feedback <text>", "what to change (given to the model)", (v: string) => {
      if (v.trim() === "") throw new InvalidArgumentError("say what to change");
      return v;
    })
    .option("--by <name>", "who decides (recorded in the audit)", process.env.USER ?? "operator")
    .action((runId: string, opts: { by: string; feedback: string }) =>
      withClient(async (client) =>
        out(await client.decide(runId, { decision: "modify", by: opts.by, feedback: opts.feedback })),
      ),
    );
  cmd
    .command("halt")
    .description(
      "halt one run now, wherever it is (running, or waiting for a human, its children or a model provider): it keeps its place and frees its pool slot; resume continues it",
    )
    .argument("<runId>", "the run", runIdArg)
    .option("--reason <text>", "why (recorded in the audit)", "stopped by an operator")
    .option("--by <name>", "who (recorded in the audit)", process.env.USER ?? "operator")
    .option("--tree", "every run of the tree under it too (its children, theirs…), the run first")
    .action((runId: string, opts: StopFlags) =>
      withClient(async (client) => out(await client.halt(stopRequest(runId, opts)))),
    );
  cmd
    .command("resume")
    .description(
      "resume a halted run (after the kill switch or a reconciliation) from where it stopped; a child whose parent has finished, or is undoing its calls, is refused (PARENT_FINISHED): cancel it instead",
    )
    .argument("<runId>", "the run", runIdArg)
    .option("--by <name>", "who (recorded in the audit)", process.env.USER ?? "operator")
    .option(
      "--tree",
      "every halted run of the tree under it, the deepest first and the run last (children whose parent has finished stay halted, named in the reply)",
    )
    .option(
      "--settle <ran|not-run>",
      "for a run halted for a reconciliation: what you found of the call whose outcome was unknown (ran: it went through, give its --output; not-run: it did not, and runs when the run makes it again)",
      settleArg,
    )
    .option(
      "--output <json>",
      "with --settle ran: the call's result, as JSON (what the model is given)",
      jsonArg,
    )
    .action((runId: string, opts: ResumeFlags) =>
      withClient(async (client) =>
        out(
          await client.resume({
            runId,
            by: opts.by,
            ...(opts.tree ? { tree: true } : {}),
            ...settlement(opts),
          }),
        ),
      ),
    );
  cmd
    .command("cancel")
    .description(
      "end a run for good: it stops where it is (as a halt stops it), undoes what it can (the compensations of its completed tool calls, most recent first, the call it waits on included once its tool service says it went through) and fails with RUN_CANCELLED, which a parent waiting for it gets as its result",
    )
    .argument("<runId>", "the run", runIdArg)
    .requiredOption("--reason <text>", "why (recorded in the audit and the run's failure)")
    .option("--by <name>", "who (recorded in the audit)", process.env.USER ?? "operator")
    .option(
      "--tree",
      "every run of the tree under it that has not finished, the deepest first and the run last",
    )
    .action((runId: string, opts: StopFlags) =>
      withClient(async (client) => out(await client.cancel(stopRequest(runId, opts)))),
    );
  cmd
    .command("kill-switch")
    .description("stop all admissions and halt running runs at their next step (on), or lift it (off)")
    .argument("<state>", "on | off", (v: string) => {
      if (v !== "on" && v !== "off") throw new InvalidArgumentError("expected 'on' or 'off'");
      return v;
    })
    .option("--reason <text>", "why", "operator request")
    .option("--by <name>", "who", process.env.USER ?? "operator")
    .action((state: "on" | "off", opts: { reason: string; by: string }) =>
      withClient(async (client) =>
        out(await client.killSwitch({ active: state === "on", reason: opts.reason, by: opts.by })),
      ),
    );
}
