import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

/**
 * docs/invariants.md promises the durability guarantees, each naming the tests that check it as
 * `path › title`. This test holds the page to those tests: a named test renamed or deleted fails
 * CI, so the page cannot go on claiming a guarantee no test checks.
 */
const PAGE = "docs/invariants.md";

interface Invariant {
  id: number;
  prose: string;
  tests: { path: string; title: string }[];
}

/** Each `## D<n>. …` or `### D<n>. …` section: its prose and the tests its list names. */
function invariantsOf(markdown: string): Invariant[] {
  const sections = markdown.split(/^(?=#{1,6} )/m);
  return sections.flatMap((section) => {
    const head = /^#{2,3} D(\d+)\. .+\n/.exec(section);
    if (!head) return [];
    const body = section.slice(head[0].length);
    const tests = [...body.matchAll(/`(test\/[^`\s]+\.test\.ts) › ([^`]+)`/g)].map((m) => ({
      path: m[1] as string,
      title: m[2] as string,
    }));
    const prose = body
      .split("\n")
      .filter((line) => line.trim() !== "" && !line.trimStart().startsWith("- "))
      .join(" ");
    return [{ id: Number(head[1]), prose, tests }];
  });
}

/**
 * Every literal title of `it(…)` and `test(…)` in a test file, at any depth of `describe`; an
 * `it.each(…)(…)` title as written, placeholders (`%i`) and all. Titles built with `${…}` are left
 * out: the page cannot name them exactly.
 */
function titlesIn(source: string): string[] {
  const call =
    /(?<![.\w$])(?:it|test)(?:\.each\((?:[^()]|\([^()]*\))*\))?\(\s*(?:"((?:[^"\\\n]|\\.)*)"|'((?:[^'\\\n]|\\.)*)'|`((?:[^`\\$]|\\.|\$(?!\{))*)`)/g;
  return [...source.matchAll(call)].map(([, double, single, template]) =>
    double !== undefined
      ? (JSON.parse(`"${double}"`) as string)
      : (single ?? template ?? "").replace(/\\(.)/g, "$1"),
  );
}

const page = readFileSync(PAGE, "utf8");
const invariants = invariantsOf(page);

describe("docs/invariants.md", () => {
  it("numbers its invariants D1, D2, … in order, each with a guarantee, how it is kept, and a test", () => {
    expect(invariants.length).toBeGreaterThanOrEqual(10);
    // A heading that misses the form would drop its invariant, and its tests, unseen.
    const headings = page.match(/^#{1,6} D\d.*$/gm) ?? [];
    expect(headings.filter((heading) => !/^#{2,3} D\d+\. /.test(heading))).toEqual([]);
    expect(page.match(/`test\/[^`]+ › [^`]+`/g)?.length).toBe(invariants.flatMap((inv) => inv.tests).length);
    expect(invariants.map((inv) => inv.id)).toEqual(invariants.map((_, i) => i + 1));
    for (const inv of invariants) {
      expect(inv.tests.length, `D${inv.id} names no test`).toBeGreaterThan(0);
      // A guarantee and how the design keeps it: two sentences at least.
      const sentences = inv.prose.match(/\.(\s|$)/g)?.length ?? 0;
      expect(sentences, `D${inv.id} says too little`).toBeGreaterThanOrEqual(2);
    }
  });

  it("names only tests that exist, by their exact titles", () => {
    const missing: string[] = [];
    for (const inv of invariants) {
      for (const { path, title } of inv.tests) {
        if (!existsSync(path)) {
          missing.push(`D${inv.id}: no file ${path}`);
          continue;
        }
        if (!titlesIn(readFileSync(path, "utf8")).includes(title))
          missing.push(`D${inv.id}: no test in ${path} titled "${title}"`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("reads titles as vitest names them: quoted any way, escaped, inside describe, parameterised", () => {
    const source = [
      'describe("outer", () => {',
      '  it("a \\"quoted\\" word", async () => {});',
      "  test('single-quoted', () => {});",
      "  it(`a template`, () => {});",
      "  it(`${N} built at run time`, () => {});",
      '  it.each([1, 2])("down %i ms", () => {});',
      '  expect(/x/.test("not a title")).toBe(false);',
      "});",
    ].join("\n");
    expect(titlesIn(source)).toEqual(['a "quoted" word', "single-quoted", "a template", "down %i ms"]);
  });
});
