import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalCluster } from "../../services/local/cluster.js";
import { AGENTCTL, runProcess } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";
import { operatorSetup } from "../helpers/nats-jwt.js";

/**
 * A server in operator (JWT) mode, as `nsc` sets one up: no user in its configuration, only an
 * operator and an account; every actor and agentctl log in with a credentials file of a user the
 * account signed.
 */
describe("a cluster whose actors log in with NATS credentials files", () => {
  let dir: string;
  let server: TestNats;
  let cluster: LocalCluster;
  let creds: (name: string) => Promise<string>;

  const agentctl = (...args: string[]) =>
    runProcess(process.execPath, [AGENTCTL, ...args], {
      env: {
        ...process.env,
        NATS_URL: server.url,
        NATS_USER: "cli",
        NATS_PASSWORD: "set, and replaced by --creds",
      },
    }).then(
      ({ stdout }) => ({ code: 0, stdout, stderr: "" }),
      (err: { code: number; stdout: string; stderr: string }) => err,
    );

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "creds-"));
    const setup = operatorSetup();
    creds = async (name) => {
      const file = join(dir, `${name}.creds`);
      await writeFile(file, setup.userCreds(name), { mode: 0o600 });
      return file;
    };
    const config = join(dir, "nats-operator.conf");
    await writeFile(config, setup.serverConfig);
    server = await startNats({ configFile: config });
    cluster = new LocalCluster({ natsUrl: server.url, useConfUsers: false, logDir: dir });
    await cluster.start("supervisor", "supervisor", { NATS_CREDS_FILE: await creds("supervisor") });
    await cluster.start("agent", "agent-1", { NATS_CREDS_FILE: await creds("agent") });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop(5_000);
    await server?.stop();
  });

  it("agentctl --creds submits a run the actors, on their own credentials, take to its commit", async () => {
    const file = join(dir, "run.json");
    await writeFile(file, JSON.stringify(spec({ script: [{ text: "hello with a JWT" }], tools: [] })));
    const done = await agentctl(
      "--creds",
      await creds("operator-person"),
      "submit",
      file,
      "--run-id",
      "jwt-1",
      "--watch",
    );
    expect(done.code, done.stderr).toBe(0);
    const { stdout } = await agentctl("result", "jwt-1", "--creds", await creds("reader"));
    expect(stdout).toContain("hello with a JWT");
  });

  it("credentials the operator did not sign are refused at once with BUS_AUTH naming the file", async () => {
    const stranger = join(dir, "stranger.creds");
    await writeFile(stranger, operatorSetup().userCreds("stranger"));
    const failed = await agentctl("runs", "--creds", stranger);
    expect(failed.code).toBe(2);
    expect(failed.stderr).toContain(`"code":"BUS_AUTH"`);
    expect(failed.stderr).toContain(`refused the credentials in ${stranger} (NATS_CREDS_FILE)`);
    // A file that is no credentials file is named at the start, before any connection.
    const notCreds = join(dir, "run.json");
    const malformed = await agentctl("runs", "--creds", notCreds);
    expect(malformed.stderr).toContain(`NATS_CREDS_FILE: ${notCreds} is not a NATS credentials file`);
  });
});
