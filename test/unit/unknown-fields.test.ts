import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { SubmitRequest } from "../../shared/contracts/cluster.js";
import { describeUnknown, unknownFields } from "../../shared/contracts/unknown-fields.js";
import { spec } from "../helpers/fixtures.js";

describe("fields a schema does not know", () => {
  it("a valid RunSpec has none; a typo anywhere is found with the field it may mean", () => {
    const good = spec({ script: [{ text: "done" }] });
    expect(unknownFields(SubmitRequest, good)).toEqual([]);
    const typo = {
      ...good,
      task: { ...good.task, verifiers: [{ type: "regex", pattern: "x", flag: "i" }] },
      agent: { ...good.agent, resources: { maxIteration: 5 }, toolz: [] },
      samples: 3,
    };
    const found = unknownFields(SubmitRequest, typo);
    expect(found).toEqual(
      expect.arrayContaining([
        { path: "agent.resources.maxIteration", closest: "maxIterations" },
        { path: "agent.toolz", closest: "tools" },
        { path: "samples" },
      ]),
    );
    expect(found.some((f) => f.path.startsWith("task.verifiers[0]."))).toBe(true);
  });

  it("finds a typo in an object-form capability, beside its string form; every shipped example has none", async () => {
    const good = spec({ script: [{ text: "done" }] });
    const shell = { kind: "shell", allowedCommand: ["ls"] };
    const withTypo = { ...good, agent: { ...good.agent, capabilities: ["compute", shell] } };
    expect(unknownFields(SubmitRequest, withTypo)).toEqual([
      { path: "agent.capabilities[1].allowedCommand", closest: "allowedCommands" },
    ]);
    for (const name of (await readdir("examples")).filter((f) => f.endsWith(".json"))) {
      const example: unknown = JSON.parse(await readFile(join("examples", name), "utf8"));
      expect({ name, unknown: unknownFields(SubmitRequest, example) }).toEqual({ name, unknown: [] });
    }
  });

  it("looks through optional, default and array wrappers; a record takes any field", () => {
    const schema = z.object({
      a: z.object({ b: z.number() }).optional(),
      list: z.array(z.object({ c: z.string() })).default([]),
      open: z.record(z.string(), z.unknown()),
    });
    const value = { a: { b: 1, bb: 2 }, list: [{ c: "x" }, { c: "y", d: 1 }], open: { anything: 1 } };
    expect(unknownFields(schema, value)).toEqual([
      { path: "a.bb", closest: "b" },
      { path: "list[1].d", closest: "c" },
    ]);
    expect(describeUnknown([{ path: "x" }])).toBe("unknown field 'x': remove it or fix the name");
  });
});
