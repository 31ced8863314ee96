/**
 * `npm run demo:trading`: the trading example on a local cluster. Boots the runtime's actors plus
 * the trading executor (a paper venue with faults injected) and the deterministic planner, runs
 * TICKS ticks one after another (each a run), prints each tick's decision, P&L and runway, and
 * ends with a summary. Exit code 0 when every tick reached a terminal status.
 */
import { z } from "zod";
import { decodeText } from "../../shared/bus/codec.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { ClusterClient } from "../../services/cli/client.js";
import { CanonicalState } from "./executor/contract.js";
import { tickSpec } from "./planner/spec.js";
import { TickOutcome } from "./planner/tick.js";
import { tradingActors } from "./actors.js";
import { clientBus, withLocalCluster, type Booted } from "../../services/local/boot.js";

const TICKS = Number(process.env.TICKS ?? 30);
const CONFIG = {
  seed: process.env.TRADING_SEED ?? "demo-7",
  faults: {
    reject_rate: 0.05,
    timeout_rate: 0.1,
    partial_fill_rate: 0.15,
    drift_rate: 0.02,
    halt_rate: 0.03,
    stale_rate: 0.05,
    spread_spike_rate: 0.05,
  },
};
const SYMBOLS = ["BTC-USD", "ETH-USD", "DOGE-USD"];
const say = (line: string): void => void process.stdout.write(`${line}\n`);
const money = (n: number): string =>
  n.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });

/** The book after the decision, as the executor's RECORD audit note carries it. */
const LedgerSummary = z.object({
  equity: z.number(),
  pnl: CanonicalState.shape.pnl,
  treasury: CanonicalState.shape.treasury,
  positions: z.array(z.object({ symbol: z.string(), qty: z.number() })),
  kill_switch_active: z.boolean(),
});
type LedgerSummary = z.infer<typeof LedgerSummary>;

function ledgerOf(events: AuditEvent[]): LedgerSummary | undefined {
  const record = events.findLast((e) => e.kind === "tool.reported" && e.data?.step === "RECORD");
  const parsed = LedgerSummary.safeParse(record?.data?.ledger);
  return parsed.success ? parsed.data : undefined;
}

function outcomeOf(text: string | undefined): { success: true; data: TickOutcome } | { success: false } {
  try {
    return { success: true, data: decodeText(TickOutcome, text ?? "") };
  } catch {
    return { success: false };
  }
}

/** The first blocking reason of a rejected tick, short. */
const why = (reason: string): string => (/remediation: ([^;|]+)/.exec(reason)?.[1] ?? "").slice(0, 70);

function notable(events: AuditEvent[]): string {
  const marks = events
    .filter((e) => e.kind === "tool.reported")
    .map((e) => String(e.reason ?? ""))
    .filter((r) => /^(SAFE_RECOVERY|STOP_TRADING|ERROR_EVENT|reconciled|kill switch on)/.test(r))
    .map((r) => r.split(":")[0] ?? r);
  return marks.length > 0 ? `  [${[...new Set(marks)].join(", ")}]` : "";
}

async function demo(booted: Booted): Promise<boolean> {
  const bus = await clientBus(booted, "trading-demo");
  const client = new ClusterClient(bus);
  const outcomes = new Map<string, number>();
  let allSettled = true;
  let last: LedgerSummary | undefined;
  try {
    say(`\n${TICKS} ticks, seed ${CONFIG.seed}, faults ${JSON.stringify(CONFIG.faults)}\n`);
    say("tick   outcome         steps   equity         P&L today   realized    runway  notes");
    const stamp = Date.now().toString(36);
    for (let n = 1; n <= TICKS; n++) {
      const tick = `t-${String(n).padStart(3, "0")}`;
      const runId = `tick-${stamp}-${n}`;
      const task = {
        decision_id: `d-${stamp}-${n}`,
        tick_id: tick,
        as_of: new Date(Date.UTC(2026, 0, 1, 6 * n)).toISOString(),
        symbols: SYMBOLS,
      };
      await client.submit(tickSpec(task, { runId }));
      let final = await client.status.get(runId);
      for await (const status of client.follow(runId)) final = status;
      const events = await client.audit(runId);
      const parsed = outcomeOf(final?.terminal?.output);
      const outcome =
        final?.status === "committed" && parsed.success ? parsed.data.outcome : `run ${final?.status ?? "?"}`;
      if (!["committed", "failed", "halted"].includes(final?.status ?? "")) allSettled = false;
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      const book = ledgerOf(events) ?? last;
      last = book;
      const steps = events.filter((e) => e.kind === "tool.completed").length;
      say(
        `${tick}  ${outcome.padEnd(14)} ${String(steps).padStart(5)}   ${book ? line(book) : "(no record)"}${notable(events)}${outcome === "rejected" && parsed.success ? `  ${why(parsed.data.reason)}` : ""}`,
      );
    }
    summary(outcomes, last);
  } finally {
    await bus.nc.drain();
  }
  return allSettled;
}

const line = (b: LedgerSummary): string =>
  `${money(b.equity).padStart(12)}  ${money(b.pnl.pnl_today).padStart(10)}  ${money(b.pnl.realized).padStart(9)}  ${b.treasury.runway_days.toFixed(1).padStart(6)}d${b.kill_switch_active ? "  KILL SWITCH" : ""}`;

function summary(outcomes: Map<string, number>, book: LedgerSummary | undefined): void {
  say("\nsummary");
  say("| metric | value |\n| --- | --- |");
  for (const [outcome, count] of [...outcomes.entries()].sort()) say(`| ticks ${outcome} | ${count} |`);
  if (!book) return;
  say(`| equity | ${money(book.equity)} |`);
  say(`| realized P&L | ${money(book.pnl.realized)} |`);
  say(`| unrealized P&L | ${money(book.pnl.unrealized)} |`);
  say(`| rolling 30-day surplus | ${money(book.treasury.rolling_surplus_30d)} |`);
  say(`| runway | ${book.treasury.runway_days} days |`);
  say(`| positions | ${book.positions.map((p) => `${p.symbol} ${p.qty}`).join(", ") || "none"} |`);
  say(`| kill switch | ${book.kill_switch_active ? "ON" : "off"} |`);
}

say("starting a local cluster with the trading executor and planner…");
const ok = await withLocalCluster(
  say,
  {
    extra: tradingActors({ TRADING_CONFIG: JSON.stringify(CONFIG) }),
  },
  demo,
);
process.exit(ok ? 0 : 1);
