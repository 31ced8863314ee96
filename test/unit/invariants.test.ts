import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";

/**
 * The map from every invariant, contract binding and scenario to the tests that prove it. A
 * mapped test that does not exist (renamed, deleted) fails here, so the map cannot rot silently.
 */
const InvariantMap = z.object({
  contract: z.string(),
  invariants: z.record(
    z.string().regex(/^INV-\d{3}$/),
    z.object({ name: z.string(), tests: z.array(z.string()).min(1) }),
  ),
  bindings: z.record(z.string().startsWith("agent::"), z.string()),
  scenarios: z.record(z.string().regex(/^RT-\d{2}$/), z.array(z.string()).min(1)),
  /** The control policies of issue 71 (seed 003), each proved on the cluster by end-to-end tests. */
  controls: z.record(
    z.string().regex(/^CTL-\d$/),
    z.object({ name: z.string(), tests: z.array(z.string()).min(1) }),
  ),
});

const map = InvariantMap.parse(JSON.parse(readFileSync("test/invariants.json", "utf8")));
// Every suite counts: unit, integration against a real nats-server, and the process-level e2e suites.
const testDirs = ["test/unit", "test/integration", "test/e2e"];
const files = testDirs.flatMap((dir) =>
  readdirSync(dir)
    .filter((f) => f.endsWith(".test.ts"))
    .map((f) => ({ path: join(dir, f), src: readFileSync(join(dir, f), "utf8") })),
);
const sources = files.map((f) => f.src);
/**
 * The only tests that may be skipped, each on a condition of the machine, announced loudly when it
 * applies and reported by vitest as skipped (never as passed).
 */
const CONDITIONAL_SKIPS: Record<string, string> = {
  "test/unit/deploy.test.ts": "rendering the overlays needs kubectl on PATH",
  "test/unit/alert-rules.test.ts":
    "evaluating the alert rules needs promtool on PATH (never skipped under CI)",
  "test/unit/console-manifests.test.ts": "rendering the console component needs kubectl on PATH",
  "test/unit/deploy-security.test.ts": "rendering the overlays needs kubectl on PATH",
  "test/e2e/file-shell-tools.test.ts": "a PID namespace for commands needs root (CI runs as root)",
  "test/unit/shell-tool.test.ts": "running a command as another user needs root (CI runs as root)",
  "test/unit/dashboard.test.ts":
    "parsing the dashboard's PromQL needs promtool (never skipped under CI), rendering its ConfigMap kubectl",
};
const titles = sources.flatMap((src) =>
  [...src.matchAll(/\bit\(\s*"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1] as string),
);
const seedPath = "../shared/seeds/000_6adaf3d6ac9e578f.txt";

describe("invariant map", () => {
  it("covers INV-001 to INV-016, each with at least one existing test", () => {
    expect(Object.keys(map.invariants)).toEqual(
      Array.from({ length: 16 }, (_, i) => `INV-${String(i + 1).padStart(3, "0")}`),
    );
    for (const [id, { tests }] of Object.entries(map.invariants)) {
      for (const name of tests) expect(titles, `${id}: ${name}`).toContain(name);
    }
  });

  it("binds each of the contract's 35 unit tests to exactly one existing test", () => {
    const bindings = Object.entries(map.bindings);
    expect(bindings).toHaveLength(35);
    for (const [binding, name] of bindings) {
      expect(
        titles.filter((t) => t === name),
        binding,
      ).toHaveLength(1);
      expect(name, binding).toContain(`[${binding.split("::").at(-1) ?? ""}]`);
    }
    if (existsSync(seedPath)) {
      const listed = [...readFileSync(seedPath, "utf8").matchAll(/^- (agent::[\w:]+)$/gm)].map((m) => m[1]);
      expect(Object.keys(map.bindings).sort()).toEqual(listed.sort());
    }
  });

  it("maps the 14 runtime-invariant scenarios to existing tests", () => {
    expect(Object.keys(map.scenarios)).toHaveLength(14);
    for (const [id, tests] of Object.entries(map.scenarios)) {
      for (const name of tests) expect(titles, id).toContain(name);
    }
  });

  it("maps each control policy to existing end-to-end tests on the cluster", () => {
    const e2e = files.filter((f) => f.path.startsWith("test/e2e/")).map((f) => f.src);
    const e2eTitles = e2e.flatMap((src) =>
      [...src.matchAll(/\bit\(\s*"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1] as string),
    );
    for (const [id, { tests }] of Object.entries(map.controls)) {
      for (const name of tests) expect(e2eTitles, `${id}: ${name}`).toContain(name);
    }
  });

  it("no test is skipped, focused or left as a todo, except the listed conditional skips", () => {
    for (const { path, src } of files) {
      expect(src, path).not.toMatch(/\b(it|test|describe)\.(only|todo)\b|\bx(it|describe)\(/);
      const skips = /\b(it|test|describe)\.(skip|skipIf|runIf)\b/.test(src);
      expect(skips && !(path in CONDITIONAL_SKIPS), `${path} skips a test`).toBe(false);
      if (path in CONDITIONAL_SKIPS) expect(src, path).toMatch(/console\.warn\(/);
    }
  });
});
