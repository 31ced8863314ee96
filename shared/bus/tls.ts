import { readFileSync } from "node:fs";
import type { TlsOptions } from "@nats-io/transport-node";
import { AgentError } from "../runtime/errors.js";

/** The settings of an actor's environment that shape TLS to NATS (docs/configuration.md). */
export interface TlsEnv {
  NATS_URL: string;
  NATS_TLS_CA?: string | undefined;
  NATS_TLS_CERT?: string | undefined;
  NATS_TLS_KEY?: string | undefined;
}

/**
 * The client's TLS options, or undefined when nothing asks for TLS. Any of the files, or a `tls://`
 * URL, asks for it on every server: nats.js then refuses a server that offers no TLS before it sends
 * its login. Paths, not contents: nats.js reads the files at every connection, so a renewed
 * certificate or CA is used at the next reconnect without a restart.
 */
export function busTlsOf(env: TlsEnv): TlsOptions | undefined {
  const { NATS_TLS_CA: ca, NATS_TLS_CERT: cert, NATS_TLS_KEY: key } = env;
  if (ca === undefined && cert === undefined && key === undefined && !asksForTls(env.NATS_URL))
    return undefined;
  if ((cert === undefined) !== (key === undefined))
    throw new AgentError(
      "INVALID_INPUT",
      `NATS_TLS_CERT and NATS_TLS_KEY go together: set both (a client certificate and its private key) or neither (NATS_TLS_${cert === undefined ? "KEY" : "CERT"} is set alone)`,
    );
  if (ca !== undefined) checkPem("NATS_TLS_CA", ca, "CERTIFICATE");
  if (cert !== undefined) checkPem("NATS_TLS_CERT", cert, "CERTIFICATE");
  if (key !== undefined) checkPem("NATS_TLS_KEY", key, "PRIVATE KEY");
  return {
    ...(ca !== undefined ? { caFile: ca } : {}),
    ...(cert !== undefined ? { certFile: cert } : {}),
    ...(key !== undefined ? { keyFile: key } : {}),
  };
}

/** Whether one of the comma-separated servers is a `tls://` URL. */
export function asksForTls(urls: string): boolean {
  return urls.split(",").some((url) => /^\s*tls:\/\//i.test(url));
}

/**
 * A file named by `variable` must be readable PEM holding `label` (`CERTIFICATE`, `PRIVATE KEY`): a
 * wrong path stops the actor at its start, naming the variable, not at its first connection.
 */
function checkPem(variable: string, path: string, label: string): void {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new AgentError("INVALID_INPUT", `${variable}: cannot read ${path} (${(err as Error).message})`, {
      cause: err,
    });
  }
  if (!new RegExp(`-----BEGIN [A-Z ]*${label}-----`).test(text))
    throw new AgentError("INVALID_INPUT", `${variable}: ${path} holds no PEM ${label.toLowerCase()}`);
}
