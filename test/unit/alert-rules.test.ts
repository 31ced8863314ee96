import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { alertRules, MONITORING, type RuleGroups } from "../helpers/alert-rules.js";
import { K8S, readYaml, validateObject, type K8sObject } from "../helpers/k8s.js";

const PROMTEST = join(import.meta.dirname, "..", "alerts", "alerts.promtest.yaml");

interface PromTest {
  tests: { name: string; alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
}

const promtool = spawnSync("promtool", ["--version"]).status === 0;
// CI installs promtool (Debian's prometheus package): there, its absence is a failure, not a skip.
const withPromtool = promtool || process.env.CI ? it : it.skip;
if (!promtool)
  console.warn(
    "\n*** promtool is not on PATH (apt-get install prometheus): the alert rules are NOT evaluated in this run ***\n",
  );

const work = mkdtempSync(join(tmpdir(), "alert-rules-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("deploy/k8s/components/monitoring: the PodMonitor and the alert rules", () => {
  it("is a kustomize component of valid Prometheus Operator objects, left out of the base and the overlays", () => {
    const component = readYaml(join(MONITORING, "kustomization.yaml"))[0] as {
      kind: string;
      resources: string[];
    };
    expect(component.kind).toBe("Component");
    const objects = component.resources.flatMap((file) => readYaml(join(MONITORING, file)) as K8sObject[]);
    expect(objects.map((o) => o.kind).sort()).toEqual(["PodMonitor", "PrometheusRule"]);
    for (const object of objects) validateObject(object);
    // It needs the operator's CRDs: an overlay that took it in would not apply without them.
    for (const dir of ["base", "overlays/dev", "overlays/prod"])
      expect(JSON.stringify(readYaml(join(K8S, dir, "kustomization.yaml")))).not.toMatch(
        /components\/monitoring/,
      );
  });

  it("the PodMonitor scrapes every actor's health port", () => {
    const monitor = readYaml(join(MONITORING, "pod-monitor.yaml"))[0] as K8sObject & {
      spec: {
        selector: { matchLabels: Record<string, string> };
        podMetricsEndpoints: { port: string; path: string }[];
      };
    };
    expect(monitor.spec.podMetricsEndpoints).toEqual([
      expect.objectContaining({ port: "health", path: "/metrics" }),
    ]);
    const actors = ["supervisor", "agent", "critic", "tools"].map(
      (name) => readYaml(join(K8S, "base", "actors", `${name}.yaml`))[0] as K8sObject,
    );
    for (const actor of actors) {
      const template = (actor.spec as { template: { metadata: { labels: Record<string, string> } } })
        .template;
      expect(template.metadata.labels, actor.metadata.name).toMatchObject(monitor.spec.selector.matchLabels);
    }
  });

  it("every alert has a severity, a summary and a description of plain text, and a promtool test that fires it and one that does not", () => {
    const rules = alertRules();
    expect(rules.length).toBeGreaterThanOrEqual(10);
    const tests = (readYaml(PROMTEST)[0] as PromTest).tests.flatMap((t) => t.alert_rule_test);
    for (const rule of rules) {
      expect(["critical", "warning"], rule.alert).toContain(rule.labels.severity);
      expect(rule.annotations.summary, rule.alert).toBeTruthy();
      // promtool is handed the rules without their descriptions (it compares every annotation):
      // only a description without a template may be left out untested.
      expect(rule.annotations.description, rule.alert).toMatch(/^[^{}]+$/);
      const mine = tests.filter((t) => t.alertname === rule.alert);
      expect(
        mine.some((t) => t.exp_alerts.length > 0),
        `${rule.alert} fires in a test`,
      ).toBe(true);
      expect(
        mine.some((t) => t.exp_alerts.length === 0),
        `${rule.alert} is silent in a test`,
      ).toBe(true);
    }
  });

  withPromtool("promtool finds the rules valid and every test case passes", () => {
    const rule = readYaml(join(MONITORING, "alerts.yaml"))[0] as { spec: RuleGroups };
    for (const group of rule.spec.groups) for (const r of group.rules) delete r.annotations.description;
    writeFileSync(join(work, "rules.yaml"), stringify(rule.spec));
    copyFileSync(PROMTEST, join(work, "alerts.promtest.yaml"));
    const run = (args: string[]) => {
      try {
        return execFileSync("promtool", args, { cwd: work, encoding: "utf8", stdio: "pipe" });
      } catch (err) {
        const { stdout, stderr } = err as { stdout: string; stderr: string };
        throw new Error(`promtool ${args.join(" ")} failed:\n${stdout}${stderr}`, { cause: err });
      }
    };
    expect(run(["check", "rules", "rules.yaml"])).toMatch(/SUCCESS: \d+ rules found/);
    expect(run(["test", "rules", "alerts.promtest.yaml"])).toMatch(/SUCCESS/);
  });
});
