import type { DriveResult } from "./drive.ts";

/** One line of the results: a system (and variant) at one concurrency. */
export interface Row extends DriveResult {
  system: string;
  variant: string;
  /** Peak RSS per process while the level ran, MiB. */
  rssMiB: Record<string, number>;
  /** Bytes the system wrote to durable storage per loop (0 when it keeps nothing durable). */
  bytesPerLoop: number;
  /** CPU per step while the level ran, µs, per process (nats-server included for the systems on NATS). */
  cpuUsPerStep: Record<string, number>;
}

/** A measurement that is not a W1 row (W1a loop by loop, W2, W3, W4), with its figures. */
export interface Finding {
  workload: "W1a" | "W2" | "W3" | "W4";
  label: string;
  figures: Record<string, number | string>;
}

/** What a runner child prints, one JSON object per line, prefixed so logs can share stdout. */
export const RESULT_PREFIX = "BENCH-RESULT ";
