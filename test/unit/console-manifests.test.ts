import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { ConsoleEnv } from "../../services/console/env.js";
import { NATS_USERS } from "../../services/local/cluster.js";
import {
  K8S,
  ROOT,
  kubectlAvailable,
  kustomize,
  podSpecOf,
  readYaml,
  validateObject,
  type K8sObject,
} from "../helpers/k8s.js";

const COMPONENT = join(K8S, "components", "console");
const objects = readYaml(join(COMPONENT, "console.yaml")) as K8sObject[];
const byKind = (kind: string) => objects.find((o) => o.kind === kind) as K8sObject;

/** The console's Deployment as rendered: locked down, its own NATS user, a token it cannot start without. */
function checkConsole(deployment: K8sObject, image: string): void {
  const pod = podSpecOf(deployment);
  expect(pod.securityContext?.runAsNonRoot).toBe(true);
  const [container] = pod.containers;
  expect(container?.image).toBe(image);
  expect(container?.args).toEqual(["dist/services/console/main.js"]);
  expect(existsSync(join(ROOT, "services", "console", "main.ts"))).toBe(true);
  expect(container?.livenessProbe?.httpGet).toEqual({ path: "/healthz", port: "health" });
  expect(container?.readinessProbe?.httpGet).toEqual({ path: "/readyz", port: "health" });
  expect(container?.securityContext).toMatchObject({
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ["ALL"] },
  });
  const known = Object.keys(ConsoleEnv.shape);
  for (const variable of container?.env ?? []) expect(known, variable.name).toContain(variable.name);
  const env = new Map((container?.env ?? []).map((v) => [v.name, v]));
  expect(env.get("NATS_USER")?.value).toBe(NATS_USERS.console.user);
  expect(env.get("NATS_PASSWORD")?.valueFrom?.secretKeyRef).toMatchObject({ key: NATS_USERS.console.user });
  // Listening beyond loopback, so its token is required (the console refuses to start without it).
  expect(env.get("CONSOLE_HOST")?.value).toBe("0.0.0.0");
  const token = env.get("CONSOLE_TOKEN")?.valueFrom?.secretKeyRef as { optional?: boolean } | undefined;
  expect(token).toMatchObject({ key: "token" });
  expect(token?.optional).toBeUndefined();
  expect(container?.ports).toEqual(
    expect.arrayContaining([
      { name: "health", containerPort: 8080 },
      { name: "http", containerPort: Number(env.get("CONSOLE_PORT")?.value) },
    ]),
  );
}

describe("deploy/k8s/components/console: the web console, opt-in", () => {
  it("its objects are valid; its Service and NetworkPolicy expose the console's port only, to labelled namespaces", () => {
    for (const object of objects) validateObject(object);
    expect(objects.map((o) => o.kind).sort()).toEqual([
      "Deployment",
      "NetworkPolicy",
      "PodDisruptionBudget",
      "Service",
    ]);
    checkConsole(byKind("Deployment"), "bounded-agents");
    expect(byKind("Service").spec).toMatchObject({
      selector: { "app.kubernetes.io/name": "console" },
      ports: [{ targetPort: "http" }],
    });
    expect(byKind("NetworkPolicy").spec).toEqual({
      podSelector: { matchLabels: { "app.kubernetes.io/name": "console" } },
      policyTypes: ["Ingress"],
      ingress: [
        {
          from: [{ namespaceSelector: { matchLabels: { "bounded-agents/console-client": "true" } } }],
          ports: [{ protocol: "TCP", port: 8090 }],
        },
      ],
    });
  });

  it("NATS has the console's user, with the console's permissions, in the base (local and Kubernetes alike)", () => {
    const user = `{ user: console, password: $NATS_CONSOLE_PASSWORD, permissions: $CONSOLE_PERMISSIONS }`;
    expect(readFileSync(join(K8S, "base", "nats", "users.conf"), "utf8")).toContain(user);
    expect(readFileSync(join(ROOT, "nats.conf"), "utf8")).toContain(
      `{ user: console, password: "${NATS_USERS.console.password}", permissions: $CONSOLE_PERMISSIONS }`,
    );
  });

  const render = kubectlAvailable() ? it : it.skip;
  render(
    "added to the dev overlay, it renders valid objects, with the console's NATS password and tokens",
    () => {
      // The dev overlay as a user would extend it: its own files, the component and the tokens' Secret.
      const dir = mkdtempSync(join(tmpdir(), "console-overlay-"));
      try {
        const dev = join(K8S, "overlays", "dev");
        const overlay = readFileSync(join(dev, "kustomization.yaml"), "utf8")
          .replace(
            "  - ../../base",
            `  - ${relative(dir, join(K8S, "base"))}\ncomponents:\n  - ${relative(dir, COMPONENT)}`,
          )
          .replace(
            "secretGenerator:\n",
            "secretGenerator:\n  - name: console-tokens\n    literals: [token=a-token-of-16-chars, operate=an-operate-token-16]\n",
          );
        writeFileSync(join(dir, "kustomization.yaml"), overlay);
        writeFileSync(join(dir, "nats-storage.conf"), readFileSync(join(dev, "nats-storage.conf")));
        const rendered = kustomize(dir) ?? [];
        for (const object of rendered) validateObject(object);
        const deployment = rendered.find((o) => o.kind === "Deployment" && o.metadata.name === "console");
        checkConsole(deployment as K8sObject, "bounded-agents:dev");
        const credentials = rendered.find(
          (o) => o.kind === "Secret" && o.metadata.name.startsWith("nats-credentials"),
        );
        expect(Object.keys(credentials?.data ?? {})).toContain("console");
        const sts = rendered.find((o) => o.kind === "StatefulSet") as K8sObject;
        const env = podSpecOf(sts).containers[0]?.env ?? [];
        expect(env.find((v) => v.name === "NATS_CONSOLE_PASSWORD")?.valueFrom?.secretKeyRef).toMatchObject({
          key: "console",
        });
        const tokens = rendered.find(
          (o) => o.kind === "Secret" && o.metadata.name.startsWith("console-tokens"),
        );
        expect(JSON.stringify(deployment)).toContain(tokens?.metadata.name ?? "missing");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
