import { readFileSync } from "node:fs";
import {
  credsAuthenticator,
  nkeyAuthenticator,
  nkeys,
  usernamePasswordAuthenticator,
  type Authenticator,
} from "@nats-io/transport-node";
import { AgentError } from "../runtime/errors.js";

/** Who a connection says it is: a user and password, an NKey, a credentials file (JWT), or nobody. */
export type BusLogin =
  | { kind: "none" }
  | { kind: "password"; user: string; pass: string }
  | { kind: "nkey"; seedFile: string; publicKey: string }
  | { kind: "creds"; file: string };

/** The settings of an actor's environment that say who it logs in as (docs/configuration.md). */
export interface LoginEnv {
  NATS_USER?: string | undefined;
  NATS_PASSWORD?: string | undefined;
  NATS_NKEY_SEED_FILE?: string | undefined;
  NATS_CREDS_FILE?: string | undefined;
}

/**
 * The one login the environment names. Two at once is refused (which would the server check?); a
 * seed or credentials file that cannot be read, or holds no user key, stops the actor at its start.
 */
export function busLoginOf(env: LoginEnv): BusLogin {
  const named = (["NATS_USER", "NATS_NKEY_SEED_FILE", "NATS_CREDS_FILE"] as const).filter(
    (name) => env[name] !== undefined && env[name] !== "",
  );
  if (named.length > 1)
    throw new AgentError(
      "INVALID_INPUT",
      `${named.join(" and ")} each name a login: set one (a password user, an NKey seed, or a credentials file)`,
    );
  if (env.NATS_NKEY_SEED_FILE) {
    const seedFile = env.NATS_NKEY_SEED_FILE;
    return { kind: "nkey", seedFile, publicKey: userKeyOf(readKeyFile("NATS_NKEY_SEED_FILE", seedFile)) };
  }
  if (env.NATS_CREDS_FILE) {
    const file = env.NATS_CREDS_FILE;
    const text = new TextDecoder().decode(readKeyFile("NATS_CREDS_FILE", file));
    if (!/-----BEGIN NATS USER JWT-----/.test(text) || !/-----BEGIN USER NKEY SEED-----/.test(text))
      throw new AgentError(
        "INVALID_INPUT",
        `NATS_CREDS_FILE: ${file} is not a NATS credentials file (a user JWT and its NKey seed, as \`nsc generate creds\` writes)`,
      );
    return { kind: "creds", file };
  }
  if (env.NATS_USER) return { kind: "password", user: env.NATS_USER, pass: env.NATS_PASSWORD ?? "" };
  return { kind: "none" };
}

/**
 * The authenticator nats.js calls at every connection. Key files are read again each time, so a
 * rotated seed or credentials file is used at the next reconnect; one that cannot be read then
 * (replaced midway) leaves the last good contents in use.
 */
export function authenticatorOf(login: BusLogin): Authenticator | undefined {
  switch (login.kind) {
    case "password":
      return usernamePasswordAuthenticator(login.user, login.pass);
    case "nkey":
      return nkeyAuthenticator(rereading(login.seedFile, trimmed));
    case "creds":
      return credsAuthenticator(rereading(login.file, (bytes) => bytes));
    case "none":
      return undefined;
  }
}

/** The login in words, for an error: it names the variable to fix and never holds a secret. */
export function loginText(login: BusLogin): string {
  switch (login.kind) {
    case "password":
      return `user '${login.user}'`;
    case "nkey":
      return `the NKey ${login.publicKey} (NATS_NKEY_SEED_FILE ${login.seedFile})`;
    case "creds":
      return `the credentials in ${login.file} (NATS_CREDS_FILE)`;
    case "none":
      return "no login (NATS_USER, NATS_NKEY_SEED_FILE and NATS_CREDS_FILE are unset)";
  }
}

function readKeyFile(variable: string, path: string): Uint8Array {
  try {
    return trimmed(readFileSync(path));
  } catch (err) {
    throw new AgentError("INVALID_INPUT", `${variable}: cannot read ${path} (${(err as Error).message})`, {
      cause: err,
    });
  }
}

/** A seed file's bytes without the line end an editor or `kubectl create secret --from-file` leaves. */
function trimmed(bytes: Uint8Array): Uint8Array {
  return new TextEncoder().encode(new TextDecoder().decode(bytes).trim());
}

/** The public key of a user seed; anything else is refused without printing it (it is a secret). */
function userKeyOf(seed: Uint8Array): string {
  try {
    const pair = nkeys.fromSeed(seed);
    const publicKey = pair.getPublicKey();
    if (publicKey.startsWith("U")) return publicKey;
  } catch {
    // Refused below, with the same words as a seed of another kind.
  }
  throw new AgentError(
    "INVALID_INPUT",
    "NATS_NKEY_SEED_FILE: the file holds no NKey user seed (one line, `SU…`, as `nk -gen user` writes)",
  );
}

/** The file's bytes at each call, or the last good ones when it cannot be read. */
function rereading(path: string, shape: (bytes: Uint8Array) => Uint8Array): () => Uint8Array {
  let last = shape(readFileSync(path));
  return () => {
    try {
      last = shape(readFileSync(path));
    } catch {
      // Kept: a file being replaced must not cost the connection its login.
    }
    return last;
  };
}
