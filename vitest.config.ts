import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // The bench's own tools (profile reading, flame graphs) are tested too; its workloads run in CI.
    include: ["test/**/*.test.ts", "bench/lib/**/*.test.ts"],
    globalSetup: ["test/helpers/global-setup.ts"],
    testTimeout: 20_000,
    coverage: {
      provider: "v8",
      include: ["shared/**/*.ts"],
      reporter: ["text-summary", "text"],
      thresholds: { lines: 95 },
    },
  },
});
