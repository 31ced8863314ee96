import { copyFile, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { nkeys } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalCluster, type ActorKind } from "../../services/local/cluster.js";
import { demoSpec } from "../../services/local/demo-spec.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { makeCa, natsTlsBlock } from "../helpers/certificates.js";
import { K8S } from "../helpers/k8s.js";
import { AGENTCTL, runProcess } from "../helpers/cluster-suite.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";

const SUBSCRIBER = fileURLToPath(new URL("../../examples/audit-subscriber.mjs", import.meta.url));

/** The permission variable of each NATS user of the shipped model (permissions.conf). */
const PERMISSIONS: Record<ActorKind | "cli" | "console", string> = {
  supervisor: "$SUPERVISOR_PERMISSIONS",
  agent: "$AGENT_PERMISSIONS",
  critic: "$CRITIC_PERMISSIONS",
  tools: "$TOOL_PERMISSIONS",
  mcp: "$TOOL_PERMISSIONS",
  cli: "$CLI_PERMISSIONS",
  console: "$CONSOLE_PERMISSIONS",
};

/**
 * A cluster with no password anywhere, as the prod overlay runs one: the server knows each actor
 * kind by the public key of an NKey, with the shipped permission model, each actor holds its seed
 * in a file of its own, and every connection is TLS, verified both ways.
 */
describe("a cluster whose actors log in with NKeys", () => {
  let dir: string;
  let server: TestNats;
  let cluster: LocalCluster;
  let tls: Record<string, string>;
  const seeds = {} as Record<ActorKind | "cli" | "console", string>;

  /** Writes a new user key's seed to a file: its path and public key. */
  const newKey = async (name: string, seed?: Uint8Array): Promise<{ file: string; publicKey: string }> => {
    const pair = seed ? nkeys.fromSeed(seed) : nkeys.createUser();
    const file = join(dir, `${name}.nk`);
    await writeFile(file, `${new TextDecoder().decode(pair.getSeed())}\n`, { mode: 0o600 });
    return { file, publicKey: pair.getPublicKey() };
  };
  const agentctl = (env: Record<string, string | undefined>, ...args: string[]) =>
    runProcess(process.execPath, [AGENTCTL, ...args], {
      env: { ...process.env, ...tls, NATS_USER: undefined, AGENTCTL_WAIT_MS: "20000", ...env },
    }).then(
      ({ stdout }) => ({ code: 0, stdout, stderr: "" }),
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
  const refusal = (stderr: string) =>
    (JSON.parse(stderr.trim().split("\n").at(-1) ?? "{}") as { error?: { code: string; message: string } })
      .error;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "nkeys-"));
    const users: string[] = [];
    for (const kind of Object.keys(PERMISSIONS) as (ActorKind | "cli" | "console")[]) {
      const { file, publicKey } = await newKey(kind);
      seeds[kind] = file;
      users.push(`    { nkey: ${publicKey}, permissions: ${PERMISSIONS[kind]} }`);
    }
    await copyFile(join(K8S, "base", "nats", "permissions.conf"), join(dir, "permissions.conf"));
    const ca = await makeCa(dir, "ca");
    const [serverCert, clientCert] = await Promise.all([
      ca.issue("server", "DNS:localhost"),
      ca.issue("client", "DNS:agents-client"),
    ]);
    const config = join(dir, "nats-nkeys.conf");
    await writeFile(
      config,
      `${natsTlsBlock(serverCert, ca.cert)}include "permissions.conf"\nauthorization {\n  users = [\n${users.join("\n")}\n  ]\n}\n`,
    );
    server = await startNats({ configFile: config });
    const files = { NATS_TLS_CA: ca.cert, NATS_TLS_CERT: clientCert.cert, NATS_TLS_KEY: clientCert.key };
    tls = { NATS_URL: `tls://localhost:${new URL(server.url).port}`, ...files };
    cluster = new LocalCluster({ natsUrl: tls.NATS_URL ?? "", useConfUsers: false, logDir: dir, env: files });
    const key = (kind: ActorKind) => ({ NATS_NKEY_SEED_FILE: seeds[kind] });
    await cluster.start("supervisor", "supervisor", key("supervisor"));
    await Promise.all([
      cluster.start("tools", "tools", { TOOLS: "echo", ...key("tools") }),
      cluster.start("critic", "critic", key("critic")),
      cluster.start("agent", "agent-1", { AGENT_LOCAL_TOOLS: "", ...key("agent") }),
    ]);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop(5_000);
    await server?.stop();
  });

  it("runs the demo loop: the critic sends the first answer back, the repaired one commits", async () => {
    const file = join(dir, "demo.json");
    await writeFile(file, JSON.stringify(demoSpec));
    const cli = { NATS_NKEY_SEED_FILE: seeds.cli };
    const done = await agentctl(cli, "submit", file, "--run-id", "nkey-demo", "--watch");
    expect(done.code, done.stderr).toBe(0);
    const { stdout } = await agentctl(cli, "audit", "tail", "nkey-demo", "--json");
    const events = stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as AuditEvent);
    const trail = events.map((e) => `${e.actor} ${e.kind} ${e.status}`);
    // The audit subscriber example reads the trail too, with the same key, over TLS.
    const subscriber = await runProcess(process.execPath, [SUBSCRIBER, "nkey-demo", "--until-final"], {
      env: { ...process.env, ...tls, ...cli, NATS_USER: undefined },
      timeout: 20_000,
    });
    expect(subscriber.stdout.trim().split("\n")).toHaveLength(events.length);
    // Each actor wrote under its own key: the remote echo tool, the critic, the agent, the supervisor.
    expect(trail).toEqual(
      expect.arrayContaining([
        "supervisor run.admitted passed",
        "tool:echo tool.completed passed",
        "critic critic.verdict failed",
        "critic critic.verdict passed",
        "agent run.committed passed",
      ]),
    );
  });

  it("a key the server does not know is refused at once with BUS_AUTH naming its public key, never its seed", async () => {
    const stranger = await newKey("stranger");
    const failed = await agentctl({ NATS_NKEY_SEED_FILE: stranger.file }, "runs");
    expect(failed.code).toBe(2);
    const error = refusal(failed.stderr);
    expect(error?.code).toBe("BUS_AUTH");
    expect(error?.message).toContain(
      `refused the NKey ${stranger.publicKey} (NATS_NKEY_SEED_FILE ${stranger.file})`,
    );
    expect(failed.stderr).not.toMatch(/SU[A-Z2-7]{50}/);
  });

  it("a seed file that holds no user seed, or a password login next to a key, stops the command at its start", async () => {
    const account = nkeys.createAccount();
    const wrongKind = join(dir, "account.nk");
    await writeFile(wrongKind, new TextDecoder().decode(account.getSeed()));
    const failed = await agentctl({ NATS_NKEY_SEED_FILE: wrongKind }, "runs");
    expect(refusal(failed.stderr)).toEqual({
      code: "INVALID_INPUT",
      message:
        "NATS_NKEY_SEED_FILE: the file holds no NKey user seed (one line, `SU…`, as `nk -gen user` writes)",
    });
    expect(failed.stderr).not.toContain(new TextDecoder().decode(account.getSeed()));
    const both = await agentctl({ NATS_NKEY_SEED_FILE: seeds.cli, NATS_USER: "cli" }, "runs");
    expect(refusal(both.stderr)?.message).toMatch(
      /^NATS_USER and NATS_NKEY_SEED_FILE each name a login: set one/,
    );
  });
});
