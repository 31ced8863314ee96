import { describe, expect, it } from "vitest";
import { ToolCatalog } from "../../services/agent/tool-catalog.js";
import type { ToolDescriptor } from "../../shared/contracts/tool.js";
import pino from "pino";
import { ManualClock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { describeTool } from "../../shared/tools/tool.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";

/** Services that describe `served` tools, counting every time each is asked. */
function services(served: Map<string, ToolDescriptor>) {
  const asked = new Map<string, number>();
  const describe = (name: string): Promise<ToolDescriptor | undefined> => {
    asked.set(name, (asked.get(name) ?? 0) + 1);
    return Promise.resolve(served.get(name));
  };
  return { describe, asked };
}

const echo = describeTool(echoTool);

describe("tool catalog", () => {
  it("reuses a descriptor for ttlMs, then asks the service again and sees what it says now", async () => {
    const served = new Map([["echo", echo]]);
    const { describe, asked } = services(served);
    const clock = new ManualClock(0);
    const catalog = new ToolCatalog(describe, clock, { ttlMs: 5_000, outageMs: 60_000 }, silentLogger);
    expect(await catalog.lookup(["echo"])).toEqual([echo]);
    await clock.advance(4_999);
    expect(await catalog.lookup(["echo"])).toEqual([echo]);
    expect(asked.get("echo")).toBe(1);
    // Redeployed with a new timeout: seen once the old descriptor is older than the ttl.
    served.set("echo", { ...echo, timeoutMs: 1_234 });
    await clock.advance(1);
    expect(await catalog.lookup(["echo"])).toEqual([{ ...echo, timeoutMs: 1_234 }]);
    expect(asked.get("echo")).toBe(2);
  });

  it("a tool nobody serves is left out and asked for again by the next lookup; a tool gone after its ttl is dropped from a new run", async () => {
    const served = new Map<string, ToolDescriptor>([["echo", echo]]);
    const { describe, asked } = services(served);
    const clock = new ManualClock(0);
    const catalog = new ToolCatalog(describe, clock, { ttlMs: 5_000, outageMs: 60_000 }, silentLogger);
    expect(await catalog.lookup(["missing", "echo"])).toEqual([echo]);
    expect(await catalog.lookup(["missing", "echo"])).toEqual([echo]);
    expect(asked.get("missing")).toBe(2);
    served.delete("echo");
    await clock.advance(5_000);
    expect(await catalog.lookup(["echo"], true)).toEqual([]);
    await clock.advance(1);
    expect(await catalog.lookup(["echo"], true)).toEqual([]);
    expect(asked.get("echo")).toBe(3);
  });

  it("concurrent lookups of a tool share one request; ttl 0 asks every time", async () => {
    const { describe, asked } = services(new Map([["echo", echo]]));
    const catalog = new ToolCatalog(
      describe,
      new ManualClock(0),
      { ttlMs: 5_000, outageMs: 60_000 },
      silentLogger,
    );
    const all = await Promise.all([
      catalog.lookup(["echo"]),
      catalog.lookup(["echo"]),
      catalog.lookup(["echo"]),
    ]);
    expect(all).toEqual([[echo], [echo], [echo]]);
    expect(asked.get("echo")).toBe(1);
    const uncached = services(new Map([["echo", echo]]));
    const every = new ToolCatalog(
      uncached.describe,
      new ManualClock(0),
      { ttlMs: 0, outageMs: 60_000 },
      silentLogger,
    );
    await every.lookup(["echo"]);
    await every.lookup(["echo"]);
    expect(uncached.asked.get("echo")).toBe(2);
  });

  it("a service that takes describes and answers none fails the lookup; after outageMs a run not yet started leaves its tool out, a started one still waits; an answer ends the silence", async () => {
    const clock = new ManualClock(0);
    let hung = true;
    let asked = 0;
    const describe = (name: string): Promise<ToolDescriptor | undefined> => {
      asked += 1;
      if (!hung) return Promise.resolve(name === "echo" ? echo : undefined);
      return Promise.reject(new AgentError("TOOL_TIMEOUT", `no answer from ${name}'s service in 2000 ms`));
    };
    const lines: string[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => void lines.push(line) });
    const catalog = new ToolCatalog(describe, clock, { ttlMs: 5_000, outageMs: 60_000 }, logger);
    const timedOut = { code: "TOOL_TIMEOUT" };
    await expect(catalog.lookup(["echo"], true)).rejects.toMatchObject(timedOut);
    await clock.advance(59_999);
    await expect(catalog.lookup(["echo"], true)).rejects.toMatchObject(timedOut);
    expect(lines).toEqual([]);
    await clock.advance(1);
    // One describe for both: each lookup decides for its own run.
    const [started, fresh] = await Promise.allSettled([
      catalog.lookup(["echo"]),
      catalog.lookup(["echo"], true),
    ]);
    expect(started).toMatchObject({ status: "rejected", reason: timedOut });
    expect(fresh).toEqual({ status: "fulfilled", value: [] });
    expect(asked).toBe(3);
    expect(lines.join("")).toContain("tool left out of a new run");
    expect(lines.join("")).toContain('"silentMs":60000');
    // Asked again by the next lookup (nothing is remembered), and found once it answers.
    hung = false;
    expect(await catalog.lookup(["echo"], true)).toEqual([echo]);
    expect(asked).toBe(4);
    // An answer ends the silence: a later one is waited out afresh.
    hung = true;
    await clock.advance(5_000);
    await expect(catalog.lookup(["echo"], true)).rejects.toMatchObject(timedOut);
  });

  it("no connection is not a silent service: never given up on; with outageMs 0 the first unanswered describe leaves the tool out of a new run", async () => {
    const clock = new ManualClock(0);
    const offline = new ToolCatalog(
      () => Promise.reject(new AgentError("BUS_UNAVAILABLE", "no connection to NATS")),
      clock,
      { ttlMs: 5_000, outageMs: 1_000 },
      silentLogger,
    );
    await expect(offline.lookup(["echo"], true)).rejects.toMatchObject({ code: "BUS_UNAVAILABLE" });
    await clock.advance(10_000);
    await expect(offline.lookup(["echo"], true)).rejects.toMatchObject({ code: "BUS_UNAVAILABLE" });
    const impatient = new ToolCatalog(
      () => Promise.reject(new AgentError("TOOL_TIMEOUT", "no answer")),
      clock,
      { ttlMs: 5_000, outageMs: 0 },
      silentLogger,
    );
    expect(await impatient.lookup(["echo"], true)).toEqual([]);
    await expect(impatient.lookup(["echo"])).rejects.toMatchObject({ code: "TOOL_TIMEOUT" });
  });
});

describe("tool catalog, for a run that has started", () => {
  it("goes on with the descriptor this worker last got when the service answers no describe or nobody serves the tool; a new run does not; a lost connection fails the lookup", async () => {
    const clock = new ManualClock(0);
    let service: "up" | "hung" | "gone" | "offline" = "up";
    let current: ToolDescriptor = echo;
    const describe = (name: string): Promise<ToolDescriptor | undefined> => {
      if (service === "up") return Promise.resolve(name === "echo" ? current : undefined);
      if (service === "gone") return Promise.resolve(undefined);
      const code = service === "hung" ? "TOOL_TIMEOUT" : "BUS_UNAVAILABLE";
      return Promise.reject(new AgentError(code, `describe of ${name} failed`));
    };
    const lines: string[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => void lines.push(line) });
    const catalog = new ToolCatalog(describe, clock, { ttlMs: 5_000, outageMs: 60_000 }, logger);
    // Never described: a started run's lease fails, and is retried, as before.
    service = "hung";
    await expect(catalog.lookup(["echo"])).rejects.toMatchObject({ code: "TOOL_TIMEOUT" });
    service = "up";
    current = { ...echo, timeoutMs: 1_234 };
    expect(await catalog.lookup(["echo"])).toEqual([current]);
    // Hung, past the ttl: the started run gets the last descriptor, the new one waits.
    service = "hung";
    await clock.advance(5_000);
    const [started, fresh] = await Promise.allSettled([
      catalog.lookup(["echo"]),
      catalog.lookup(["echo"], true),
    ]);
    expect(started).toEqual({ status: "fulfilled", value: [current] });
    expect(fresh).toMatchObject({ status: "rejected", reason: { code: "TOOL_TIMEOUT" } });
    expect(lines.join("")).toMatch(
      /"tool":"echo","service":"no answer".*goes on with the tool's last descriptor/,
    );
    // Nobody serves it: the new run leaves it out, the started one still has it.
    service = "gone";
    expect(await catalog.lookup(["echo"], true)).toEqual([]);
    expect(await catalog.lookup(["echo"])).toEqual([current]);
    expect(lines.join("")).toContain('"service":"nobody serves it"');
    // Without a connection nothing is learnt of the service: the lease fails.
    service = "offline";
    await expect(catalog.lookup(["echo"])).rejects.toMatchObject({ code: "BUS_UNAVAILABLE" });
    // A tool this worker never got stays out of a started run too.
    service = "gone";
    expect(await catalog.lookup(["other"])).toEqual([]);
  });
});

describe("tool catalog, descriptors shared between workers", () => {
  it("a worker that never described a tool takes the one another worker shared, for a started run; each worker shares a descriptor only when it changes", async () => {
    const clock = new ManualClock(0);
    const stored = new Map<string, ToolDescriptor>();
    let puts = 0;
    const shared = {
      get: (name: string) => Promise.resolve(stored.get(name)),
      put: (name: string, d: ToolDescriptor) => {
        puts += 1;
        stored.set(name, d);
        return Promise.resolve();
      },
    };
    let hung = false;
    let current = echo;
    const describe = (name: string): Promise<ToolDescriptor | undefined> =>
      hung
        ? Promise.reject(new AgentError("TOOL_TIMEOUT", `no answer from ${name}'s service`))
        : Promise.resolve(name === "echo" ? current : undefined);
    const options = { ttlMs: 0, outageMs: 60_000 };
    const first = new ToolCatalog(describe, clock, options, silentLogger, shared);
    await first.lookup(["echo"]);
    await first.lookup(["echo"]);
    expect(puts).toBe(1);
    current = { ...echo, timeoutMs: 4_321 };
    await first.lookup(["echo"]);
    expect(puts).toBe(2);
    // A second worker, started while the service hangs: it goes on with the shared descriptor.
    hung = true;
    const lines: string[] = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => void lines.push(line) });
    const second = new ToolCatalog(describe, clock, options, logger, shared);
    expect(await second.lookup(["echo"])).toEqual([current]);
    expect(lines.join("")).toContain('"from":"shared"');
    // Not for a new run; and nothing shared, nothing to go on with.
    await expect(second.lookup(["echo"], true)).rejects.toMatchObject({ code: "TOOL_TIMEOUT" });
    const third = new ToolCatalog(describe, clock, options, silentLogger, {
      get: () => Promise.reject(new Error("bucket unreachable")),
      put: () => Promise.resolve(),
    });
    await expect(third.lookup(["echo"])).rejects.toMatchObject({ code: "TOOL_TIMEOUT" });
  });
});
