import { describe, expect, it } from "vitest";
import { RedactionConfig, RedactionRules } from "../../shared/contracts/redaction.js";
import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import { loadRedactionConfig } from "../../shared/tools/redaction-config.js";
import { redactEvent, redactionPolicy, redactSettlement } from "../../shared/tools/redact-event.js";
import { recordedReply } from "../../shared/tools/redact-reply.js";
import {
  compileRules,
  configuredRules,
  holdsRedaction,
  REDACTED,
  redactField,
  type CompiledRules,
} from "../../shared/tools/redaction.js";

const KEY = /sk-[A-Za-z0-9]{8,}/.source;
const rules = (r: RedactionRules): CompiledRules => compileRules(r) as CompiledRules;

describe("redaction by JSON path", () => {
  it("replaces the value at a path, leaves the rest and the original untouched", () => {
    const input = { apiKey: "abc", query: "weather", nested: { apiKey: "keep" } };
    const r = redactField(input, "input", rules({ paths: ["input.apiKey"] }));
    expect(r.value).toEqual({ apiKey: REDACTED, query: "weather", nested: { apiKey: "keep" } });
    expect(r.paths).toEqual(["input.apiKey"]);
    expect(r.patterns).toEqual([]);
    expect(input.apiKey).toBe("abc");
  });

  it("applies input paths to inputs and output paths to outputs only", () => {
    const compiled = rules({ paths: ["input.token", "output.token"] });
    expect(redactField({ token: "t" }, "output", compiled)).toMatchObject({
      value: { token: REDACTED },
      paths: ["output.token"],
    });
    expect(redactField({ token: "t" }, "input", compiled).paths).toEqual(["input.token"]);
  });

  it("walks nested arrays with [*], [n] and .* wildcards", () => {
    const output = {
      accounts: [
        { id: 1, keys: [{ secret: "s1" }, { secret: "s2" }] },
        { id: 2, keys: [{ secret: "s3" }] },
      ],
      headers: { authorization: "Bearer x", cookie: "c" },
    };
    const r = redactField(
      output,
      "output",
      rules({ paths: ["output.accounts[*].keys[*].secret", "output.headers.*", "output.accounts[1].id"] }),
    );
    expect(r.value).toEqual({
      accounts: [
        { id: 1, keys: [{ secret: REDACTED }, { secret: REDACTED }] },
        { id: REDACTED, keys: [{ secret: REDACTED }] },
      ],
      headers: { authorization: REDACTED, cookie: REDACTED },
    });
    expect(r.paths.sort()).toEqual(
      ["output.accounts[*].keys[*].secret", "output.headers.*", "output.accounts[1].id"].sort(),
    );
  });

  it("a path that reaches nothing fires nothing; `input` alone is the whole input", () => {
    expect(redactField({ a: 1 }, "input", rules({ paths: ["input.b.c", "input[0]"] }))).toEqual({
      value: { a: 1 },
      paths: [],
      patterns: [],
    });
    expect(redactField("plain text", "input", rules({ paths: ["input"] })).value).toBe(REDACTED);
  });

  it("keeps a key named __proto__ a key", () => {
    const input = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}') as Record<string, unknown>;
    const r = redactField(input, "input", rules({ paths: ["input.__proto__"] }));
    expect(Object.getOwnPropertyDescriptor(r.value, "__proto__")?.value).toBe(REDACTED);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe("redaction by value pattern", () => {
  it("replaces every match inside every string, nested arrays included, and names the pattern", () => {
    const output = { log: ["key sk-AAAAAAAA1 then sk-BBBBBBBB2", { deep: ["sk-CCCCCCCC3"] }], n: 3 };
    const r = redactField(output, "output", rules({ patterns: [KEY] }));
    expect(r.value).toEqual({ log: [`key ${REDACTED} then ${REDACTED}`, { deep: [REDACTED] }], n: 3 });
    expect(r.patterns).toEqual([KEY]);
  });

  it("applies to a string that is not JSON, and to one that is JSON text, as text", () => {
    const compiled = rules({ patterns: [KEY, "password=\\S+"] });
    const r = redactField("login ok; password=hunter2 sk-DDDDDDDD4", "output", compiled);
    expect(r.value).toBe(`login ok; ${REDACTED} ${REDACTED}`);
    expect(r.patterns.sort()).toEqual([KEY, "password=\\S+"].sort());
    const json = redactField('{"key":"sk-EEEEEEEE5"}', "output", compiled);
    expect(json.value).toBe(`{"key":"${REDACTED}"}`);
  });

  it("does not fire on values a path already redacted, nor on numbers, booleans and null", () => {
    const r = redactField(
      { a: "x", b: 1, c: true, d: null },
      "input",
      rules({ paths: ["input.a"], patterns: ["\\[REDACTED\\]", "1", "true", "null"] }),
    );
    expect(r).toEqual({ value: { a: REDACTED, b: 1, c: true, d: null }, paths: ["input.a"], patterns: [] });
  });

  it("names a named pattern by its name, so a pattern quoting a literal secret is not recorded", () => {
    const compiled = rules({ patterns: [{ name: "db-password", regex: "hunter2" }, KEY] });
    const r = redactField({ dsn: "postgres://u:hunter2@db", key: "sk-JJJJJJJJ1" }, "input", compiled);
    expect(r.value).toEqual({ dsn: `postgres://u:${REDACTED}@db`, key: REDACTED });
    expect(r.patterns.sort()).toEqual(["db-password", KEY].sort());
    expect(JSON.stringify(r.patterns)).not.toContain("hunter2");
    expect(RedactionRules.safeParse({ patterns: [{ name: "x", regex: "(" }] }).success).toBe(false);
  });

  it("tells a value that holds a redaction", () => {
    expect(holdsRedaction({ a: [{ b: `x ${REDACTED}` }] })).toBe(true);
    expect(holdsRedaction({ a: [{ b: "x" }], n: 1 })).toBe(false);
  });
});

describe("redaction rules and configuration", () => {
  it("refuses a path outside input/output and a pattern that does not compile", () => {
    expect(RedactionRules.safeParse({ paths: ["apiKey"] }).success).toBe(false);
    expect(RedactionRules.safeParse({ paths: ["input..a"] }).success).toBe(false);
    expect(RedactionRules.safeParse({ patterns: ["(unclosed"] }).success).toBe(false);
    expect(
      RedactionRules.safeParse({ paths: ["input.a[*].b", "output[0].*"], patterns: [KEY] }).success,
    ).toBe(true);
  });

  it("merges a tool's own rules with the operators' for it and for *; none gives no rules", () => {
    const config = RedactionConfig.parse({
      tools: { echo: { paths: ["input.text"] }, "*": { patterns: [KEY] } },
    });
    const merged = compileRules({ paths: ["output.text", "input.text"] }, ...configuredRules(config, "echo"));
    expect(merged?.paths.map((p) => p.source)).toEqual(["output.text", "input.text"]);
    expect(merged?.patterns.map((p) => p.label)).toEqual([KEY]);
    expect(compileRules(undefined, ...configuredRules(undefined, "echo"))).toBeUndefined();
  });

  it("a bad file stops the actor with INVALID_INPUT naming the variable and the problem", () => {
    const read = (text: string) => () => text;
    expect(loadRedactionConfig("AGENT_REDACT_FILE", undefined)).toBeUndefined();
    expect(() =>
      loadRedactionConfig("AGENT_REDACT_FILE", "/r.yaml", read("tools:\n  echo:\n    paths: [apiKey]\n")),
    ).toThrow(/AGENT_REDACT_FILE \(\/r\.yaml\): tools\.echo\.paths\.0: a redaction path starts with `input`/);
    expect(() => loadRedactionConfig("AGENT_REDACT_FILE", "/r.yaml", read("tools: ["))).toThrow(
      expect.objectContaining({ code: "INVALID_INPUT" }),
    );
    expect(
      loadRedactionConfig("TOOLS_REDACT_FILE", "/r.json", read('{"tools":{"*":{"patterns":["sk-\\\\w+"]}}}')),
    ).toEqual({ tools: { "*": { patterns: ["sk-\\w+"] } } });
  });
});

describe("redacting the loop's events", () => {
  const policy = redactionPolicy([{ name: "vault", redact: { paths: ["input.apiKey", "output.token"] } }], {
    tools: { "*": { patterns: [KEY] } },
  });
  const toolOf = (actionId: string) => (actionId === "act-1" ? "vault" : undefined);

  it("redacts a model's tool-call inputs, keeps the originals by call id, and notes the rules that fired", () => {
    const event: LoopEvent = {
      type: "modelResponded",
      at: 1,
      requestId: "r1",
      response: {
        text: "calling",
        toolCalls: [
          { id: "c1", name: "vault", input: { apiKey: "k1", note: "sk-FFFFFFFF6" } },
          { id: "c2", name: "other", input: { text: "plain" } },
        ],
        stopReason: "toolUse",
        usage: { inputTokens: 1, outputTokens: 1 },
        costUsd: 0,
        model: "m",
      },
    };
    const { event: redacted, originals } = redactEvent(event, policy, toolOf);
    expect(redacted).toMatchObject({
      response: {
        toolCalls: [
          { id: "c1", input: { apiKey: REDACTED, note: REDACTED } },
          { id: "c2", input: { text: "plain" } },
        ],
      },
      redactions: [{ tool: "vault", field: "input", callId: "c1", paths: ["input.apiKey"], patterns: [KEY] }],
    });
    expect([...originals]).toEqual([["c1", { apiKey: "k1", note: "sk-FFFFFFFF6" }]]);
    expect(JSON.stringify(redacted)).not.toMatch(/k1|FFFFFFFF/);
  });

  it("redacts a tool's output and its error message; an event with nothing to redact is the same object", () => {
    const done: LoopEvent = {
      type: "toolCompleted",
      at: 1,
      actionId: "act-1",
      output: { token: "t0", ok: true },
    };
    expect(redactEvent(done, policy, toolOf).event).toEqual({
      ...done,
      output: { token: REDACTED, ok: true },
      redactions: [
        { tool: "vault", field: "output", actionId: "act-1", paths: ["output.token"], patterns: [] },
      ],
    });
    const failed: LoopEvent = {
      type: "toolAborted",
      at: 1,
      actionId: "act-1",
      error: { code: "TOOL_FAILED", message: "bad key sk-GGGGGGGG7" },
    };
    expect(redactEvent(failed, policy, toolOf).event).toMatchObject({
      error: { code: "TOOL_FAILED", message: `bad key ${REDACTED}` },
      redactions: [{ patterns: [KEY] }],
    });
    const unrelated: LoopEvent = { type: "toolCompleted", at: 1, actionId: "act-9", output: "sk-HHHHHHHH8" };
    expect(redactEvent(unrelated, policy, toolOf).event).toBe(unrelated);
  });

  it("redacts a settlement of the call a halted run waited on: a human's output, and what a cancel learned", () => {
    const waited = { tool: "vault", actionId: "act-1" };
    const resume: LoopEvent = {
      type: "resume",
      at: 1,
      by: "ops",
      settle: { decision: "ran", output: { token: "t1" } },
    };
    const redacted = redactSettlement(resume, policy, waited);
    expect(redacted).toEqual({
      ...resume,
      settle: { decision: "ran", output: { token: REDACTED } },
      redactions: [
        { tool: "vault", field: "output", actionId: "act-1", paths: ["output.token"], patterns: [] },
      ],
    });
    // Notes a job carries are never taken for the worker's: a forged empty list skips nothing.
    expect(redactSettlement({ ...resume, redactions: [] }, policy, waited)).toEqual(redacted);
    const cancel: LoopEvent = {
      type: "cancel",
      at: 1,
      reason: "stop",
      by: "ops",
      waitedOn: { actionId: "act-1", outcome: "completed", output: { token: "t2", n: 1 } },
    };
    expect(redactSettlement(cancel, policy, waited)).toMatchObject({
      waitedOn: { actionId: "act-1", outcome: "completed", output: { token: REDACTED, n: 1 } },
      redactions: [{ paths: ["output.token"] }],
    });
    const notRun: LoopEvent = { type: "resume", at: 1, by: "ops", settle: { decision: "notRun" } };
    expect(redactSettlement(notRun, policy, waited)).toBe(notRun);
    expect(redactSettlement(cancel, policy, { tool: "other", actionId: "act-1" })).toBe(cancel);
  });

  it("a tool service records the redacted reply", () => {
    const tool = { name: "vault", redact: { paths: ["output.token"] } };
    expect(recordedReply(tool, undefined, { ok: true, output: { token: "t", n: 1 } })).toEqual({
      ok: true,
      output: { token: REDACTED, n: 1 },
    });
    const config = { tools: { vault: { patterns: [KEY] } } };
    const failed = { ok: false as const, error: { code: "X", message: "sk-IIIIIIII9", retryable: false } };
    expect(recordedReply(tool, config, failed)).toMatchObject({ error: { message: REDACTED } });
    expect(recordedReply({ name: "echo" }, undefined, failed)).toBe(failed);
  });
});
