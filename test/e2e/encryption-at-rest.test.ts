import { mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LocalCluster } from "../../services/local/cluster.js";
import { AGENTCTL, runProcess } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";

const OLD_KEY = "old-key-0123456789abcdef0123456789abcdef";
const NEW_KEY = "new-key-fedcba9876543210fedcba9876543210";

/** The JetStream settings of a server's configuration: the store's cipher and keys, or none. */
const jetstream = (settings: string): string => `jetstream {\n${settings}\n}\n`;
const encrypted = (key: string, previous?: string): string =>
  jetstream(
    `  cipher: chachapoly\n  key: "${key}"${previous ? `\n  prev_encryption_key: "${previous}"` : ""}`,
  );

/** Every file under `dir` whose bytes contain `marker`, relative to it. */
async function filesHolding(dir: string, marker: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files = entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
  const holding = await Promise.all(
    files.map(async (file) => ((await readFile(file)).includes(marker) ? [file.slice(dir.length + 1)] : [])),
  );
  return holding.flat();
}

/**
 * A run whose answer is a marker no other bytes hold, on a cluster over a server configured with
 * `settings`; the server is then stopped cleanly (every block written) and started again on its
 * store, and the store is searched for the marker.
 */
async function runMarker(
  name: string,
  settings: string,
): Promise<{ server: TestNats; config: string; dir: string; marker: string; holding: string[] }> {
  const dir = await mkdtemp(join(tmpdir(), `rest-${name}-`));
  const config = join(dir, "nats.conf");
  await writeFile(config, settings);
  const server = await startNats({ configFile: config });
  const cluster = new LocalCluster({ natsUrl: server.url, useConfUsers: false, logDir: dir });
  const marker = `MARKER-${name}-${process.pid}-${Date.now().toString(36)}`;
  try {
    await cluster.start("supervisor");
    await cluster.start("agent", "agent-1");
    const file = join(dir, "run.json");
    await writeFile(file, JSON.stringify(spec({ script: [{ text: marker }], tools: [], prompt: marker })));
    await runProcess(process.execPath, [AGENTCTL, "submit", file, "--run-id", name, "--watch"], {
      env: { ...process.env, NATS_URL: server.url, NATS_USER: undefined },
    });
  } finally {
    await cluster.stop(5_000);
  }
  await server.restart?.({ signal: "SIGTERM" });
  return { server, config, dir, marker, holding: await filesHolding(server.storeDir ?? "", marker) };
}

/** What agentctl prints as the run's result, read back through the server (which decrypts). */
async function resultOf(server: TestNats, runId: string): Promise<string> {
  const { stdout } = await runProcess(process.execPath, [AGENTCTL, "result", runId, "--json"], {
    env: { ...process.env, NATS_URL: server.url, NATS_USER: undefined },
  });
  return stdout;
}

describe("JetStream's store at rest", () => {
  it("without a cipher, the store's files hold a run's words in the clear (the control)", async () => {
    const { server, holding } = await runMarker("plain", jetstream(""));
    try {
      // The run log's blocks, or the run status bucket's, or both.
      expect(holding.length).toBeGreaterThan(0);
      expect(holding.join(" ")).toMatch(/streams\//);
    } finally {
      await server.stop();
    }
  }, 60_000);

  it("with `cipher` and a key, no file holds them; the run reads back whole, and again after the key is rotated", async () => {
    const { server, config, marker, holding } = await runMarker("sealed", encrypted(OLD_KEY));
    try {
      expect(holding).toEqual([]);
      expect(await resultOf(server, "sealed")).toContain(marker);

      // Rotation, step 1: the new key, the old one as prev_encryption_key; each asset is re-sealed
      // under the new key as the server loads it.
      await writeFile(config, encrypted(NEW_KEY, OLD_KEY));
      await server.restart?.({ signal: "SIGTERM" });
      expect(await resultOf(server, "sealed")).toContain(marker);
      // Step 2: the old key gone for good.
      await writeFile(config, encrypted(NEW_KEY));
      await server.restart?.({ signal: "SIGTERM" });
      expect(await resultOf(server, "sealed")).toContain(marker);
      expect(await filesHolding(server.storeDir ?? "", marker)).toEqual([]);
    } finally {
      await server.stop();
    }
  }, 90_000);
});
