import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { errors, nkeys } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { authenticatorOf, busLoginOf, loginText } from "../../shared/bus/login.js";
import { asksForTls, busTlsOf } from "../../shared/bus/tls.js";
import { tlsRefusal } from "../../shared/bus/tls-refusal.js";
import { AgentError } from "../../shared/runtime/errors.js";

const dir = mkdtempSync(join(tmpdir(), "bus-security-"));
const file = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const PEM_CERT = file("cert.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
const PEM_KEY = file("key.pem", "-----BEGIN EC PRIVATE KEY-----\nMHcC\n-----END EC PRIVATE KEY-----\n");
const NOT_PEM = file("notes.txt", "hello\n");
const URL = "nats://nats:4222";

const codeOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof AgentError ? `${err.code}: ${err.message}` : String(err);
  }
};

describe("busTlsOf: the TLS an environment asks for", () => {
  it("none without a file or a tls:// URL; required (an object, even empty) with either", () => {
    expect(busTlsOf({ NATS_URL: URL })).toBeUndefined();
    expect(busTlsOf({ NATS_URL: "nats://a:4222, tls://b:4222" })).toEqual({});
    expect(busTlsOf({ NATS_URL: URL, NATS_TLS_CA: PEM_CERT })).toEqual({ caFile: PEM_CERT });
    expect(busTlsOf({ NATS_URL: URL, NATS_TLS_CERT: PEM_CERT, NATS_TLS_KEY: PEM_KEY })).toEqual({
      certFile: PEM_CERT,
      keyFile: PEM_KEY,
    });
    expect(asksForTls("TLS://host:4222")).toBe(true);
    expect(asksForTls("nats://tls-host:4222")).toBe(false);
  });

  it("refuses a certificate without its key, a missing file and a file that is not PEM, naming the variable", () => {
    expect(codeOf(() => busTlsOf({ NATS_URL: URL, NATS_TLS_CERT: PEM_CERT }))).toMatch(
      /^INVALID_INPUT: NATS_TLS_CERT and NATS_TLS_KEY go together: .*\(NATS_TLS_CERT is set alone\)/,
    );
    expect(codeOf(() => busTlsOf({ NATS_URL: URL, NATS_TLS_CA: join(dir, "absent.pem") }))).toMatch(
      /^INVALID_INPUT: NATS_TLS_CA: cannot read .*absent\.pem/,
    );
    expect(codeOf(() => busTlsOf({ NATS_URL: URL, NATS_TLS_CA: NOT_PEM }))).toBe(
      `INVALID_INPUT: NATS_TLS_CA: ${NOT_PEM} holds no PEM certificate`,
    );
    // A key where the certificate goes.
    expect(codeOf(() => busTlsOf({ NATS_URL: URL, NATS_TLS_CERT: PEM_KEY, NATS_TLS_KEY: PEM_KEY }))).toMatch(
      /NATS_TLS_CERT: .* holds no PEM certificate/,
    );
  });
});

describe("busLoginOf: who a connection logs in as", () => {
  const user = nkeys.createUser();
  const seed = new TextDecoder().decode(user.getSeed());
  const seedFile = file("user.nk", `${seed}\n`);

  it("a password user, an NKey (its public key read from the seed), a credentials file, or nobody", () => {
    expect(busLoginOf({ NATS_USER: "agent", NATS_PASSWORD: "pw" })).toEqual({
      kind: "password",
      user: "agent",
      pass: "pw",
    });
    expect(busLoginOf({ NATS_NKEY_SEED_FILE: seedFile })).toEqual({
      kind: "nkey",
      seedFile,
      publicKey: user.getPublicKey(),
    });
    const creds = file(
      "user.creds",
      `-----BEGIN NATS USER JWT-----\neyJ0\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n${seed}\n------END USER NKEY SEED------\n`,
    );
    expect(busLoginOf({ NATS_CREDS_FILE: creds })).toEqual({ kind: "creds", file: creds });
    expect(busLoginOf({})).toEqual({ kind: "none" });
  });

  it("refuses two logins, a seed of another kind and a file that is not credentials, never printing a seed", () => {
    expect(codeOf(() => busLoginOf({ NATS_USER: "a", NATS_CREDS_FILE: seedFile }))).toMatch(
      /^INVALID_INPUT: NATS_USER and NATS_CREDS_FILE each name a login/,
    );
    const account = nkeys.createAccount();
    const accountSeed = new TextDecoder().decode(account.getSeed());
    const refused = codeOf(() => busLoginOf({ NATS_NKEY_SEED_FILE: file("account.nk", accountSeed) }));
    expect(refused).toMatch(/^INVALID_INPUT: NATS_NKEY_SEED_FILE: the file holds no NKey user seed/);
    expect(refused).not.toContain(accountSeed);
    expect(codeOf(() => busLoginOf({ NATS_CREDS_FILE: seedFile }))).toMatch(
      /^INVALID_INPUT: NATS_CREDS_FILE: .* is not a NATS credentials file/,
    );
  });

  it("signs the server's nonce with the seed as the file holds it at each connection", () => {
    const rotating = file("rotating.nk", seed);
    const login = busLoginOf({ NATS_NKEY_SEED_FILE: rotating });
    const auth = authenticatorOf(login);
    expect(auth?.("nonce-1")).toMatchObject({ nkey: user.getPublicKey() });
    const next = nkeys.createUser();
    writeFileSync(rotating, new TextDecoder().decode(next.getSeed()));
    expect(auth?.("nonce-2")).toMatchObject({ nkey: next.getPublicKey() });
    expect(loginText(login)).toBe(`the NKey ${user.getPublicKey()} (NATS_NKEY_SEED_FILE ${rotating})`);
  });
});

describe("tlsRefusal: which first-connection failures are TLS's", () => {
  const servers = "tls://nats:4222";
  const nodeError = (code: string, message: string) => Object.assign(new Error(message), { code });

  it("a server without TLS where TLS is required, an untrusted certificate and a wrong name: BUS_TLS with the fix", () => {
    const plain = tlsRefusal(new errors.ConnectionError("server does not support 'tls'"), servers, {});
    expect(plain?.code).toBe("BUS_TLS");
    expect(plain?.message).toMatch(/offers no TLS, and this connection requires it/);
    const untrusted = tlsRefusal(nodeError("SELF_SIGNED_CERT_IN_CHAIN", "self-signed"), servers, {
      caFile: "/etc/ca.pem",
    });
    expect(untrusted?.message).toMatch(
      /does not chain to a CA this connection trusts \(NATS_TLS_CA \/etc\/ca\.pem\)/,
    );
    const name = tlsRefusal(nodeError("ERR_TLS_CERT_ALTNAME_INVALID", "Host: x"), servers, {});
    expect(name?.message).toMatch(/does not name the host NATS_URL connects to/);
    expect(name?.retryable).toBe(false);
  });

  it("anything else is not TLS's: no server answering, a refused login, a plain server when TLS is not asked", () => {
    expect(tlsRefusal(new errors.ConnectionError("connection refused"), servers, {})).toBeUndefined();
    expect(
      tlsRefusal(new errors.ConnectionError("server does not support 'tls'"), servers, undefined),
    ).toBeUndefined();
    expect(tlsRefusal(nodeError("ECONNREFUSED", "refused"), servers, {})).toBeUndefined();
    expect(tlsRefusal(undefined, servers, {})).toBeUndefined();
  });
});
