import { errors } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import type { AccessConfig } from "../../services/console/access.js";
import { consoleApp, type ConsoleDeps } from "../../services/console/app.js";
import { FeedLimit } from "../../services/console/feed-limit.js";

const TOKEN = "read-token-0123456789";
const OPERATE = "operate-token-0123456789";
const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

/** A watch that starts when the test says, and ends when stopped. */
function slowWatch() {
  let start: (() => void) | undefined;
  const started = new Promise<void>((resolve) => (start = resolve));
  const watcher = { stops: 0, asked: 0 };
  const watch = async () => {
    watcher.asked += 1;
    await started;
    let end: (() => void) | undefined;
    const ended = new Promise<void>((resolve) => (end = resolve));
    return {
      stop: () => {
        watcher.stops += 1;
        end?.();
      },
      async *[Symbol.asyncIterator]() {
        await ended;
        yield* [];
      },
    };
  };
  return { watcher, watch, start: () => start?.() };
}

/**
 * The console's HTTP application over a stand-in bus and client (the cluster itself is in
 * test/e2e/console.test.ts): what it lets through, and what it hands the client.
 */
function app(access: AccessConfig, watch: () => Promise<unknown> = slowWatch().watch) {
  const calls: unknown[] = [];
  const warnings: unknown[] = [];
  const deps = {
    bus: {
      logger: { warn: (obj: unknown) => void warnings.push(obj), info: () => undefined },
      buckets: { runs: { watch } },
    },
    reads: {},
    client: {
      killSwitch: (args: unknown) => {
        calls.push(args);
        return Promise.resolve("kill switch on");
      },
    },
    access,
    files: new Map(),
    feeds: new FeedLimit(4),
  } as unknown as ConsoleDeps;
  return { app: consoleApp(deps), calls, warnings };
}

const switchOn = JSON.stringify({ active: true, by: "mallory" });

describe("the console's operate requests: no cross-site request forgery", () => {
  it("refuses a text/plain form post that carries the operate token as basic auth (a browser sends it cross-site)", async () => {
    const { app: console, calls } = app({ operateToken: OPERATE });
    const res = await console.request("/api/operate/killswitch", {
      method: "POST",
      headers: {
        "content-type": "text/plain",
        authorization: basic("alice", OPERATE),
        host: "127.0.0.1:8090",
      },
      body: `{"active":true,"by":"mallory","x":"="}`,
    });
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ error: { code: "FORBIDDEN" } });
    expect(calls).toEqual([]);
  });

  it("reads only an application/json body (415 UNSUPPORTED_MEDIA_TYPE), and refuses a cross-site request (403)", async () => {
    const { app: console, calls } = app({ operateToken: OPERATE });
    const headers = { "x-operate-token": OPERATE, host: "localhost:8090" };
    const plain = await console.request("/api/operate/killswitch", {
      method: "POST",
      headers: { ...headers, "content-type": "text/plain" },
      body: switchOn,
    });
    expect(plain.status).toBe(415);
    expect(await plain.json()).toMatchObject({
      error: {
        code: "UNSUPPORTED_MEDIA_TYPE",
        message: expect.stringContaining("application/json") as unknown,
      },
    });
    const crossSite = await console.request("/api/operate/killswitch", {
      method: "POST",
      headers: { ...headers, "content-type": "application/json", "sec-fetch-site": "cross-site" },
      body: switchOn,
    });
    expect(crossSite.status).toBe(403);
    expect(calls).toEqual([]);
    const own = await console.request("/api/operate/killswitch", {
      method: "POST",
      headers: {
        ...headers,
        "content-type": "application/json; charset=utf-8",
        "sec-fetch-site": "same-origin",
      },
      body: switchOn,
    });
    expect(own.status).toBe(200);
    expect(calls).toEqual([expect.objectContaining({ active: true, by: "mallory" })]);
  });

  it("says who acts from the basic auth user, else the body's by, else 'console'", async () => {
    const { app: console, calls } = app({ token: TOKEN, operateToken: OPERATE });
    const post = (headers: Record<string, string>, body: unknown) =>
      console.request("/api/operate/killswitch", {
        method: "POST",
        headers: { "x-operate-token": OPERATE, "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
      });
    expect(
      (await post({ authorization: basic("alice", TOKEN) }, { active: true, by: "mallory" })).status,
    ).toBe(200);
    expect((await post({ authorization: `Bearer ${TOKEN}` }, { active: true, by: "carol" })).status).toBe(
      200,
    );
    expect((await post({ authorization: `Bearer ${TOKEN}` }, { active: false })).status).toBe(200);
    expect(calls.map((c) => (c as { by: string }).by)).toEqual(["alice", "carol", "console"]);
  });
});

describe("the console without a token: DNS rebinding", () => {
  it("answers a loopback Host, refuses another with HOST_NOT_ALLOWED (421)", async () => {
    const { app: console } = app({ allowedHosts: ["console.internal"] });
    const get = (host: string) => console.request("/api/whoami", { headers: { host } });
    expect((await get("127.0.0.1:8090")).status).toBe(200);
    expect((await get("console.internal:8090")).status).toBe(200);
    const rebound = await get("attacker.example:8090");
    expect(rebound.status).toBe(421);
    expect(await rebound.json()).toMatchObject({
      error: {
        code: "HOST_NOT_ALLOWED",
        message: expect.stringContaining("CONSOLE_ALLOWED_HOSTS") as unknown,
      },
    });
  });
});

describe("the console's live feeds", () => {
  it("stops the statuses' watcher when the client goes before the watch has started", async () => {
    const slow = slowWatch();
    const { app: console } = app({}, slow.watch);
    const res = await console.request("/api/live/runs", { headers: { host: "localhost" } });
    await expect.poll(() => slow.watcher.asked).toBe(1);
    await res.body?.cancel();
    slow.start();
    await expect.poll(() => slow.watcher.stops).toBe(1);
  });

  it("ends a failed feed with a structured error event, logged: NATS down is BUS_UNAVAILABLE", async () => {
    const down = () => Promise.reject(new errors.ClosedConnectionError());
    const { app: console, warnings } = app({}, down);
    const res = await console.request("/api/live/runs", { headers: { host: "localhost" } });
    const text = await res.text();
    const event = /event: error\ndata: (.*)\n/.exec(text)?.[1] ?? "{}";
    expect(JSON.parse(event)).toMatchObject({ error: { code: "BUS_UNAVAILABLE", retryable: true } });
    expect(warnings).toHaveLength(1);
  });
});
