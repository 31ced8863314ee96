import { readFile } from "node:fs/promises";

/** One execution the booking service recorded: which tool, under which idempotency key. */
export interface Execution {
  tool: string;
  key: string;
  /** The run that made the call: an idempotency key is `<runId>:<actionId>`. */
  runId: string;
  actionId: string;
}

/** The booking service's ledger (booking-service.ts), one execution a line; none when it is absent. */
export async function readLedger(file: string): Promise<Execution[]> {
  const text = await readFile(file, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => {
      const [tool = "", key = ""] = line.split(" ");
      const colon = key.lastIndexOf(":");
      return { tool, key, runId: key.slice(0, colon), actionId: key.slice(colon + 1) };
    });
}

/** Executions per `<tool> <key>`. */
export function countByKey(executions: readonly Execution[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const e of executions) counts.set(`${e.tool} ${e.key}`, (counts.get(`${e.tool} ${e.key}`) ?? 0) + 1);
  return counts;
}
