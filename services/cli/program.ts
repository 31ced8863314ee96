/**
 * agentctl's commands as one commander program, built without reading argv or connecting: main.ts
 * runs it, and docs/agentctl.md is generated from it (test/helpers/reference/agentctl-page.ts), so its descriptions are the
 * user's documentation.
 */
import { join } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { PrivacyTier } from "../../shared/contracts/capability.js";
import { RunStatusValue } from "../../shared/contracts/run-status.js";
import { DEFAULT_CHECKPOINT_EVERY } from "../../shared/loop/state.js";
import { jsonErrors } from "../../shared/runtime/cli-errors.js";
import { ActorEnv, parseEnv } from "../../shared/runtime/config.js";
import { AgentError, toAgentError } from "../../shared/runtime/errors.js";
import { uuidIds } from "../../shared/runtime/ids.js";
import { readSpecFile } from "./spec-file.js";
import { healthLines, readClusterHealth } from "./cluster-health.js";
import { out, runIdArg, withClient } from "./command-kit.js";
import { addControlCommands } from "./control-commands.js";
import { registerPolicies } from "../../shared/loop/policy-registry.js";
import { loadPolicyModules } from "../../shared/runtime/policy-modules.js";
import { checkpointLine, contracts, listRuns, openBreakers, replayRun, UNFINISHED } from "./inspect.js";
import { repoRoot } from "../local/paths.js";
import { auditLine, breakerLine, RUN_ID_WIDTH, runLine } from "./render.js";
import { STREAM_TAIL_DEFAULT, tailAudit } from "./audit-tail.js";
import { resultJson, runResult } from "./result.js";
import { resultLines } from "./result-text.js";
import { SPEC_FLAGS, specFromFlags, type SpecFlags } from "./spec-flags.js";
import { watch, WATCH_EXIT_HELP } from "./watch.js";

interface ReplayFlags {
  models?: boolean;
  strict?: boolean;
  checkpointEvery: number;
  policyModules?: string;
  json?: boolean;
}

const runStatuses = (value: string): Set<RunStatusValue> => {
  const wanted = value.split(",").map((v) => v.trim());
  const bad = wanted.filter((v) => !RunStatusValue.safeParse(v).success);
  if (bad.length > 0 || wanted.length === 0)
    throw new InvalidArgumentError(
      `expected statuses among ${RunStatusValue.options.join(", ")}; got '${bad.join(",") || value}'`,
    );
  return new Set(wanted as RunStatusValue[]);
};

/** A whole-number flag in [min, max]; `expected` is what a bad value is told. */
const wholeIn =
  (min: number, max: number, expected: string) =>
  (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(expected);
    return n;
  };

const positiveInt = wholeIn(1, Infinity, "expected a positive integer");
const listenMs = wholeIn(100, 60_000, "expected milliseconds, 100 to 60000");
const nonNegativeInt = wholeIn(0, Infinity, "expected a whole number, 0 or more");

const nonNegativeNumber = (value: string): number => {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < 0)
    throw new InvalidArgumentError("expected a number, 0 or more");
  return n;
};

type SubmitFlags = SpecFlags & { runId?: string; watch?: boolean };

/** A flag that shapes a spec, given with a spec file, would be ignored: refused instead. */
function refuseSpecFlags(command: Command): void {
  const given = SPEC_FLAGS.filter((key) => command.getOptionValueSource(key) === "cli");
  if (given.length > 0)
    throw new AgentError(
      "INVALID_INPUT",
      `${given.map(flagName).join(", ")} shape a spec from flags; with a spec file, set them in the file`,
    );
}

const flagName = (key: string): string => `--${key.replaceAll(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

/** agentctl's commands, ready to parse argv (main.ts) or to be rendered as docs (test/helpers/reference/agentctl-page.ts). */
export function program(): Command {
  const cmd = jsonErrors(new Command("agentctl")).description(
    "operate a bounded agent cluster on NATS: submit and follow runs, decide approvals, stop and resume runs, read the audit trail, check the cluster (NATS_URL, AGENTS_PREFIX)",
  );
  // The flag is the variable for one command, and replaces any other login the environment names.
  cmd
    .option(
      "--creds <file>",
      "log in with this NATS credentials file (a user JWT and its seed): NATS_CREDS_FILE for this command, instead of NATS_USER or NATS_NKEY_SEED_FILE",
    )
    .hook("preAction", (root) => {
      const { creds } = root.opts<{ creds?: string }>();
      if (creds === undefined) return;
      for (const name of ["NATS_USER", "NATS_PASSWORD", "NATS_NKEY_SEED_FILE"]) delete process.env[name];
      process.env.NATS_CREDS_FILE = creds;
    });
  cmd
    .command("submit")
    .summary("submit a run from a RunSpec file, or from flags")
    .description(
      "submit a run from a RunSpec file, or from flags for a quick run; prints `admitted <runId>`, or `existing <runId>` when that run was submitted before with the same spec (another spec under its runId is refused with RUN_ID_TAKEN). The flags that shape a spec are refused next to a file, which sets them itself; budgets not given keep the RunSpec's defaults",
    )
    .argument(
      "[spec]",
      "path to the RunSpec: `.json` is read as JSON, any other name as YAML; a malformed file is refused with INVALID_SPEC saying where (line, column)",
    )
    .option(
      "--run-id <id>",
      "use this runId (re-submitting it returns the existing run; default: the spec's, else run-<uuid>)",
      runIdArg,
    )
    .option("-w, --watch", "then follow the run as `watch` does, and exit as it does")
    .option("--prompt <text>", "the task (instead of a spec file)")
    .option("--name <name>", "the agent's name", "cli-agent")
    .option(
      "--model <ref>",
      "the model: scripted:<answer> | openai:<model>[@<baseUrl>] | anthropic:<model>",
      "scripted:done",
    )
    .option("--tools <list>", "the tools the agent may call, comma-separated", "")
    .option("--capabilities <list>", "the capability kinds the agent holds, comma-separated", "compute")
    .option("--max-iterations <n>", "model calls the run may make", positiveInt)
    .option("--max-tool-calls <n>", "tool calls the run may make", nonNegativeInt)
    .option(
      "--max-cost-usd <usd>",
      "what the run may spend on models, in US dollars (0: unlimited)",
      nonNegativeNumber,
    )
    .option("--max-tokens-budget <n>", "model tokens the run may use, input and output", positiveInt)
    .option("--deadline-ms <ms>", "how long the run may take, wall clock, in milliseconds", positiveInt)
    .option(
      "--pattern <regex>",
      "a regular expression the answer must match (it must be non-empty in any case)",
    )
    .addOption(
      new Option(
        "--privacy <tier>",
        "the agent's privacy tier (default sovereign: no remote model or network tool; a hosted model needs private or standard)",
      ).choices(PrivacyTier.options),
    )
    .option("--requires-approval", "a human approves the answer before the run commits")
    .addHelpText("after", WATCH_EXIT_HELP)
    .action(async (path: string | undefined, opts: SubmitFlags, command: Command) => {
      if (path) refuseSpecFlags(command);
      const spec = path ? ((await readSpecFile(path)) as Record<string, unknown>) : specFromFlags(opts);
      // A run neither the flag nor the file names is named here: a submit whose reply a dropped
      // connection lost is then sent again (and answered "existing"), not left unknown.
      const runId: unknown = opts.runId ?? spec.runId ?? uuidIds.next("run");
      await withClient(async (client) => {
        const reply = await client.submit({ ...spec, runId });
        out(`${reply.status} ${reply.runId}`);
        if (opts.watch) await watch(client, reply.runId);
      });
    });
  cmd
    .command("watch")
    .summary("follow a run until it settles; the exit code says how")
    .description(
      "follow a run until it settles: its status, phase, iteration, tool-call and cost bars, and what it waits out (an open breaker, a model outage it retries). A failure ends with its diagnosis and the calls left to a human; a halted run, or one awaiting approval, with the commands that answer it. A run not submitted yet is waited for (saying so on stderr); a finished one whose status retention removed is NOT_FOUND. The exit code says how the run settled (see Exit codes)",
    )
    .argument("<runId>", "the run", runIdArg)
    .addHelpText("after", WATCH_EXIT_HELP)
    .action((runId: string) => withClient((client) => watch(client, runId)));
  cmd
    .command("runs")
    .summary("list the runs, the most recently changed first")
    .description(
      "list the runs the cluster holds, the most recently changed first: those not finished (queued, running, awaiting approval, halted) unless --status or --all says otherwise. A line shows the run's status, phase, iteration, tool calls, cost and last change; a child's root; the breaker or outage it waits on; its children not finished; why it halted or failed; a halted child whose parent can no longer take its result (`orphaned, cancel it`); a committed child a failing ancestor undid",
    )
    .option(
      "--status <list>",
      `only these statuses, comma-separated (${RunStatusValue.options.join(", ")})`,
      runStatuses,
    )
    .option(
      "--all",
      "every status, finished runs too (while their status is kept, see SUPERVISOR_STATUS_RETAIN_MS)",
    )
    .option("--root <runId>", "only this run and the runs under it (its children, theirs…)", runIdArg)
    .option("--limit <n>", "at most this many (it says how many more there are)", positiveInt, 50)
    .option("--json", "the runs' status records as one JSON array")
    .action(
      (opts: { status?: Set<RunStatusValue>; all?: boolean; root?: string; limit: number; json?: boolean }) =>
        withClient(async (client) => {
          const statuses = opts.all ? new Set(RunStatusValue.options) : (opts.status ?? UNFINISHED);
          const { runs, more, children, orphans } = await listRuns(client.bus, {
            statuses,
            limit: opts.limit,
            ...(opts.root ? { root: opts.root } : {}),
          });
          if (opts.json) return out(JSON.stringify(runs));
          if (runs.length === 0) return out(`no run is ${[...statuses].join(", ")}`);
          // Columns line up across a tree: a child's id (its parent's, and the call that spawned it) is longer.
          const idWidth = Math.max(RUN_ID_WIDTH, ...runs.map((run) => run.runId.length));
          for (const run of runs) {
            out(
              runLine(run, { children: children.get(run.runId), orphaned: orphans.get(run.runId), idWidth }),
            );
          }
          if (more > 0) out(`… and ${more} more (--limit)`);
        }),
    );
  cmd
    .command("status")
    .summary("print a run's status record as JSON")
    .description(
      "print the run's status record as JSON, a running run's phase, iteration and usage read from its log (`waiting`: the open breaker it waits on; `retrying`: a model outage it retries; `undone`: a committed child's calls a failing ancestor undid); a finished run whose status retention removed is NOT_FOUND",
    )
    .argument("<runId>", "the run", runIdArg)
    .action((runId: string) =>
      withClient(async (client) => {
        const status = await client.statusOf(runId);
        if (!status) throw toAgentError(new Error(`no run '${runId}'`), "NOT_FOUND");
        out(JSON.stringify(status, null, 2));
      }),
    );
  cmd
    .command("result")
    .summary("print what a finished or halted run ended with")
    .description(
      "print what a finished or halted run ended with, as its log's TERMINAL record says: a failure's report (reason, diagnosis, partial output, each compensation and whether it undid its call, the calls left to a human, the last checkpoint), a commit's output and provenance (model, tool calls, verifiers, critic scores, repairs), a halt's record (by whom, where, how to resume or cancel it). A run whose log holds no TERMINAL record (a lost admission, a child refused at its submit) is told from its closing audit event or its status, saying so; a run still going or awaiting approval is RUN_NOT_FINISHED",
    )
    .argument("<runId>", "the run", runIdArg)
    .option("--json", "one JSON object: outcome, reason, time, hash and the artifact whole")
    .action((runId: string, opts: { json?: boolean }) =>
      withClient(async (client) => {
        const result = await runResult(client.bus, runId);
        if (opts.json) out(JSON.stringify(resultJson(result)));
        else for (const line of resultLines(result)) out(line);
      }),
    );
  addControlCommands(cmd);
  cmd
    .command("audit")
    .description("read the audit stream")
    .command("tail")
    .summary(`print audit events: a run's trail, or the stream's last ${STREAM_TAIL_DEFAULT}`)
    .description(
      `print audit events in stream order, one a line: a run's whole trail (its refused submits included), or every run's last ${STREAM_TAIL_DEFAULT} (-n, --all). A run the cluster does not know (no log, status or refused submit under this AGENTS_PREFIX) is NOT_FOUND, or with -f waited for, saying so on stderr`,
    )
    .argument("[runId]", "only this run's events", runIdArg)
    .option("--json", "one JSON event per line")
    .option("-f, --follow", "then print new events as they come, from where the read ended")
    .option(
      "-n, --last <n>",
      "only the last n events, saying on stderr how many earlier ones it left out (0, with -f: only new ones)",
      nonNegativeInt,
    )
    .option("--all", "every event the stream holds, from the first")
    .action(
      (
        runId: string | undefined,
        opts: { json?: boolean; follow?: boolean; last?: number; all?: boolean },
      ) => {
        if (opts.all && opts.last !== undefined)
          throw new AgentError("INVALID_INPUT", "--all and --last: give one of them");
        if (opts.last === 0 && !opts.follow)
          throw new AgentError(
            "INVALID_INPUT",
            "-n 0 prints nothing without -f (which then prints only new events)",
          );
        const last = opts.last ?? (runId || opts.all ? undefined : STREAM_TAIL_DEFAULT);
        return withClient(async (client) => {
          for await (const event of tailAudit(client.bus, {
            ...(runId ? { runId } : {}),
            ...(last !== undefined ? { last } : {}),
            follow: opts.follow ?? false,
            onLeftOut: (count) =>
              process.stderr.write(
                `${count} earlier events left out (-n <count> shows more, --all every one)\n`,
              ),
            onUnknownRun: () =>
              process.stderr.write(`no run '${runId}' yet: waiting for its first event (Ctrl-C stops)\n`),
          }))
            out(opts.json ? JSON.stringify(event) : auditLine(event));
        });
      },
    );
  cmd
    .command("replay")
    .summary("re-derive a run's transitions from its log and compare every record")
    .description(
      "re-derive every transition of a run from its log and compare each record: identical, or NONDETERMINISM. Checkpoints are compared on their own and reported (identical, or the first that differs: a run recorded by another build, or by workers with another AGENT_CHECKPOINT_EVERY)",
    )
    .argument("<runId>", "the run", runIdArg)
    .option(
      "--models",
      "also ask the run's model again with every recorded request (a deterministic model actor) and compare its answers",
    )
    .option(
      "--strict",
      "compare checkpoints like every other record: NONDETERMINISM when they differ (a run recorded by this build)",
    )
    .option(
      "--checkpoint-every <n>",
      "the workers' AGENT_CHECKPOINT_EVERY, where the replay writes its checkpoints",
      positiveInt,
      DEFAULT_CHECKPOINT_EVERY,
    )
    .option(
      "--policy-modules <modules>",
      "the workers' AGENT_POLICY_MODULES (comma-separated): a run under a registered convergence policy replays through it",
    )
    .option("--json", "the report as one JSON object (records, transitions, final hash, checkpoints, models)")
    .action((runId: string, opts: ReplayFlags) =>
      withClient(async (client) => {
        const modules = (opts.policyModules ?? "")
          .split(",")
          .map((m) => m.trim())
          .filter(Boolean);
        const report = await replayRun(client.bus, runId, {
          models: opts.models === true,
          strict: opts.strict === true,
          checkpointEvery: opts.checkpointEvery,
          policies: registerPolicies(await loadPolicyModules(modules, process.cwd())),
        });
        if (opts.json) {
          out(JSON.stringify(report));
          return;
        }
        out(
          `replay of ${runId}: ${report.records} records, ${report.transitions} transitions reproduced identically; final hash ${report.finalHash} (${report.status}, ${report.phase})`,
        );
        if (report.checkpoints) out(checkpointLine(report.checkpoints));
        if (report.models)
          out(
            report.models.skipped
              ? `models: not asked again (${report.models.skipped})`
              : `models: ${report.models.checked} answers asked again, identical to the record`,
          );
      }),
    );
  cmd
    .command("breakers")
    .summary("list the model providers whose breaker is open")
    .description(
      "list the model providers whose shared breaker is open (no worker asks them until a try succeeds): since when, the next try (or the worker trying it), the failed tries, the error that opened it, and the unfinished runs waiting on it",
    )
    .option("--json", "the breakers as one JSON array")
    .action((opts: { json?: boolean }) =>
      withClient(async (client) => {
        const breakers = await openBreakers(client.bus);
        if (opts.json) out(JSON.stringify(breakers));
        else if (breakers.length === 0) out("no model provider's breaker is open");
        else for (const breaker of breakers) out(breakerLine(breaker, Date.now()));
      }),
    );
  cmd
    .command("cluster")
    .summary("check the cluster: exit code 1 when something needs an operator")
    .description(
      "report on the cluster: the kill switch (who set it, when and why), the streams and buckets (replicas, messages, bytes, leader, each copy current, behind or offline), JetStream storage, the work queue (jobs waiting, held, redelivered), the supervisors and critics that answer, every tool a run has listed and whether a service answers it, and the agent workers heard. Then what needs an operator: the kill switch on, a store missing, short of AGENTS_REPLICAS or of the others' replicas, leaderless or with a copy down, storage at 90 % of its limit, no supervisor, supervisors that disagree on a shared setting, no critic, a tool no service answers, jobs waiting and no worker. Prints `healthy` and exits 0, or the problems and exits 1 (for a cron job or a probe)",
    )
    .option("--json", "the report as one JSON object")
    .option(
      "--listen-ms <ms>",
      "how long to listen for the agent workers' beats (they beat every AGENT_BEAT_MS) and the supervisors', critics' and tools' answers",
      listenMs,
      1_500,
    )
    .option("--no-critic", "no critic answering is not a problem: this deployment's runs have none")
    .action((opts: { json?: boolean; listenMs: number; critic: boolean }) =>
      withClient(async (client) => {
        const { AGENTS_REPLICAS } = parseEnv(ActorEnv, process.env);
        const health = await readClusterHealth(client.bus, AGENTS_REPLICAS, opts.listenMs, {
          critic: opts.critic,
        });
        if (opts.json) out(JSON.stringify(health));
        else for (const line of healthLines(health)) out(line);
        if (health.problems.length > 0) process.exitCode = 1;
      }),
    );
  cmd
    .command("contracts")
    .description(
      "list the loop contract's invariants (INV-…, RT-…) and the tests bound to each; the durability invariants are in docs/invariants.md",
    )
    .addOption(
      new Option("--file <path>", "the invariants map").default(
        join(repoRoot(), "test", "invariants.json"),
        "test/invariants.json in this checkout",
      ),
    )
    .action(async (opts: { file: string }) => {
      for (const line of await contracts(opts.file)) out(line);
    });
  return cmd;
}
