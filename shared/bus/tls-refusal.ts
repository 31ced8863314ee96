import { errors, type TlsOptions } from "@nats-io/transport-node";
import { AgentError } from "../runtime/errors.js";

/** Node's codes for a certificate it does not accept (OpenSSL's verify results, and its own name check). */
const CERTIFICATE_CODES =
  /^(ERR_TLS_CERT_ALTNAME_INVALID|UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|CERT_\w+|ERR_SSL_\w+|ERR_TLS_\w+)$/;

/**
 * A first connection's failure that is TLS's, as BUS_TLS naming the fix, or undefined for any
 * other. Not retried: a certificate nobody trusts, or a server without TLS where TLS is required,
 * stays so however long one waits.
 */
export function tlsRefusal(
  err: unknown,
  servers: string,
  tls: TlsOptions | undefined,
): AgentError | undefined {
  if (tls && err instanceof errors.ConnectionError && /does not support 'tls'/.test(err.message))
    return new AgentError(
      "BUS_TLS",
      `the NATS server at ${servers} offers no TLS, and this connection requires it (NATS_TLS_CA, NATS_TLS_CERT or a tls:// URL in NATS_URL): nothing was sent to it. Point NATS_URL at the server's TLS listener`,
      { cause: err },
    );
  const code = (err as { code?: unknown } | null)?.code;
  if (!(err instanceof Error) || typeof code !== "string" || !CERTIFICATE_CODES.test(code)) return undefined;
  const fix =
    code === "ERR_TLS_CERT_ALTNAME_INVALID"
      ? "the server's certificate does not name the host NATS_URL connects to: connect by a name the certificate holds (with an IP address in the URL, nats.js checks the name `localhost`)"
      : `the server's certificate does not chain to a CA this connection trusts (${tls?.caFile ? `NATS_TLS_CA ${tls.caFile}` : "the system's: set NATS_TLS_CA to the CA that issued it"}), or has expired`;
  return new AgentError(
    "BUS_TLS",
    `TLS with the NATS server at ${servers} failed (${code}: ${err.message}): ${fix}`,
    {
      cause: err,
    },
  );
}
