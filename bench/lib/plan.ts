/** How much each workload runs: `full` for the published table, `quick` for a smoke run under a minute. */
export interface Plan {
  mode: "full" | "quick";
  /** Concurrency levels of W1b (C = 1 is also W1a). */
  levels: number[];
  /** Loops per level: at least C, so every client runs one loop. */
  loops: Record<number, number>;
  /** W1a loop by loop: pairs of one loop of ours and one of our protocol's floor. */
  pairedLoops: number;
  /** W2: loops in flight when a worker is killed. */
  resumeLoops: number;
  /** W3: recorded steps before the resume. */
  historyLengths: number[];
  /**
   * W3, hot: the least time between one resume and the next, longer than nats-server 2.9 keeps a
   * block's cache after a read (5 s; see measureHistory). 0 in the quick plan, a smoke run.
   */
  resumeIdleMs: number;
  /** W4: runs parked waiting for approval. */
  parked: number;
}

export const PLANS: Record<Plan["mode"], Plan> = {
  full: {
    mode: "full",
    levels: [1, 10, 100, 1000],
    loops: { 1: 20, 10: 50, 100: 200, 1000: 1000 },
    pairedLoops: 60,
    resumeLoops: 100,
    historyLengths: [10, 1000, 10_000],
    resumeIdleMs: 6_000,
    parked: 10_000,
  },
  quick: {
    mode: "quick",
    levels: [1, 10],
    loops: { 1: 5, 10: 20 },
    pairedLoops: 4,
    resumeLoops: 20,
    historyLengths: [10, 100],
    resumeIdleMs: 0,
    parked: 200,
  },
};
