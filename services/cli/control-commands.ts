/** agentctl's commands that act on runs: approvals, halt, resume, cancel and the kill switch. */
import { InvalidArgumentError, Option, type Command } from "commander";
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

/** `--by`: who acts, recorded in the audit; the user's login name unless given. */
const byOption = (): Option =>
  new Option("--by <name>", "who (recorded in the audit)").default(
    process.env.USER ?? "operator",
    "$USER, else operator",
  );

const DECISIONS = {
  approve: "approve a run awaiting approval: its commit, or a tool call that asked for a human",
  reject:
    "reject a run awaiting approval: it fails, the reason kept in `approval.decided` and its failure report (a held tool call is refused instead, and the model told)",
} as const;

/** Adds the commands that act on runs to `cmd`. */
export function addControlCommands(cmd: Command): void {
  for (const decision of ["approve", "reject"] as const) {
    cmd
      .command(decision)
      .summary(`${decision} a run awaiting approval`)
      .description(DECISIONS[decision])
      .argument("<runId>", "the run", runIdArg)
      .addOption(byOption())
      .option("--reason <text>", "why (recorded in the audit)")
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
    .summary("send a run awaiting approval back to its agent with what to change")
    .description(
      "send a run awaiting approval back to its agent with what to change: the model revises its answer and the run asks again (a held tool call is refused with the feedback)",
    )
    .argument("<runId>", "the run", runIdArg)
    .requiredOption("--feedback <text>", "what to change (given to the model)", (v: string) => {
      if (v.trim() === "") throw new InvalidArgumentError("say what to change");
      return v;
    })
    .addOption(byOption())
    .action((runId: string, opts: { by: string; feedback: string }) =>
      withClient(async (client) =>
        out(await client.decide(runId, { decision: "modify", by: opts.by, feedback: opts.feedback })),
      ),
    );
  cmd
    .command("halt")
    .summary("halt a run now, keeping its place; resume continues it")
    .description(
      "halt one run now, wherever it is (in a step, taken over from its worker; or waiting for a human, its children or a model provider): it keeps its place and frees its pool slot, and resume continues it. A run no worker has started yet halts once one does; one undoing its calls before it fails is refused. Its children go on (--tree halts them), and a halted child keeps its parent waiting until it is resumed and ends",
    )
    .argument("<runId>", "the run", runIdArg)
    .option("--reason <text>", "why (recorded in the audit)", "stopped by an operator")
    .addOption(byOption())
    .option("--tree", "every run of the tree under it too (its children, theirs…), the run first")
    .action((runId: string, opts: StopFlags) =>
      withClient(async (client) => out(await client.halt(stopRequest(runId, opts)))),
    );
  cmd
    .command("resume")
    .summary("resume a halted run from where it stopped")
    .description(
      "resume a halted run (by halt, the kill switch or a reconciliation) from where it stopped, once it has a pool slot again (HALT_PENDING when the halt has not freed its own within 5 s). A child whose parent has finished, or is undoing its calls, is refused (PARENT_FINISHED): cancel it instead",
    )
    .argument("<runId>", "the run", runIdArg)
    .addOption(byOption())
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
    .summary("end a run for good, undoing what it can")
    .description(
      "end a run for good: it stops where it is (as a halt stops it; one not started yet, once a worker starts it), undoes what it can (the compensations of its completed tool calls, most recent first, the call it waits on included once its tool service says it went through) and fails with RUN_CANCELLED, which a parent waiting for it gets as its result. Allowed under the kill switch; a run already undoing its calls is refused. A parent cancelled alone cancels its children still going and leaves halted ones halted (cancel --tree ends them); its reply names both, and the committed children its compensations undo",
    )
    .argument("<runId>", "the run", runIdArg)
    .requiredOption("--reason <text>", "why (recorded in the audit and the run's failure)")
    .addOption(byOption())
    .option(
      "--tree",
      "every run of the tree under it that has not finished, the deepest first and the run last",
    )
    .action((runId: string, opts: StopFlags) =>
      withClient(async (client) => out(await client.cancel(stopRequest(runId, opts)))),
    );
  cmd
    .command("kill-switch")
    .summary("stop admissions and halt running runs (on), or lift it (off)")
    .description(
      "on: no run is admitted, and every running run halts at its next step (one undoing its calls finishes the undo); off: lifts it",
    )
    .argument("<state>", "on | off", (v: string) => {
      if (v !== "on" && v !== "off") throw new InvalidArgumentError("expected 'on' or 'off'");
      return v;
    })
    .option("--reason <text>", "why (recorded in the audit)", "operator request")
    .addOption(byOption())
    .action((state: "on" | "off", opts: { reason: string; by: string }) =>
      withClient(async (client) =>
        out(await client.killSwitch({ active: state === "on", reason: opts.reason, by: opts.by })),
      ),
    );
}
