import type { Clock } from "../runtime/clock.js";
import { AgentError, isAgentError, toAgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { fullJitterDelay } from "../tools/backoff.js";

export interface HttpDeps {
  clock: Clock;
  random: Random;
  fetch?: typeof fetch;
}

export interface HttpPolicy {
  retries: number;
  baseDelayMs: number;
  maxDelayMs: number;
  timeoutMs: number;
}

export const DEFAULT_HTTP_POLICY: HttpPolicy = {
  retries: 3,
  baseDelayMs: 500,
  maxDelayMs: 20_000,
  timeoutMs: 120_000,
};

/** The wait a 429/503 asks for: `retry-after` as seconds or an HTTP date. */
export function retryAfterMs(header: string | null, now: number): number | undefined {
  if (header === null || header.trim() === "") return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** An HTTP error reply; one that names no URL (a 404 from a wrong `baseUrl`) is told where it came from. */
function classify(status: number, body: string, url: string): AgentError {
  const snippet = `${body.slice(0, 500)} (POST ${shownUrl(url)})`;
  if (status === 429) return new AgentError("MODEL_RATE_LIMITED", `rate limited (429): ${snippet}`);
  if (status === 401 || status === 403)
    return new AgentError("MODEL_AUTH", `authentication failed (${status}): ${snippet}`);
  if (status >= 500) return new AgentError("MODEL_UNAVAILABLE", `provider error (${status}): ${snippet}`);
  return new AgentError("MODEL_REJECTED", `request rejected (${status}): ${snippet}`);
}

/**
 * POSTs JSON and returns the parsed JSON reply. Retries 429, 5xx, timeouts and network errors
 * with full-jitter backoff, waiting at least what `retry-after` asks; other statuses fail at once.
 * Header values (the API key among them) never appear in an error.
 */
export async function postJson(
  url: string,
  headers: Record<string, string>,
  body: unknown,
  deps: HttpDeps,
  policy: HttpPolicy = DEFAULT_HTTP_POLICY,
  signal?: AbortSignal,
): Promise<unknown> {
  const doFetch = deps.fetch ?? fetch;
  for (let attempt = 0; ; attempt++) {
    let error: AgentError;
    let wait: number | undefined;
    try {
      const timeout = AbortSignal.timeout(policy.timeoutMs);
      const response = await doFetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      const text = await response.text();
      if (response.ok) return parseJson(text);
      error = classify(response.status, scrub(text, headers), url);
      wait = retryAfterMs(response.headers.get("retry-after"), deps.clock.now());
    } catch (err) {
      error = fromThrown(err, url, signal);
    }
    if (!error.retryable || attempt >= policy.retries) throw error;
    const backoff = fullJitterDelay(attempt, policy, deps.random);
    await deps.clock.sleep(Math.max(backoff, wait ?? 0), signal);
  }
}

/**
 * Removes the request's header values (the API key, with or without its `Bearer ` scheme) from a
 * reply body: some providers and proxies echo the key in an error, which would otherwise reach
 * the error message, the audit trail and the logs.
 */
function scrub(body: string, headers: Record<string, string>): string {
  const secrets = Object.values(headers)
    .flatMap((value) => [value, value.replace(/^\S+\s+/, "")])
    .filter((value) => value.length >= 8)
    .sort((a, b) => b.length - a.length);
  return secrets.reduce((text, secret) => text.replaceAll(secret, "[REDACTED]"), body);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (cause) {
    throw new AgentError("MODEL_BAD_RESPONSE", "provider returned a body that is not JSON", { cause });
  }
}

/**
 * A request that got no reply: a timeout or a connection that failed names the URL it tried, the
 * one thing that tells a wrong `baseUrl` from a provider down (without its credentials or query).
 */
function fromThrown(err: unknown, url: string, signal?: AbortSignal): AgentError {
  if (isAgentError(err)) return err;
  if (signal?.aborted) return new AgentError("MODEL_REJECTED", "request cancelled", { cause: err });
  if (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")) {
    return new AgentError("MODEL_TIMEOUT", `model request to ${shownUrl(url)} timed out`, { cause: err });
  }
  // fetch quotes a URL it refuses (one with credentials) whole: it is shown as any other.
  const message = toAgentError(err, "MODEL_NETWORK").message.replaceAll(url, shownUrl(url));
  return new AgentError("MODEL_NETWORK", `${message} (POST ${shownUrl(url)})`, { cause: err });
}

/**
 * A URL as an error may show it: no user or password (`https://user:key@host`), query (`?key=…`)
 * or fragment, which can hold a secret; a URL that does not parse is not shown.
 */
export function shownUrl(url: string): string {
  try {
    const { protocol, host, pathname } = new URL(url);
    return `${protocol}//${host}${pathname}`;
  } catch {
    return "(a URL that does not parse)";
  }
}

/** Reads an API key from the environment variable a ModelRef names; the value is never logged. */
export function readApiKey(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  required: boolean,
): string | undefined {
  const value = env[name];
  if ((value === undefined || value === "") && required) {
    throw new AgentError("MISSING_API_KEY", `environment variable ${name} is not set`);
  }
  return value === "" ? undefined : value;
}
