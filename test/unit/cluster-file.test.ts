import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { localClusterEnv, writeClusterFile } from "../../services/local/cluster-file.js";

describe("the local cluster file agentctl finds `npm run cluster` by", () => {
  it("names the running cluster, and is removed by the cluster that wrote it only while it is still its own", async () => {
    const env = { AGENTS_LOCAL_CLUSTER_FILE: join(mkdtempSync(join(tmpdir(), "cluster-file-")), "c.json") };
    const first = await writeClusterFile(
      { url: "nats://127.0.0.1:4222", user: "cli", pid: process.pid },
      env,
    );
    expect(localClusterEnv(env)).toEqual({
      NATS_URL: "nats://127.0.0.1:4222",
      NATS_USER: "cli",
      NATS_PASSWORD: "",
    });
    // A second cluster from this checkout (the parent process, alive, stands in for it) writes its own.
    const second = await writeClusterFile({ url: "nats://127.0.0.1:4333", pid: process.ppid }, env);
    await first();
    expect(localClusterEnv(env)).toEqual({ NATS_URL: "nats://127.0.0.1:4333" });
    await second();
    expect(existsSync(env.AGENTS_LOCAL_CLUSTER_FILE)).toBe(false);
    expect(localClusterEnv(env)).toEqual({});
    // A URL set by hand wins over the file.
    expect(localClusterEnv({ ...env, NATS_URL: "nats://elsewhere:4222" })).toEqual({});
  });
});
