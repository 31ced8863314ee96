import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { runSpecJsonSchema } from "../helpers/reference/runspec-json-schema.js";
import { spec } from "../helpers/fixtures.js";

const schema = runSpecJsonSchema();

describe("docs/runspec.schema.json, the RunSpec for editors", () => {
  it("is the one the code makes (`npx vitest run test/unit/runspec-schema.test.ts -u` writes it anew)", async () => {
    await expect(`${JSON.stringify(schema, null, 2)}\n`).toMatchFileSnapshot(
      "../../docs/runspec.schema.json",
    );
  });

  it("takes every shipped example and a test spec, and refuses a typo as the supervisor does", async () => {
    const validate = new Ajv2020({ strict: false }).compile(schema);
    const specs: [string, unknown][] = [["fixture", spec({ script: [{ text: "done" }] })]];
    for (const name of (await readdir("examples")).filter((f) => f.endsWith(".json")))
      specs.push([name, JSON.parse(await readFile(join("examples", name), "utf8")) as unknown]);
    for (const [name, value] of specs)
      expect({ name, ok: validate(value), errors: validate.errors }).toMatchObject({ name, ok: true });
    const typo = spec({ script: [{ text: "done" }] });
    expect(validate({ ...typo, agent: { ...typo.agent, resources: { maxIteration: 5 } } })).toBe(false);
    expect(validate.errors?.[0]).toMatchObject({
      keyword: "additionalProperties",
      params: { additionalProperty: "maxIteration" },
    });
  });
});
