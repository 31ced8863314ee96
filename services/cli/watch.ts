/** `agentctl watch` (and `submit --watch`): a run followed until it settles, its exit code its outcome. */
import type { RunStatusValue } from "../../shared/contracts/run-status.js";
import type { ClusterClient } from "./client.js";
import { out } from "./command-kit.js";
import { nextSteps, statusLine } from "./render.js";
import { runResult } from "./result.js";
import { failureSummary } from "./result-text.js";

/**
 * The exit code of a watch by how the run settled, so a script can branch on it without parsing
 * the output: 0 committed; 2 stays agentctl's own errors (the JSON line on stderr).
 */
export const WATCH_EXIT_CODES: Partial<Record<RunStatusValue, number>> = {
  committed: 0,
  failed: 1,
  halted: 3,
  awaiting_approval: 4,
};

/** The exit codes as the help and docs say them. */
export const WATCH_EXIT_HELP = `
Exit codes (watch, submit --watch):
  0  the run committed
  1  the run failed
  2  agentctl could not watch it (the error, on stderr)
  3  the run halted (resume or cancel it)
  4  the run waits for approval (approve, reject or modify it)`;

/**
 * Follows the run until it settles, then prints how it ended and what a human can do; sets the
 * process's exit code by that outcome (see WATCH_EXIT_CODES).
 */
export async function watch(client: ClusterClient, runId: string): Promise<void> {
  // A run whose status retention removed would be watched for ever; one not yet submitted is waited for.
  if (!(await client.statusOf(runId)))
    process.stderr.write(`no run '${runId}' yet: waiting for it to be submitted (Ctrl-C stops)\n`);
  let settled: RunStatusValue | undefined;
  for await (const status of client.follow(runId)) {
    out(statusLine(status));
    settled = status.status;
  }
  const last = await client.status.get(runId);
  if (last?.terminal)
    out(
      `${last.terminal.kind}: ${last.terminal.reason}${last.terminal.output ? `\n${last.terminal.output}` : ""}`,
    );
  // A failure's status says only its reason: why, and what a human must check, are in its report
  // (a summary the watch can go without: one it cannot read does not fail the watch).
  const report =
    last?.status === "failed" ? await runResult(client.bus, runId).catch(() => undefined) : undefined;
  if (report) for (const line of failureSummary(report)) out(line);
  if (last) for (const line of nextSteps(last)) out(line);
  // The status the follow settled on decides: the one read after may be gone (retention) already.
  const outcome = settled ?? last?.status;
  const code = outcome === undefined ? undefined : WATCH_EXIT_CODES[outcome];
  if (code) process.exitCode = code;
}
