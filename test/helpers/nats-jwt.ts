import { createHash } from "node:crypto";
import { nkeys } from "@nats-io/transport-node";

type KeyPair = ReturnType<typeof nkeys.createUser>;

/**
 * A NATS operator, an account with JetStream and users, as JWTs signed here with NKeys (what `nsc`
 * makes, without needing it): enough for a server in operator mode with a memory resolver.
 */
export interface OperatorSetup {
  /** The server's configuration lines: the operator, and the account preloaded into the resolver. */
  serverConfig: string;
  /** A credentials file's text for a new user of the account (full permissions). */
  userCreds(name: string): string;
}

const encode = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString("base64url");

/** A JWT of `claims` about `subject`, issued and signed by `issuer` (the `ed25519-nkey` algorithm NATS uses). */
function sign(issuer: KeyPair, subject: string, name: string, nats: Record<string, unknown>): string {
  const body: Record<string, unknown> = {
    iat: Math.floor(Date.now() / 1000),
    iss: issuer.getPublicKey(),
    name,
    sub: subject,
    nats: { ...nats, version: 2 },
  };
  body.jti = createHash("sha256").update(JSON.stringify(body)).digest("base64url");
  const unsigned = `${encode({ typ: "JWT", alg: "ed25519-nkey" })}.${encode(body)}`;
  return `${unsigned}.${Buffer.from(issuer.sign(new TextEncoder().encode(unsigned))).toString("base64url")}`;
}

/** Unlimited, with JetStream (storage -1: no limit): what the runtime's streams and buckets need. */
const ACCOUNT_LIMITS = {
  subs: -1,
  data: -1,
  payload: -1,
  imports: -1,
  exports: -1,
  wildcards: true,
  conn: -1,
  leaf: -1,
  mem_storage: -1,
  disk_storage: -1,
  streams: -1,
  consumer: -1,
};

export function operatorSetup(): OperatorSetup {
  const operator = nkeys.createOperator();
  const account = nkeys.createAccount();
  // JetStream in operator mode needs a system account, for the server's own subscriptions.
  const system = nkeys.createAccount();
  const operatorJwt = sign(operator, operator.getPublicKey(), "test-operator", {
    type: "operator",
    system_account: system.getPublicKey(),
  });
  const systemJwt = sign(operator, system.getPublicKey(), "SYS", { type: "account", limits: { conn: -1 } });
  const accountJwt = sign(operator, account.getPublicKey(), "agents", {
    type: "account",
    limits: ACCOUNT_LIMITS,
    default_permissions: { pub: {}, sub: {} },
  });
  return {
    serverConfig: [
      `operator: ${operatorJwt}`,
      `system_account: ${system.getPublicKey()}`,
      "resolver: MEMORY",
      `resolver_preload: {\n  ${account.getPublicKey()}: ${accountJwt}\n  ${system.getPublicKey()}: ${systemJwt}\n}`,
      "",
    ].join("\n"),
    userCreds: (name) => {
      const user = nkeys.createUser();
      const jwt = sign(account, user.getPublicKey(), name, {
        type: "user",
        pub: {},
        sub: {},
        subs: -1,
        data: -1,
        payload: -1,
      });
      const seed = new TextDecoder().decode(user.getSeed());
      return `-----BEGIN NATS USER JWT-----\n${jwt}\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n${seed}\n------END USER NKEY SEED------\n`;
    },
  };
}
