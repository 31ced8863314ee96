import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");

/** Every Markdown file a user reads: the README, docs/, examples/, bench/README.md and deploy/. */
function userDocs(): string[] {
  const found = ["README.md", "CHANGELOG.md", "bench/README.md"].map((f) => join(ROOT, f));
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (name === "node_modules") continue;
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith(".md")) found.push(path);
    }
  };
  for (const dir of ["docs", "examples", "deploy"]) walk(join(ROOT, dir));
  return found;
}

/** The relative targets of a page's Markdown links, without their `#anchor`, outside code. */
function relativeLinks(text: string): string[] {
  const prose = text.replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "");
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)]
    .map(([, target]) => target ?? "")
    .filter((t) => !/^[a-z]+:/i.test(t) && !t.startsWith("#"))
    .map((t) => t.split("#")[0] ?? "");
}

describe("the docs' relative links", () => {
  it("each resolves to a file or directory in the repository", () => {
    const docs = userDocs();
    expect(docs.length).toBeGreaterThan(10);
    const broken: string[] = [];
    let checked = 0;
    for (const doc of docs)
      for (const target of relativeLinks(readFileSync(doc, "utf8"))) {
        checked += 1;
        if (!existsSync(join(dirname(doc), decodeURIComponent(target))))
          broken.push(`${relative(ROOT, doc)} → ${target}`);
      }
    expect(checked).toBeGreaterThan(20);
    expect(broken).toEqual([]);
  });

  it("finds links in prose and skips those in code", () => {
    expect(
      relativeLinks("see [a](docs/a.md#x) and `[b](no.md)`\n```\n[c](no.md)\n```\n[d](https://x.y)"),
    ).toEqual(["docs/a.md"]);
  });
});
