import { join } from "node:path";
import { K8S, readYaml } from "./k8s.js";

export const MONITORING = join(K8S, "components", "monitoring");

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}
export interface RuleGroups {
  groups: { name: string; rules: AlertRule[] }[];
}

/** The alert rules the monitoring component ships. */
export function alertRules(): AlertRule[] {
  const rule = readYaml(join(MONITORING, "alerts.yaml"))[0] as { spec: RuleGroups };
  return rule.spec.groups.flatMap((group) => group.rules);
}

/** The product's metrics an alert's expression reads. */
export function metricsRead(rule: AlertRule): string[] {
  return [...new Set(rule.expr.match(/\bagents_[a-z_]+\b/g) ?? [])];
}
