import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import type { CapabilityObject } from "../../shared/contracts/capability.js";
import { InMemoryMemory } from "../../shared/memory/in-memory.js";
import { relevance } from "../../shared/memory/memory.js";
import { ManualClock, systemClock, toRfc3339 } from "../../shared/runtime/clock.js";
import { RUN_ID_PATTERN, sequentialIds, uuidIds } from "../../shared/runtime/ids.js";
import { toAgentError } from "../../shared/runtime/errors.js";
import { createLogger } from "../../shared/runtime/logger.js";
import { httpFetchTool, MAX_REDIRECTS } from "../../shared/tools/builtin/http-fetch.js";
import { startServer } from "../helpers/http-server.js";
import { runner, spec, toolCtx } from "../helpers/fixtures.js";

const PLANTED = "sk-PLANTED-9f8e7d";

describe("logger", () => {
  it("writes JSON lines with the actor and never the configured secret keys", () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const log = createLogger({ actor: "agent", destination: sink });
    log.child({ runId: "r1", phase: "ACT", iteration: 3 }).info(
      {
        apiKey: PLANTED,
        headers: { authorization: `Bearer ${PLANTED}`, "x-api-key": PLANTED },
        nested: { deeper: { token: PLANTED } },
      },
      "calling model",
    );
    expect(lines).toHaveLength(1);
    const record = JSON.parse(lines[0] ?? "{}") as Record<string, unknown>;
    expect(record).toMatchObject({
      actor: "agent",
      runId: "r1",
      phase: "ACT",
      iteration: 3,
      msg: "calling model",
    });
    expect(lines.join("")).not.toContain(PLANTED);
    expect(lines.join("")).toContain("[REDACTED]");
  });
});

describe("runner logging", () => {
  it("logs one JSON line per audit event with runId, phase and iteration", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const result = await runner({ logger: createLogger({ actor: "agent", destination: sink }) }).run(spec());
    const records = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(records).toHaveLength(result.audit.length);
    for (const r of records)
      expect(r).toMatchObject({
        actor: "agent",
        runId: result.state.runId,
        phase: expect.any(String) as unknown,
        iteration: expect.any(Number) as unknown,
      });
    expect(records.at(-1)).toMatchObject({ kind: "run.committed", phase: "COMMIT", level: 30 });
  });
});

describe("clock and ids", () => {
  it("the system clock sleeps for real and can be aborted", async () => {
    const before = systemClock.now();
    await systemClock.sleep(15);
    expect(systemClock.now() - before).toBeGreaterThanOrEqual(10);
    const ac = new AbortController();
    const pending = systemClock.sleep(10_000, ac.signal);
    ac.abort(new Error("stop"));
    await expect(pending).rejects.toThrow("stop");
    await expect(systemClock.sleep(1, ac.signal)).rejects.toThrow("stop");
  });

  it("manual clock: zero sleeps resolve at once, aborted sleeps reject", async () => {
    const clock = new ManualClock(5);
    await clock.sleep(0);
    const ac = new AbortController();
    ac.abort(new Error("gone"));
    await expect(clock.sleep(5, ac.signal)).rejects.toThrow("gone");
    expect(toRfc3339(0)).toBe("1970-01-01T00:00:00.000Z");
  });

  it("toRfc3339: the same instant twice, then another; an invalid one still throws", () => {
    expect(toRfc3339(1_800_000_000_123)).toBe("2027-01-15T08:00:00.123Z");
    expect(toRfc3339(1_800_000_000_123)).toBe("2027-01-15T08:00:00.123Z");
    expect(toRfc3339(1_800_000_000_124)).toBe("2027-01-15T08:00:00.124Z");
    expect(() => toRfc3339(Number.NaN)).toThrow(RangeError);
    expect(() => toRfc3339(Number.NaN)).toThrow(RangeError);
  });

  it("ids: uuid-based ids are valid run ids; sequential ids are predictable", () => {
    const id = uuidIds.next("run");
    expect(id).toMatch(RUN_ID_PATTERN);
    expect(id.startsWith("run-")).toBe(true);
    expect(uuidIds.next()).not.toBe(uuidIds.next());
    const seq = sequentialIds(7);
    expect([seq.next("a"), seq.next()]).toEqual(["a-000007", "id-000008"]);
  });
});

describe("memory", () => {
  it("forget removes an entry from its namespace only", async () => {
    const memory = new InMemoryMemory(new ManualClock(0));
    const a = await memory.remember("x", "apples are red");
    await memory.remember("y", "apples are green");
    expect(await memory.forget("x", a.id)).toBe(true);
    expect(await memory.forget("x", a.id)).toBe(false);
    expect(await memory.recall("x", "apples", 5)).toEqual([]);
    expect(await memory.recall("y", "apples", 5)).toHaveLength(1);
    expect(relevance("", "anything")).toBe(0);
  });

  it("restore stores a text again unless it was forgotten at or after the time given", async () => {
    const clock = new ManualClock(100);
    const memory = new InMemoryMemory(clock);
    const a = await memory.remember("x", "apples are red");
    await clock.advance(10);
    await memory.forget("x", a.id);
    expect(await memory.restore("x", "apples are red", 110)).toBe(false);
    expect(await memory.recall("x", "apples", 5)).toEqual([]);
    expect(await memory.restore("x", "apples are red", 111)).toBe(true);
    expect((await memory.recall("x", "apples", 5)).map((m) => m.text)).toEqual(["apples are red"]);
  });
});

describe("http_fetch edges", () => {
  const ctx = (granted: CapabilityObject) =>
    toolCtx(granted, { runId: "r", actionId: "a", idempotencyKey: "k" });

  const net: CapabilityObject = { kind: "network", allowedHosts: ["127.0.0.1"] };

  it("HEAD returns no body; an endless redirect loop stops; other schemes and grants are refused", async () => {
    await using server = await startServer((req, res) => {
      if (req.url === "/loop") {
        res.writeHead(301, { location: "/loop" });
        res.end();
        return;
      }
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("body");
    });
    const head = await httpFetchTool.execute({ url: `${server.url}/x`, method: "HEAD" }, ctx(net));
    expect(head.output).toMatchObject({ status: 200, body: "" });
    await expect(
      httpFetchTool.execute({ url: `${server.url}/loop`, method: "GET" }, ctx(net)),
    ).rejects.toThrow(`more than ${MAX_REDIRECTS} redirects`);
    await expect(
      httpFetchTool.execute({ url: "ftp://127.0.0.1/x", method: "GET" }, ctx(net)),
    ).rejects.toThrow(/unsupported URL scheme/);
    await expect(
      httpFetchTool.execute({ url: `${server.url}/x`, method: "GET" }, ctx({ kind: "compute" })),
    ).rejects.toThrow(/not in allowed_hosts/);
  });

  it("a host that refuses the connection: the call's error says so, and where, not only 'fetch failed'", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const thrown = await httpFetchTool
      .execute({ url: `http://127.0.0.1:${port}/x`, method: "GET" }, ctx(net))
      .catch((err: unknown) => err);
    // As the tool's invoker reports it to the run (and the run to its model).
    expect(toAgentError(thrown, "TOOL_FAILED")).toMatchObject({
      code: "TOOL_FAILED",
      message: `fetch failed: connect ECONNREFUSED 127.0.0.1:${port}`,
    });
    expect(toAgentError(new Error("plain"), "TOOL_FAILED").message).toBe("plain");
  });
});
