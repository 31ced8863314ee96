import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // The bench's own tools (profile reading, flame graphs) are tested too; its workloads run in CI.
    include: ["test/**/*.test.ts", "bench/lib/**/*.test.ts"],
    globalSetup: ["test/helpers/global-setup.ts"],
    testTimeout: 20_000,
    // At least two files at a time. The process-level files mostly wait on real time (servers
    // restarted, outages waited out, ack waits), and Vitest's default (cores - 1) ran them one after
    // another on a 2-core machine. Suites handed one server by NATS_URL share its account (storage,
    // limits): those run one at a time.
    maxWorkers: process.env.NATS_URL ? 1 : Math.max(2, availableParallelism() - 1),
    coverage: {
      provider: "v8",
      include: ["shared/**/*.ts"],
      reporter: ["text-summary", "text"],
      thresholds: { lines: 95 },
    },
  },
});
