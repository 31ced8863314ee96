import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";

/** The user docs: the README and every page under docs/. */
const PAGES = [
  "README.md",
  ...readdirSync("docs").flatMap((f) => (f.endsWith(".md") ? [join("docs", f)] : [])),
];

/**
 * The relative link targets of a Markdown page, without their `#anchor`. Code (fenced blocks and
 * inline spans) is left out: a `](…)` there is an example, not a link.
 */
function relativeLinks(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "");
  return [...prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)]
    .map((m) => (m[1] as string).split("#")[0] as string)
    .filter((target) => target !== "" && !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

describe("the docs' links", () => {
  it("every relative link of the README and docs/ names a file or directory that exists", () => {
    const broken = PAGES.flatMap((page) =>
      relativeLinks(readFileSync(page, "utf8"))
        .filter((target) => !existsSync(join(dirname(page), decodeURI(target))))
        .map((target) => `${page} → ${target}`),
    );
    expect(broken).toEqual([]);
  });

  it("finds links in prose, skips code, anchors alone and absolute URLs", () => {
    const page = [
      'See [a](a.md), [b](../b.md#part "title") and [c](#here), [d](https://example.com).',
      "`[not](inline.md)`",
      "```sh",
      "[not](fenced.md)",
      "```",
    ].join("\n");
    expect(relativeLinks(page)).toEqual(["a.md", "../b.md"]);
  });
});
