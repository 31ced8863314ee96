/**
 * Who may do what on the web console: a pure decision on the request's credentials, so the HTTP
 * shell only reads headers and answers. Tokens are compared in constant time.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";
import { AgentError } from "../../shared/runtime/errors.js";

export interface AccessConfig {
  /** Every request needs it when set. */
  token?: string | undefined;
  /** Operate requests need it; unset: nobody operates. */
  operateToken?: string | undefined;
  /** Without a token, the Host names besides loopback's a request may carry (CONSOLE_ALLOWED_HOSTS). */
  allowedHosts?: readonly string[] | undefined;
}

export interface Credentials {
  /** The `Authorization` header. */
  authorization?: string | undefined;
  /** The `X-Operate-Token` header. */
  operateToken?: string | undefined;
}

/** What a request may do: nothing (why), read, or read and operate. */
export type Access = { read: false; error: AgentError } | { read: true; operate: boolean };

const digest = (text: string): Buffer => createHash("sha256").update(text).digest();

// Both sides hashed: equal lengths always, so the comparison's time says nothing of the token's length.
const same = (given: string | undefined, wanted: string): boolean =>
  given !== undefined && timingSafeEqual(digest(given), digest(wanted));

/** The user name of a basic `Authorization` header, if it names one. */
export function basicUser(authorization: string | undefined): string | undefined {
  const [scheme, value] = (authorization ?? "").trim().split(/\s+/, 2);
  if (scheme?.toLowerCase() !== "basic" || !value) return undefined;
  const decoded = Buffer.from(value, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  const user = colon < 0 ? "" : decoded.slice(0, colon).trim();
  return user === "" ? undefined : user;
}

/** The secret an `Authorization` header carries: a bearer token, or a basic auth password. */
export function presented(authorization: string | undefined): string | undefined {
  const [scheme, value] = (authorization ?? "").trim().split(/\s+/, 2);
  if (!scheme || !value) return undefined;
  if (scheme.toLowerCase() === "bearer") return value;
  if (scheme.toLowerCase() !== "basic") return undefined;
  const decoded = Buffer.from(value, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}

/**
 * What the credentials allow under `config`. The operate token counts only in `X-Operate-Token`:
 * a browser sends basic auth with every request, cross-site form posts included, never that header.
 */
export function accessOf(config: AccessConfig, creds: Credentials): Access {
  const secret = presented(creds.authorization);
  const operator = config.operateToken !== undefined && same(creds.operateToken, config.operateToken);
  if (config.token !== undefined && !operator && !same(secret, config.token)) {
    return {
      read: false,
      error: new AgentError(
        "UNAUTHORIZED",
        secret === undefined
          ? "this console needs its token: send `Authorization: Bearer <CONSOLE_TOKEN>` (or basic auth with it as the password)"
          : "the token sent is not this console's CONSOLE_TOKEN",
      ),
    };
  }
  return { read: true, operate: operator };
}

/** Why an operate request is refused (FORBIDDEN), for a request that may read but not operate. */
export function operateRefusal(config: AccessConfig): AgentError {
  return new AgentError(
    "FORBIDDEN",
    config.operateToken === undefined
      ? "this console only reads: operating needs CONSOLE_OPERATE_TOKEN set where the console runs"
      : "operating needs the console's operate token: send `X-Operate-Token: <CONSOLE_OPERATE_TOKEN>`",
  );
}

/** The host name of a `Host` header, lower case, without its port (`[::1]:8090` is `[::1]`). */
export function hostName(host: string): string {
  const name = host.trim().toLowerCase();
  if (name.startsWith("[")) return name.slice(0, name.indexOf("]") + 1);
  const colon = name.indexOf(":");
  return colon < 0 ? name : name.slice(0, colon);
}

const LOOPBACK_NAMES: readonly string[] = ["localhost", "127.0.0.1", "[::1]"];

/**
 * Without a token, a page on another site could rebind its own name to 127.0.0.1 and read the
 * console as same-origin: only loopback names and CONSOLE_ALLOWED_HOSTS are answered then.
 */
export function hostRefusal(config: AccessConfig, host: string | undefined): AgentError | undefined {
  if (config.token !== undefined) return undefined;
  const name = hostName(host ?? "");
  const allowed = config.allowedHosts?.map((h) => hostName(h)) ?? [];
  if (LOOPBACK_NAMES.includes(name) || allowed.includes(name)) return undefined;
  return new AgentError(
    "HOST_NOT_ALLOWED",
    `Host '${name.slice(0, 100)}' is not this console's: without CONSOLE_TOKEN only localhost, 127.0.0.1 and [::1] are answered; add the name to CONSOLE_ALLOWED_HOSTS or set CONSOLE_TOKEN`,
  );
}

/** Whether a host the console binds is loopback only. */
export function isLoopback(host: string): boolean {
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  return host === "::1";
}

/**
 * A console bound beyond loopback without a token would show every run's prompts and outputs to
 * whoever reaches the port: it is refused at start (INVALID_INPUT naming the fix).
 */
export function checkBinding(host: string, config: AccessConfig): void {
  if (isLoopback(host) || config.token !== undefined) return;
  throw new AgentError(
    "INVALID_INPUT",
    `CONSOLE_HOST '${host}' is not loopback: set CONSOLE_TOKEN (at least 16 characters) so that only those who have it see the console, or bind 127.0.0.1`,
  );
}
