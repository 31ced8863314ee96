import { describe, expect, it, vi } from "vitest";
import { AgentEnv } from "../../services/agent/env.js";
import { parseEnv } from "../../shared/runtime/config.js";
import { localTools, registerRunTools } from "../../services/agent/local-tools.js";
import { InMemoryMemory } from "../../shared/memory/in-memory.js";
import { ManualClock } from "../../shared/runtime/clock.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { fanOutSpawnTool } from "../../shared/tools/builtin/spawn.js";
import { ToolRegistry } from "../../shared/tools/registry.js";
import { describeTool, type AnyTool } from "../../shared/tools/tool.js";

const deps = { memory: new InMemoryMemory(new ManualClock(0)) };
const BASE = { NATS_URL: "nats://127.0.0.1:4222" };

describe("AGENT_LOCAL_TOOLS: the built-in tools a worker runs in-process", () => {
  it("defaults to echo and memory; an empty value leaves every tool remote", () => {
    expect(AgentEnv.parse(BASE).AGENT_LOCAL_TOOLS).toEqual(["echo", "memory"]);
    expect(AgentEnv.parse({ ...BASE, AGENT_LOCAL_TOOLS: "" }).AGENT_LOCAL_TOOLS).toEqual([]);
    expect(AgentEnv.parse({ ...BASE, AGENT_LOCAL_TOOLS: " echo , http_fetch " }).AGENT_LOCAL_TOOLS).toEqual([
      "echo",
      "http_fetch",
    ]);
  });

  it("builds the idempotent built-ins it names, and refuses a tool that is not idempotent, or no built-in, naming it", () => {
    const tools = localTools(["echo", "memory", "http_fetch"], deps);
    expect([...tools.keys()]).toEqual(["echo", "memory", "http_fetch"]);
    expect([...tools.values()].every((tool) => tool.idempotent)).toBe(true);
    expect(localTools([], deps).size).toBe(0);
    expect(() => localTools(["echo", "spawn_agent"], deps)).toThrow(
      expect.objectContaining({
        code: "INVALID_INPUT",
        message: expect.stringMatching(/^AGENT_LOCAL_TOOLS: 'spawn_agent' is not idempotent/) as string,
      }),
    );
    // Refused as the environment is read, before the worker connects.
    expect(() => parseEnv(AgentEnv, { ...BASE, AGENT_LOCAL_TOOLS: "echo,charge" })).toThrow(
      expect.objectContaining({
        code: "INVALID_INPUT",
        message:
          "invalid configuration: AGENT_LOCAL_TOOLS: 'charge' is no built-in tool a worker can run (echo, file_list, file_read, file_write, http_fetch, memory)",
      }),
    );
  });

  it("a run's tools: the local ones as they are, never described over NATS; the others asked of their services; in the order named, spawn_agent last", async () => {
    const local = localTools(["echo", "memory"], deps);
    const pause = { ...describeTool(echoTool), name: "pause" };
    const describe = vi.fn((names: readonly string[]) =>
      Promise.resolve(names.includes("pause") ? [pause] : []),
    );
    const proxies: string[] = [];
    const remote = (descriptor: typeof pause): AnyTool => {
      proxies.push(descriptor.name);
      return { ...echoTool, name: descriptor.name };
    };
    const registry = new ToolRegistry();
    const sources = { local, describe, remote, spawn: fanOutSpawnTool() };
    await registerRunTools(registry, ["spawn_agent", "echo", "pause", "missing", "memory"], sources);
    expect(describe).toHaveBeenCalledWith(["pause", "missing"]);
    expect(proxies).toEqual(["pause"]);
    expect(registry.descriptors().map((d) => d.name)).toEqual(["echo", "pause", "memory", "spawn_agent"]);
    expect(registry.get("echo")).toBe(echoTool);
    // Asked again (a lease that found the run started): what is registered stays.
    await registerRunTools(registry, ["echo", "pause"], sources);
    expect(proxies).toEqual(["pause"]);
  });
});
