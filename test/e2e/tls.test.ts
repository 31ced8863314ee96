import { copyFile, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { get as httpsGet } from "node:https";
import { connect as tcpConnect, createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalCluster } from "../../services/local/cluster.js";
import { makeCa, natsTlsBlock, type CertFiles, type TestCa } from "../helpers/certificates.js";
import { AGENTCTL, runProcess } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";

/** A port free now on 127.0.0.1 (for the server's monitoring listener, which takes no `-1` here). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** GET `url` trusting only `ca`: the status code, or the error's code when TLS refuses. */
function getTrusting(url: string, ca: string): Promise<number | string> {
  return new Promise((resolve) => {
    const req = httpsGet(url, { ca }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

/** What a client that speaks plain text gets from a TLS server: everything it read before the close. */
function plainTextClient(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tcpConnect(port, "127.0.0.1");
    let read = "";
    socket.on("data", (chunk: Buffer) => {
      const first = read === "";
      read += chunk.toString();
      if (first) socket.write('CONNECT {"verbose":true}\r\nPING\r\n');
    });
    socket.on("error", reject);
    socket.on("close", () => resolve(read));
  });
}

/**
 * A cluster whose only way in is TLS: the server verifies every client's certificate, and each
 * actor trusts the CA in a file of its own (which the rotation test replaces under it).
 */
describe("a cluster on TLS", () => {
  let dir: string;
  let ca: TestCa;
  let wrongCa: TestCa;
  let client: CertFiles;
  let server: TestNats;
  let plain: TestNats;
  let port: number;
  let cluster: LocalCluster;
  /** The CA file every actor reads: a copy, replaced by the rotation test. */
  let trusted: string;
  let url: string;
  let monitorPort: number;

  const agentctl = (env: Record<string, string | undefined>, ...args: string[]) =>
    runProcess(process.execPath, [AGENTCTL, ...args], {
      env: { ...process.env, NATS_USER: undefined, AGENTCTL_WAIT_MS: "0", ...env },
    }).then(
      ({ stdout }) => ({ code: 0, stdout, error: undefined }),
      (err: { code: number; stdout: string; stderr: string }) => ({
        code: err.code,
        stdout: err.stdout,
        error: (
          JSON.parse(err.stderr.trim().split("\n").at(-1) ?? "{}") as {
            error?: { code: string; message: string };
          }
        ).error,
      }),
    );
  const tlsEnv = (over: Record<string, string | undefined> = {}) => ({
    NATS_URL: url,
    NATS_TLS_CA: trusted,
    NATS_TLS_CERT: client.cert,
    NATS_TLS_KEY: client.key,
    ...over,
  });
  const submitAndWatch = async (runId: string, answer: string) => {
    const file = join(dir, `${runId}.json`);
    await writeFile(file, JSON.stringify(spec({ script: [{ text: answer }], tools: [] })));
    return agentctl(tlsEnv({ AGENTCTL_WAIT_MS: "20000" }), "submit", file, "--run-id", runId, "--watch");
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "tls-"));
    [ca, wrongCa] = await Promise.all([makeCa(dir, "ca"), makeCa(dir, "wrong-ca")]);
    const [serverCert, clientCert] = await Promise.all([
      ca.issue("server", "DNS:localhost,IP:127.0.0.1"),
      ca.issue("client", "DNS:agents-client"),
    ]);
    client = clientCert;
    trusted = join(dir, "trusted.pem");
    await copyFile(ca.cert, trusted);
    const config = join(dir, "nats-tls.conf");
    monitorPort = await freePort();
    await writeFile(config, `https: "127.0.0.1:${monitorPort}"\n${natsTlsBlock(serverCert, ca.cert)}`);
    [server, plain] = await Promise.all([startNats({ configFile: config }), startNats({ own: true })]);
    port = Number(new URL(server.url).port);
    url = `tls://localhost:${port}`;
    const env = { NATS_TLS_CA: trusted, NATS_TLS_CERT: client.cert, NATS_TLS_KEY: client.key };
    cluster = new LocalCluster({ natsUrl: url, useConfUsers: false, logDir: dir, env });
    await cluster.start("supervisor");
    await Promise.all([
      cluster.start("tools", "tools", { TOOLS: "echo" }),
      cluster.start("agent", "agent-1"),
    ]);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop(5_000);
    await Promise.all([server?.stop(), plain?.stop()]);
  });

  it("a client speaking plain text is closed on before it can log in", async () => {
    const read = await plainTextClient(port);
    expect(read).toMatch(/^INFO \{.*"tls_required":true.*"tls_verify":true/);
    // No +OK to the CONNECT, no PONG: the server read nothing it would act on.
    expect(read).not.toMatch(/\+OK|PONG/);
  });

  it("the monitoring port answers over HTTPS only, to a client trusting the CA (no client certificate needed there)", async () => {
    expect(
      await getTrusting(`https://localhost:${monitorPort}/healthz`, await readFile(ca.cert, "utf8")),
    ).toBe(200);
    expect(
      await getTrusting(`https://localhost:${monitorPort}/healthz`, await readFile(wrongCa.cert, "utf8")),
    ).toMatch(/CERT|SIGNATURE|ISSUER/);
    const plainHttp = await fetch(`http://127.0.0.1:${monitorPort}/healthz`).then((r) => r.status);
    expect(plainHttp).toBe(400);
  });

  it("a client trusting another CA is refused with BUS_TLS, and so is one whose server's certificate names another host", async () => {
    const wrong = await agentctl(tlsEnv({ NATS_TLS_CA: wrongCa.cert }), "runs");
    expect(wrong.code).toBe(2);
    expect(wrong.error?.code).toBe("BUS_TLS");
    expect(wrong.error?.message).toMatch(
      /does not chain to a CA this connection trusts \(NATS_TLS_CA .*wrong-ca\.pem\)/,
    );
    // The system's CAs (no NATS_TLS_CA) do not know this one either.
    const system = await agentctl(tlsEnv({ NATS_TLS_CA: undefined }), "runs");
    expect(system.error?.code, JSON.stringify(system)).toBe("BUS_TLS");

    const elsewhere = await ca.issue("elsewhere", "DNS:nats.elsewhere.example");
    const config = join(dir, "nats-elsewhere.conf");
    await writeFile(config, natsTlsBlock(elsewhere));
    await using other = await startNats({ configFile: config });
    const named = await agentctl(tlsEnv({ NATS_URL: `tls://localhost:${new URL(other.url).port}` }), "runs");
    expect(named.error?.code).toBe("BUS_TLS");
    expect(named.error?.message).toMatch(/ERR_TLS_CERT_ALTNAME_INVALID.*does not name the host/);
  });

  it("a client configured for TLS refuses a server that offers none, and one without a client certificate gets no answer", async () => {
    const refused = await agentctl(tlsEnv({ NATS_URL: plain.url }), "runs");
    expect(refused.error?.code).toBe("BUS_TLS");
    expect(refused.error?.message).toMatch(
      /offers no TLS, and this connection requires it .*nothing was sent to it/,
    );
    // A tls:// URL alone asks for TLS too.
    const byUrl = await agentctl(
      { NATS_URL: plain.url.replace("nats://", "tls://"), NATS_TLS_CA: undefined },
      "runs",
    );
    expect(byUrl.error?.code).toBe("BUS_TLS");

    const anonymous = await agentctl(tlsEnv({ NATS_TLS_CERT: undefined, NATS_TLS_KEY: undefined }), "runs");
    expect(anonymous.error?.code).toBe("BUS_UNAVAILABLE");
    expect(anonymous.error?.message).toMatch(/NATS_TLS_CERT and NATS_TLS_KEY/);
    // A certificate without its key is a configuration error, named at the start.
    const half = await agentctl(tlsEnv({ NATS_TLS_KEY: undefined }), "runs");
    expect(half.error).toMatchObject({
      code: "INVALID_INPUT",
      message: expect.stringMatching(/NATS_TLS_CERT and NATS_TLS_KEY go together/) as unknown,
    });
  });

  it("a good client runs a loop end to end on the TLS cluster", async () => {
    const done = await submitAndWatch("tls-run-1", "hello over TLS");
    expect(done.code, done.stdout).toBe(0);
    const result = await agentctl(tlsEnv(), "result", "tls-run-1", "--json");
    expect(JSON.parse(result.stdout)).toMatchObject({ outcome: "COMMIT" });
    expect(result.stdout).toContain("hello over TLS");
  });

  it("a server certificate rotated to a new CA: the actors reconnect once their CA file holds it, without a restart", async () => {
    const next = await makeCa(dir, "next-ca");
    const renewed = await next.issue("server-renewed", "DNS:localhost,IP:127.0.0.1");
    // The server's configuration names these paths: the renewed certificate takes their place.
    await copyFile(renewed.cert, join(dir, "server.pem"));
    await copyFile(renewed.key, join(dir, "server.key"));
    // What cert-manager's renewal leaves in a mounted Secret: a bundle of the old CA and the new.
    await writeFile(trusted, `${await readFile(ca.cert, "utf8")}${await readFile(next.cert, "utf8")}`);
    const pids = [...cluster.actors.values()].map((a) => a.child.pid);
    await server.restart?.({ signal: "SIGTERM" });

    // The control: a client that still trusts only the old CA is refused by the renewed server.
    const stale = await agentctl(tlsEnv({ NATS_TLS_CA: ca.cert }), "runs");
    expect(stale.error?.code).toBe("BUS_TLS");
    const done = await submitAndWatch("tls-run-2", "hello after the rotation");
    expect(done.code, done.stdout).toBe(0);
    // The same processes ran it: none was restarted to pick up the new CA.
    expect([...cluster.actors.values()].map((a) => [a.child.pid, a.child.exitCode])).toEqual(
      pids.map((pid) => [pid, null]),
    );
  });
});
