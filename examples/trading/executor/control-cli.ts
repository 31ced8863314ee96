/**
 * `npm run --silent trading:control -- <action> --reason <why> [--by <name>]`: writes the RunSpec
 * of one operator action as JSON, for `agentctl submit`. The executor holds anything the seed
 * reserves for a human until `agentctl approve <runId> --by <name>`.
 */
import { pathToFileURL } from "node:url";
import { Command, InvalidArgumentError } from "commander";
import {
  endQuietlyWhenStdoutCloses,
  jsonErrors,
  reportCliError,
} from "../../../shared/runtime/cli-errors.js";
import { CONTROL_FUNCTION, ControlChange } from "./control-contract.js";
import { type ControlAction, controlSpec } from "./control-spec.js";

const number = (value: string): number => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("expected a positive number");
  return n;
};
const list = (value: string): string[] => value.split(",").filter((s) => s.length > 0);

/** key=value pairs of numbers, e.g. max_notional_per_trade=5000. */
const limits = (pairs: string[]): Record<string, number> =>
  Object.fromEntries(
    pairs.map((pair) => {
      const [key, value] = pair.split("=");
      if (!key || value === undefined) throw new InvalidArgumentError(`'${pair}' is not key=value`);
      return [key, number(value)];
    }),
  );

const change = (c: unknown): ControlAction => {
  const parsed = ControlChange.safeParse(c);
  if (!parsed.success)
    throw new InvalidArgumentError(
      parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "),
    );
  return { fn: CONTROL_FUNCTION, change: parsed.data };
};

export function controlProgram(write: (text: string) => void): Command {
  const cmd = jsonErrors(new Command("trading-control"))
    .description("RunSpec of one operator action on the trading executor (submit it with agentctl)")
    .requiredOption("--reason <text>", "why (recorded in the audit trail)")
    .option("--by <name>", "who asks (recorded)", process.env.USER ?? "operator")
    .option("--id <id>", "correlation id (decision_id, tick_id, idempotency key)", `ctl-${Date.now()}`);
  const emit = (action: ControlAction): void => {
    const o = cmd.opts<{ reason: string; by: string; id: string }>();
    write(
      `${JSON.stringify(controlSpec(action, { id: o.id, reason: o.reason, by: o.by, runId: o.id }), null, 2)}\n`,
    );
  };
  cmd
    .command("kill-switch-off")
    .description("turn the kill switch off")
    .action(() => emit({ fn: "set_kill_switch", active: false }));
  cmd
    .command("mode")
    .argument("<mode>", "paper | shadow | live")
    .action((mode: string) => emit(change({ kind: "mode", mode })));
  cmd
    .command("limits")
    .argument("<key=value...>", "hard risk limits to set")
    .action((pairs: string[]) => emit(change({ kind: "risk_limits", limits: limits(pairs) })));
  cmd
    .command("transfer")
    .argument("<direction>", "to_operating | to_trading")
    .argument("<amount>", "cash to move", number)
    .action((direction: string, amount: number) =>
      emit(change({ kind: "treasury_transfer", direction, amount })),
    );
  cmd
    .command("strategy")
    .option("--allowed <ids>", "allowed strategy ids, comma-separated", list)
    .option("--universe <symbols>", "symbols new orders may name, comma-separated", list)
    .action((o: { allowed?: string[]; universe?: string[] }) =>
      emit(
        change({
          kind: "strategy",
          ...(o.allowed ? { allowed_strategies: o.allowed } : {}),
          ...(o.universe ? { universe: o.universe } : {}),
        }),
      ),
    );
  for (const [name, suppress] of [
    ["suppress-alert", true],
    ["restore-alert", false],
  ] as const)
    cmd
      .command(name)
      .argument("<alert>", "the stop condition, e.g. 'runway below the hard minimum'")
      .action((alert: string) => emit(change({ kind: "alert_override", alert, suppress })));
  return cmd;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  endQuietlyWhenStdoutCloses();
  try {
    await controlProgram((t) => process.stdout.write(t)).parseAsync(process.argv);
  } catch (err) {
    reportCliError(err, "INVALID_INPUT");
  }
}
