import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

/** The 3-node JetStream cluster tests: each kills servers and waits out elections, best alone. */
const CLUSTER_FILES = ["test/e2e/jetstream-quorum.test.ts", "test/e2e/jetstream-cluster.test.ts"];

// Suites handed one server by NATS_URL share its account (storage, limits): those run one at a
// time. Otherwise three files at a time even on 2 cores: the process-level files mostly wait on
// real time (servers restarted, outages waited out, ack waits), not on the CPU.
const workers = process.env.NATS_URL ? 1 : Math.max(3, availableParallelism() - 1);

export default defineConfig({
  test: {
    globalSetup: ["test/helpers/global-setup.ts"],
    testTimeout: 20_000,
    projects: [
      {
        extends: true,
        test: {
          name: "suite",
          // The bench's own tools (profile reading, flame graphs) are tested too; its workloads run in CI.
          include: ["test/**/*.test.ts", "bench/lib/**/*.test.ts"],
          exclude: CLUSTER_FILES,
          maxWorkers: workers,
          // Files share a worker's module graph: the suite is CPU-bound on 2 cores, and importing the
          // runtime afresh for each of 130 files cost a third of the unit and integration tests' CPU.
          // Each file still starts its own servers and clusters, and restores what it mocks.
          isolate: false,
        },
      },
      {
        extends: true,
        // After the rest, one file at a time: a loaded machine slows their elections past their bounds.
        test: { name: "cluster", include: CLUSTER_FILES, maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
    ],
    coverage: {
      provider: "v8",
      include: ["shared/**/*.ts"],
      reporter: ["text-summary", "text"],
      thresholds: { lines: 95 },
    },
  },
});
