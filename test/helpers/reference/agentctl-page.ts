/**
 * docs/agentctl.md, rendered from agentctl's commander program: each command's usage, description,
 * arguments and options with their defaults, after the facts no single command's help says. Pure,
 * so test/unit/agentctl-reference.test.ts renders it and fails when the page is stale.
 */
import type { Argument, Command, Help, Option } from "commander";
import { escapeAngles, table } from "./markdown.js";
import { WATCH_EXIT_HELP } from "../../../services/cli/watch.js";

/** How agentctl is run, where it connects and how it answers. */
const PREAMBLE = `Generated from the commander program (\`services/cli/program.ts\`) by
\`test/unit/agentctl-reference.test.ts\`, which fails when this page is stale (\`-u\` writes it
anew): \`agentctl <command> --help\` says the same.

Run it as \`npm run agentctl -- <command>\` after a build (\`npm run build\`; \`npm start\` and
\`npm run cluster\` build too), or as \`node dist/services/cli/main.js <command>\`.

It connects to \`NATS_URL\` as \`NATS_USER\` with \`NATS_PASSWORD\`, under \`AGENTS_PREFIX\`
([Configuration](configuration.md#agentctl)), or with the NKey in \`NATS_NKEY_SEED_FILE\` or the
credentials file in \`NATS_CREDS_FILE\` (\`--creds\`), over TLS with \`NATS_TLS_CA\`,
\`NATS_TLS_CERT\` and \`NATS_TLS_KEY\` or a \`tls://\` URL ([Security](security.md)). With \`NATS_URL\` unset, in a checkout whose
\`npm run cluster\` is up, it finds that cluster through \`.cache/local-cluster.json\`
(\`AGENTS_LOCAL_CLUSTER_FILE\` moves it) and logs in as its \`cli\` user.

A command's answer goes to stdout; \`--json\`, where a command has it, prints it as JSON. An error is
one JSON line on stderr, \`{"error":{"code","message"}}\`, with exit code 2; when stderr is a
terminal, the same code and message as lines (\`error INVALID_SPEC: invalid RunSpec:\`, then each
problem on a line of its own). A bad flag or argument is \`INVALID_INPUT\`. Help (\`agentctl\`,
\`--help\`, \`help <command>\`, a group without its command as in \`agentctl audit\`) goes to stdout
with exit code 0.

**Exit codes.** 0 done, 2 an error; \`cluster\` exits 1 when something needs an operator; \`watch\`
and \`submit --watch\` exit by how the run settled:

\`\`\`text${WATCH_EXIT_HELP}
\`\`\``;

/** How commands wait and ask again: what a script around agentctl can rely on. */
const BEHAVIOUR: readonly string[] = [
  "**Waits.** Every command waits up to `AGENTCTL_WAIT_MS` (10 s; `0` fails at once) for a NATS server at `NATS_URL` and for its JetStream, and a command a supervisor answers (`submit`, `approve`, `reject`, `modify`, `halt`, `resume`, `cancel`, `kill-switch`) for a supervisor, saying so on stderr; then it fails with `BUS_UNAVAILABLE`, naming what did not answer. A JetStream request that times out later in a command is `BUS_UNAVAILABLE` too.",
  "**Provisioning.** A user that may not create the streams and buckets (`cli` under the shipped permissions), or raise them to its `AGENTS_REPLICAS`, waits the same way for a supervisor to, then names what is missing.",
  "**Logins.** A server that refuses the login fails the command at once with `BUS_AUTH`, naming the user (or the key) and the variables to set; TLS that fails (a server certificate not from `NATS_TLS_CA`, or naming another host; a server without TLS where TLS is asked for) fails it at once with `BUS_TLS`; a publish the server refuses to the user is `PERMISSION_DENIED` (the wrong `NATS_USER`, or a `permissions.conf` older than this build).",
  "**Submits are safe to repeat.** `submit` names every run (`--run-id`, else the spec's `runId`, else a `run-<uuid>` of its own), so a submit whose reply was lost (a dropped connection, or a supervisor that could not decide: `BUS_UNAVAILABLE`, `INTERNAL`) is sent again within the wait, and answered `existing` if the first copy was admitted. `STORAGE_FULL` is printed at once (see [Deploying](deploying.md)).",
  "**Stops are asked again.** `halt`, `cancel` and `kill-switch` are sent again the same way: stopping a run twice stops it once, and a copy that finds the first one's work done says so, the first reply lost. A halt or cancel asked while another's is queued for the run is queued once; the reply names who asked first, and this one's reason is not recorded.",
  "**Decisions name what they saw.** `approve`, `reject`, `modify` and `resume` (of one run) name the revision of the run's status they read, and the supervisor refuses one on a run changed since with `RUN_CHANGED`: a decision never lands on a later approval request, or a later halt, than the one its operator saw. They are sent again too, and a copy whose first one moved the run on is told as done.",
  "**Two deciders.** When two people decide one request at once, the first decision is recorded; a different one is refused with `RUN_CHANGED` naming it, and the same one is answered recorded, saying who decided first.",
  "**Sent once.** `resume --tree` is not sent again (a second copy could resume runs of the tree halted since); one the supervisor could not finish fails with `INTERNAL`, saying it may or may not have been carried out: read the run's status first.",
];

/** The page for `root` and every command under it. */
export function agentctlReference(root: Command): string {
  const help = root.createHelp();
  const commands = leaves(root, help);
  return [
    `# ${root.name()}`,
    "",
    sentence(root.description()),
    "",
    PREAMBLE,
    "",
    "## Behaviour",
    "",
    ...BEHAVIOUR.map((line) => `- ${line}`),
    "",
    ...rootOptions(root, help),
    "## Commands",
    "",
    ...table(
      ["command", "does"],
      commands.map((c) => [`[\`${pathOf(c)}\`](#${anchor(pathOf(c))})`, help.subcommandDescription(c)]),
    ),
    "",
    ...commands.flatMap((c) => section(c, help)),
  ].join("\n");
}

/** The commands that run something: a group (`audit`) stands for its sub-commands. */
function leaves(cmd: Command, help: Help): Command[] {
  // visibleCommands adds commander's implicit `help` command, which is not one of ours.
  const subs = help.visibleCommands(cmd).filter((c) => cmd.commands.includes(c));
  return subs.flatMap((c) => (c.commands.length > 0 ? leaves(c, help) : [c]));
}

/** The options agentctl takes before or after any command. */
function rootOptions(root: Command, help: Help): string[] {
  const options = help.visibleOptions(root).filter((o) => root.options.includes(o));
  if (options.length === 0) return [];
  return [
    "## Options of every command",
    "",
    ...table(["option", "default", "description"], options.map(optionRow)),
    "",
  ];
}

function section(cmd: Command, help: Help): string[] {
  const args = cmd.registeredArguments;
  // commander's own --help option is on every command: the preamble says so once.
  const options = help.visibleOptions(cmd).filter((o) => cmd.options.includes(o));
  return [
    `### ${pathOf(cmd)}`,
    "",
    `\`${help.commandUsage(cmd)}\``,
    "",
    sentence(cmd.description()),
    "",
    ...(args.length > 0 ? [...table(["argument", "description"], args.map(argumentRow)), ""] : []),
    ...(options.length > 0
      ? [...table(["option", "default", "description"], options.map(optionRow)), ""]
      : []),
  ];
}

function argumentRow(arg: Argument): string[] {
  const name = `${arg.name()}${arg.variadic ? "..." : ""}`;
  const term = arg.required ? `<${name}>` : `[${name}]`;
  const shown = defaultOf(arg);
  return [`\`${term}\``, `${arg.description}${choicesOf(arg)}${shown ? ` (default: ${shown})` : ""}`];
}

function optionRow(opt: Option): string[] {
  return [
    `\`${opt.flags}\``,
    defaultOf(opt),
    `${opt.mandatory ? "required: " : ""}${opt.description}${choicesOf(opt)}`,
  ];
}

/** A default as the help says it: its description when it has one (one that varies by machine). */
function defaultOf(item: Option | Argument): string {
  if (item.defaultValueDescription !== undefined) return item.defaultValueDescription;
  const value: unknown = item.defaultValue;
  if (value === undefined) return "";
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text === "" ? '`""`' : `\`${text}\``;
}

const choicesOf = (item: Option | Argument): string =>
  item.argChoices ? `; one of ${item.argChoices.map((c) => `\`${c}\``).join(", ")}` : "";

/** `audit tail`: the command's names below the program's. */
function pathOf(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

/** The id GitHub gives the command's heading. */
const anchor = (heading: string): string => heading.toLowerCase().replaceAll(" ", "-");

/** A description as prose: capitalised, with its full stop, `<` kept out of HTML. */
const sentence = (text: string): string => {
  const prose = escapeAngles(text);
  return `${prose.charAt(0).toUpperCase()}${prose.slice(1)}${prose.endsWith(".") ? "" : "."}`;
};
