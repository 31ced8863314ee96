import { spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { nkeys } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { ActorEnv } from "../../shared/runtime/config.js";
import { CriticEnv } from "../../services/critic/env.js";
import { AgentEnv } from "../../services/agent/env.js";
import {
  ACTOR_KINDS,
  NATS_USERS,
  OPTIONAL_ACTOR_KINDS,
  type ActorKind,
} from "../../services/local/cluster.js";
import { parseServersFile } from "../../services/mcp/config.js";
import { McpEnv } from "../../services/mcp/env.js";
import { natsServerBinary } from "../../services/local/nats-binary.js";
import { TradingExecutorEnv } from "../../examples/trading/executor/env.js";
import { SupervisorEnv } from "../../services/supervisor/env.js";
import { ToolsEnv } from "../../services/tools/env.js";
import { makeCa } from "../helpers/certificates.js";
import {
  CERT_MANAGER,
  K8S,
  ROOT,
  checkCertManager,
  kubectlAvailable,
  kustomize,
  natsSizeBytes,
  podSpecOf,
  quantityBytes,
  type Container,
  readYaml,
  validateObject,
  type K8sObject,
} from "../helpers/k8s.js";

/** Each Deployment the manifests hold: the env it reads, what it runs, whose NATS user it takes. */
const DEPLOYMENTS: Record<string, { env: z.ZodObject; entry: string; user: ActorKind } | undefined> = {
  supervisor: { env: SupervisorEnv, entry: "dist/services/supervisor/main.js", user: "supervisor" },
  agent: { env: AgentEnv, entry: "dist/services/agent/main.js", user: "agent" },
  critic: { env: CriticEnv, entry: "dist/services/critic/main.js", user: "critic" },
  tools: { env: ToolsEnv, entry: "dist/services/tools/main.js", user: "tools" },
  mcp: { env: McpEnv, entry: "dist/services/mcp/main.js", user: "mcp" },
  "trading-executor": {
    env: TradingExecutorEnv,
    entry: "dist/examples/trading/executor/main.js",
    user: "tools",
  },
  "trading-planner": { env: ActorEnv, entry: "dist/examples/trading/planner/main.js", user: "tools" },
};
/** Created outside git in production (see the prod overlay); model keys are optional. */
const EXTERNAL_SECRETS = ["nats-credentials", "model-api-keys", "nats-user-keys", "nats-encryption"];
const IMAGE = "bounded-agents";
/** The actor kinds the base runs; the others are optional components. */
const BASE_KINDS = ACTOR_KINDS.filter((kind) => !OPTIONAL_ACTOR_KINDS.includes(kind));

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(entry.name) ? [path] : [];
  });
}

interface Kustomization {
  resources: string[];
  configMapGenerator?: { name: string; literals?: string[]; files?: string[] }[];
  images?: { name: string }[];
}
const base = readYaml(join(K8S, "base", "kustomization.yaml"))[0] as Kustomization;
const baseObjects = base.resources.flatMap((file) => readYaml(join(K8S, "base", file)) as K8sObject[]);
const actorDeployments = baseObjects.filter(
  (o) => o.kind === "Deployment" && o.metadata.labels?.["app.kubernetes.io/component"] === "actor",
);
const sharedLiterals = (base.configMapGenerator ?? []).find((g) => g.name === "agents-env")?.literals;
const sharedEnv = sharedLiterals?.map((line) => line.split("=")[0] ?? "");
function sharedEnvValue(name: string): string | undefined {
  return sharedLiterals?.find((line) => line.startsWith(`${name}=`))?.slice(name.length + 1);
}

/** Where a configuration's mounted certificates are read from in `nats-server -t`: made here. */
const SERVER_TLS = await serverTlsFiles();

async function serverTlsFiles(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "nats-tls-files-"));
  const ca = await makeCa(dir, "ca");
  const server = await ca.issue("server", "DNS:nats");
  copyFileSync(ca.cert, join(dir, "ca.crt"));
  copyFileSync(server.cert, join(dir, "tls.crt"));
  copyFileSync(server.key, join(dir, "tls.key"));
  return dir;
}

/** The nats-server the suite runs against (and checks the NATS configuration with). */
const NATS_SERVER = (await natsServerBinary()).path;

/** Its version. */
function testedNatsVersion(): string {
  const out = spawnSync(NATS_SERVER, ["--version"], { encoding: "utf8" });
  const version = /v(\d+\.\d+\.\d+)/.exec(`${out.stdout}${out.stderr}`)?.[1];
  if (!version) throw new Error(`nats-server --version: ${out.error?.message ?? out.stdout + out.stderr}`);
  return version;
}

/** The official NATS Helm chart's startup probe (nats-io/k8s, helm/charts/nats): 10 s + 90 × 10 s. */
const CHART_STARTUP_BUDGET_S = 10 + 90 * 10;

/** A setting's values in a NATS configuration's files (comments skipped), e.g. `max_file_store`. */
function natsSetting(files: Record<string, string>, key: string): string[] {
  return Object.values(files).flatMap((text) =>
    [...text.matchAll(new RegExp(`^[ \\t]*${key}[ \\t]*[:=]?[ \\t]*([^\\s#]+)`, "gm"))].map(
      (m) => m[1] ?? "",
    ),
  );
}

/**
 * `nats-server -t` on a NATS configuration's files (nats.conf and its includes), with its env: each
 * user by password or by NKey (a real public key here), the store's key, and the test's own
 * certificates where a Secret's would be mounted.
 */
function checkNatsConfig(files: Record<string, string>, label: string): void {
  const text = files["users.conf"] ?? "";
  const users = [...text.matchAll(/user: (\w+), password: \$NATS_(\w+)_PASSWORD/g)];
  const keyed = [...text.matchAll(/nkey: \$NATS_(\w+)_NKEY/g)];
  // By key (prod), the MCP bridge has a user of its own, with the tool services' permissions.
  const expected = [...Object.values(NATS_USERS).map((u) => u.user), ...(keyed.length > 0 ? ["mcp"] : [])];
  expect([...users.map((m) => m[1]), ...keyed.map((m) => m[1]?.toLowerCase())].sort(), label).toEqual(
    [...new Set(expected)].sort(),
  );
  const passwords = {
    ...Object.fromEntries(users.map((m) => [`NATS_${m[2] ?? ""}_PASSWORD`, "x"])),
    ...Object.fromEntries(keyed.map((m) => [`NATS_${m[1] ?? ""}_NKEY`, nkeys.createUser().getPublicKey()])),
    NATS_JS_KEY: "a-key-for-this-check-0123456789abcdef",
  };
  const dir = mkdtempSync(join(tmpdir(), "nats-config-"));
  try {
    for (const [name, text] of Object.entries(files))
      writeFileSync(join(dir, name), text.replaceAll("/etc/nats-tls/", `${SERVER_TLS}/`));
    const checked = spawnSync(NATS_SERVER, ["-c", join(dir, "nats.conf"), "-t"], {
      env: { ...process.env, ...passwords, POD_NAME: "nats-0" },
      encoding: "utf8",
    });
    expect(checked.status, `${label}: ${checked.stderr}`).toBe(0);
    expect(checked.stderr, label).toMatch(/is valid/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The NATS servers' store against their volume: `max_file_store` at most 90 % of it (room for the
 * filesystem's own overhead: JetStream then refuses writes cleanly before the disk fills) and at
 * least 75 % (it follows a resized volume); `sync_interval: always` wherever one server holds a
 * stream's data (R1 streams, or a single server), which has no copy to recover from.
 */
function checkNatsStore(
  sts: K8sObject,
  files: Record<string, string>,
  agentsReplicas: string,
  label: string,
): void {
  const spec = sts.spec as {
    replicas: number;
    volumeClaimTemplates: {
      metadata: { name: string };
      spec: { resources: { requests: { storage: string } } };
    }[];
  };
  const claim = spec.volumeClaimTemplates.find((c) => c.metadata.name === "data");
  const volume = quantityBytes(claim?.spec.resources.requests.storage ?? "0");
  const limits = natsSetting(files, "max_file_store");
  expect(limits, `${label}: one max_file_store`).toHaveLength(1);
  const limit = natsSizeBytes(limits[0] ?? "");
  expect(
    limit,
    `${label}: max_file_store ${limits[0]} within the ${claim?.spec.resources.requests.storage} volume`,
  ).toBeLessThanOrEqual(0.9 * volume);
  expect(limit, `${label}: max_file_store ${limits[0]} follows the volume`).toBeGreaterThanOrEqual(
    0.75 * volume,
  );
  if (agentsReplicas === "1" || spec.replicas === 1)
    expect(natsSetting(files, "sync_interval"), `${label}: one server holds the data`).toEqual(["always"]);
}

/** A rendered overlay's NATS: the image of the base, its configuration valid, its store within its volume. */
function checkRenderedNats(objects: K8sObject[], overlay: string): void {
  const sts = objects.find((o) => o.kind === "StatefulSet" && o.metadata.name === "nats") as K8sObject;
  const baseSts = baseObjects.find((o) => o.kind === "StatefulSet") as K8sObject;
  expect(podSpecOf(sts).containers[0]?.image, overlay).toBe(podSpecOf(baseSts).containers[0]?.image);
  const config = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("nats-config-"));
  expect(JSON.stringify(podSpecOf(sts).volumes), overlay).toContain(config?.metadata.name ?? "missing");
  const files = config?.data ?? {};
  checkNatsConfig(files, overlay);
  const env = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("agents-env-"))?.data;
  checkNatsStore(sts, files, env?.AGENTS_REPLICAS ?? "", overlay);
}

/** What every actor Deployment must have, wherever it is rendered. */
function checkActor(deployment: K8sObject, image: string): void {
  const kind = deployment.metadata.name;
  const actor = DEPLOYMENTS[kind];
  expect(actor, `${kind} is a known actor`).toBeDefined();
  if (!actor) return;
  const pod = podSpecOf(deployment);
  expect(pod.securityContext?.runAsNonRoot, kind).toBe(true);
  expect(pod.containers, kind).toHaveLength(1);
  const [container] = pod.containers;
  if (!container) return;
  expect(container.image, kind).toBe(image);
  expect(container.args, kind).toEqual([actor.entry]);
  expect(existsSync(join(ROOT, actor.entry)), kind).toBe(true);
  expect(container.livenessProbe?.httpGet, kind).toEqual({ path: "/healthz", port: "health" });
  expect(container.readinessProbe?.httpGet, kind).toEqual({ path: "/readyz", port: "health" });
  expect(container.ports, kind).toContainEqual({ name: "health", containerPort: 8080 });
  for (const need of ["cpu", "memory"]) {
    expect(container.resources?.requests?.[need], `${kind} requests ${need}`).toBeDefined();
    expect(container.resources?.limits?.[need], `${kind} limits ${need}`).toBeDefined();
  }
  expect(container.securityContext, kind).toMatchObject({
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ["ALL"] },
  });
  const annotations = (deployment.spec as { template: { metadata: K8sObject["metadata"] } }).template.metadata
    .annotations;
  expect(annotations, kind).toMatchObject({ "prometheus.io/scrape": "true", "prometheus.io/port": "8080" });
  // Every variable the manifest sets is one the actor reads (a typo would be silently ignored).
  const known = Object.keys(actor.env.shape);
  for (const variable of container.env ?? [])
    expect(known, `${kind} sets ${variable.name}`).toContain(variable.name);
  const env = new Map((container.env ?? []).map((v) => [v.name, v]));
  if (env.has("NATS_NKEY_SEED_FILE")) {
    checkKeyLogin(deployment, container);
    return;
  }
  expect(env.get("NATS_USER")?.value, kind).toBe(NATS_USERS[actor.user].user);
  expect(env.get("NATS_PASSWORD")?.valueFrom?.secretKeyRef, kind).toEqual({
    name: expect.stringMatching(/^nats-credentials/) as unknown,
    key: NATS_USERS[actor.user].user,
  });
}

/** An actor logging in with an NKey: its seed from a Secret of its own, mounted where the variable says, no password. */
function checkKeyLogin(deployment: K8sObject, container: Container): void {
  const kind = deployment.metadata.name;
  const env = new Map((container.env ?? []).map((v) => [v.name, v]));
  expect(env.has("NATS_USER") || env.has("NATS_PASSWORD"), `${kind}: no password login next to the key`).toBe(
    false,
  );
  const seed = env.get("NATS_NKEY_SEED_FILE")?.value ?? "";
  const mount = container.volumeMounts?.find((m) => seed.startsWith(`${m.mountPath}/`));
  expect(mount?.readOnly, `${kind} mounts ${seed}`).toBe(true);
  const volume = podSpecOf(deployment).volumes?.find((v) => v.name === mount?.name);
  expect(volume?.secret?.secretName, kind).toBe(`nats-nkey-${kind}`);
}

describe("deploy/: the image and the Kubernetes manifests", () => {
  it("every YAML file parses, and every base object is valid against the Kubernetes schemas", () => {
    const files = yamlFiles(K8S);
    expect(files.length).toBeGreaterThanOrEqual(9);
    for (const file of files) expect(() => readYaml(file), relative(ROOT, file)).not.toThrow();
    for (const object of baseObjects) validateObject(object);
    expect(new Set(baseObjects.map((o) => o.kind))).toEqual(
      new Set([
        "Namespace",
        "StatefulSet",
        "Service",
        "PodDisruptionBudget",
        "Deployment",
        "HorizontalPodAutoscaler",
        "NetworkPolicy",
      ]),
    );
  });

  it("one Deployment per actor kind, each with probes, resources, a locked-down securityContext and its own NATS user", () => {
    expect(actorDeployments.map((d) => d.metadata.name).sort()).toEqual([...BASE_KINDS].sort());
    expect(base.images?.map((i) => i.name)).toEqual([IMAGE]);
    for (const deployment of actorDeployments) checkActor(deployment, IMAGE);
    for (const name of sharedEnv ?? []) expect(Object.keys(ActorEnv.shape), name).toContain(name);
    expect(sharedEnv).toContain("HEALTH_HOST");
  });

  it("every actor and NATS has a PodDisruptionBudget that lets a drain evict a single replica; critic and tools an HPA; agents a KEDA ScaledObject, opt-in", () => {
    const pdbs = baseObjects.filter((o) => o.kind === "PodDisruptionBudget");
    expect(pdbs.map((o) => o.metadata.name).sort()).toEqual([...BASE_KINDS, "nats"].sort());
    for (const pdb of pdbs.filter((o) => o.metadata.name !== "nats"))
      expect(pdb.spec, pdb.metadata.name).toMatchObject({ maxUnavailable: 1 });
    const hpas = baseObjects.filter((o) => o.kind === "HorizontalPodAutoscaler").map((o) => o.metadata.name);
    expect(hpas.sort()).toEqual(["critic", "tools"]);
    // KEDA is a component: the base needs no CRD beyond Kubernetes' own.
    const keda = readYaml(join(K8S, "components", "keda", "agent-scaledobject.yaml")) as K8sObject[];
    for (const object of keda) validateObject(object);
    const scaled = keda.find((o) => o.kind === "ScaledObject");
    expect(scaled?.spec).toMatchObject({
      scaleTargetRef: { name: "agent" },
      triggers: [{ type: "nats-jetstream", metadata: { stream: "AGENT_RUNS", consumer: "agent-workers" } }],
    });
  });

  it("the MCP bridge is an optional component: a locked-down actor with the tool user, its servers file a ConfigMap the bridge accepts", () => {
    const dir = join(K8S, "components", "mcp");
    const component = readYaml(join(dir, "kustomization.yaml"))[0] as Kustomization & { kind: string };
    expect(component.kind).toBe("Component");
    const objects = component.resources.flatMap((file) => readYaml(join(dir, file)) as K8sObject[]);
    for (const object of objects) validateObject(object);
    const deployment = objects.find((o) => o.kind === "Deployment") as K8sObject;
    checkActor(deployment, IMAGE);
    expect(objects.find((o) => o.kind === "PodDisruptionBudget")?.spec).toMatchObject({ maxUnavailable: 1 });
    const [file] = component.configMapGenerator?.find((g) => g.name === "mcp-servers")?.files ?? [];
    const servers = parseServersFile(readFileSync(join(dir, file ?? "missing"), "utf8"), file ?? "missing");
    expect(Object.keys(servers.servers).length).toBeGreaterThan(0);
    const pod = podSpecOf(deployment);
    const volume = pod.volumes?.find((v) => v.configMap?.name === "mcp-servers");
    const mount = (
      pod.containers[0] as unknown as { volumeMounts: { name: string; mountPath: string }[] }
    ).volumeMounts.find((m) => m.name === volume?.name);
    const setting = pod.containers[0]?.env?.find((v) => v.name === "MCP_SERVERS_FILE")?.value;
    expect(setting).toBe(`${mount?.mountPath ?? "unmounted"}/${file ?? ""}`);
  });

  it("the Kubernetes NATS configuration shares nats.conf's permission model, is valid for nats-server and fits its volume", () => {
    const local = readFileSync(join(ROOT, "nats.conf"), "utf8");
    expect(local).toContain('include "deploy/k8s/base/nats/permissions.conf"');
    const generated = base.configMapGenerator?.find((g) => g.name === "nats-config")?.files ?? [];
    const files = Object.fromEntries(
      generated.map((file) => [file.split("/").pop() ?? file, readFileSync(join(K8S, "base", file), "utf8")]),
    );
    expect(Object.keys(files).sort()).toEqual([
      "encryption.conf",
      "listeners.conf",
      "nats.conf",
      "permissions.conf",
      "route-tls.conf",
      "storage.conf",
      "users.conf",
    ]);
    expect(files["users.conf"]).toContain('include "permissions.conf"');
    for (const part of ["listeners", "users"]) expect(files["nats.conf"]).toContain(`include "${part}.conf"`);
    expect(files["nats.conf"]).toContain('include "storage.conf"');
    const sts = baseObjects.find((o) => o.kind === "StatefulSet") as K8sObject;
    expect((sts.spec as { replicas: number }).replicas).toBe(3);
    checkNatsConfig(files, "base");
    const replicas = sharedEnvValue("AGENTS_REPLICAS");
    expect(replicas).toBe("3");
    checkNatsStore(sts, files, replicas ?? "", "base");
  });

  it("NATS runs an exact image tag of the minor the tests run against, with the official Helm chart's probes", () => {
    const sts = baseObjects.find((o) => o.kind === "StatefulSet") as K8sObject;
    const [nats] = podSpecOf(sts).containers;
    const tag = /^nats:(\d+)\.(\d+)\.(\d+)-alpine$/.exec(nats?.image ?? "");
    expect(tag, `${nats?.image}: an exact tag, not a floating one`).not.toBeNull();
    const tested = testedNatsVersion();
    expect(`${tag?.[1]}.${tag?.[2]}`, `${nats?.image} against the tested nats-server ${tested}`).toBe(
      tested.split(".").slice(0, 2).join("."),
    );
    // A suite given a container (TEST_NATS_CONTAINER=1) runs the same image.
    const helper = readFileSync(join(ROOT, "test", "helpers", "nats-server.ts"), "utf8");
    expect(/CONTAINER_IMAGE = "([^"]+)"/.exec(helper)?.[1]).toBe(nats?.image);

    expect(nats?.ports).toContainEqual({ name: "monitor", containerPort: 8222 });
    expect(readFileSync(join(K8S, "base", "nats", "listeners.conf"), "utf8")).toMatch(/^http: 8222$/m);
    const startup = nats?.startupProbe;
    expect(startup?.httpGet, "startup").toEqual({ path: "/healthz", port: "monitor" });
    const budget =
      (startup?.initialDelaySeconds ?? 0) + (startup?.periodSeconds ?? 10) * (startup?.failureThreshold ?? 3);
    expect(budget, "the startup budget, in seconds").toBeGreaterThanOrEqual(CHART_STARTUP_BUDGET_S);
    expect(startup?.timeoutSeconds).toBeGreaterThanOrEqual(5);
    expect(nats?.livenessProbe?.httpGet, "liveness").toEqual({
      path: "/healthz?js-enabled-only=true",
      port: "monitor",
    });
    expect(nats?.readinessProbe?.httpGet, "readiness").toEqual({
      path: "/healthz?js-server-only=true",
      port: "monitor",
    });
    for (const probe of [nats?.livenessProbe, nats?.readinessProbe])
      expect(probe?.timeoutSeconds).toBeGreaterThanOrEqual(5);
  });

  it("the Dockerfile builds in stages, installs production dependencies only and runs as non-root under tini", () => {
    const dockerfile = readFileSync(join(ROOT, "deploy", "Dockerfile"), "utf8");
    expect(dockerfile.match(/^FROM /gm)?.length).toBeGreaterThanOrEqual(2);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    const user = /^USER (\S+)/m.exec(dockerfile)?.[1] ?? "root";
    expect(user).not.toMatch(/^(root|0)(:|$)/);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["\/sbin\/tini", "--", "node"\]/m);
    const cmd = /^CMD \["([^"]+)"\]/m.exec(dockerfile)?.[1] ?? "";
    expect(existsSync(join(ROOT, cmd)), cmd).toBe(true);
  });

  const render = kubectlAvailable() ? it : it.skip;
  if (!kubectlAvailable()) {
    console.warn(
      "\n*** kubectl is not on PATH: the overlays are NOT rendered (kubectl kustomize) in this run ***\n",
    );
  }
  for (const overlay of ["dev", "prod"] as const) {
    render(`overlays/${overlay} renders with kubectl kustomize into valid, consistent objects`, () => {
      const objects = kustomize(join(K8S, "overlays", overlay)) ?? [];
      const namespace = objects.find((o) => o.kind === "Namespace")?.metadata.name;
      expect(namespace).toBe(overlay === "dev" ? "agents-dev" : "agents");
      for (const object of objects) {
        if (object.apiVersion === CERT_MANAGER) checkCertManager(object, objects);
        else validateObject(object);
        if (object.kind !== "Namespace")
          expect(object.metadata.namespace, object.metadata.name).toBe(namespace);
      }
      const configMaps = objects.filter((o) => o.kind === "ConfigMap");
      const secrets = objects.filter((o) => o.kind === "Secret").map((o) => o.metadata.name);
      const deployments = objects.filter((o) => o.kind === "Deployment");
      const image = podSpecOf(deployments[0] as K8sObject).containers[0]?.image ?? "";
      expect(image).toMatch(overlay === "dev" ? /^bounded-agents:dev$/ : /\/bounded-agents:\d+\.\d+\.\d+$/);
      for (const deployment of deployments) {
        checkActor(deployment, image);
        for (const source of podSpecOf(deployment).containers[0]?.envFrom ?? []) {
          if (source.configMapRef)
            expect(configMaps.map((c) => c.metadata.name)).toContain(source.configMapRef.name);
          if (source.secretRef) expect(source.secretRef.optional).toBe(true);
        }
      }
      const env = configMaps.find((c) => c.metadata.name.startsWith("agents-env"))?.data ?? {};
      expect(env.AGENTS_REPLICAS).toBe(overlay === "prod" ? "3" : "1");
      checkRenderedNats(objects, overlay);
      const agent = deployments.find((d) => d.metadata.name === "agent")?.spec as { replicas?: number };
      const scaled = objects.find((o) => o.kind === "ScaledObject")?.spec as
        { triggers: { metadata: { natsServerMonitoringEndpoint: string } }[] } | undefined;
      if (overlay === "prod") {
        // KEDA sets the workers' count: the Deployment names none that an apply would reset.
        expect(agent.replicas).toBeUndefined();
        expect(scaled?.triggers[0]?.metadata.natsServerMonitoringEndpoint).toContain(`.${namespace}.svc`);
      } else {
        expect(scaled).toBeUndefined();
        expect(agent.replicas).toBe(1);
      }
      const secretRefs = JSON.stringify(objects).matchAll(/"secretKeyRef":\{"name":"([^"]+)"/g);
      for (const [, name] of secretRefs) {
        const known =
          secrets.includes(name ?? "") || (overlay === "prod" && EXTERNAL_SECRETS.includes(name ?? ""));
        expect(known, `secret ${name}`).toBe(true);
      }
    });
  }

  render(
    "overlays/trading-dev adds the trading executor and planner, each a locked-down actor with the tool user",
    () => {
      const objects = kustomize(join(K8S, "overlays", "trading-dev")) ?? [];
      for (const object of objects) validateObject(object);
      const deployments = objects.filter((o) => o.kind === "Deployment");
      const names = deployments.map((d) => d.metadata.name);
      expect(names).toEqual(expect.arrayContaining([...BASE_KINDS, "trading-executor", "trading-planner"]));
      for (const deployment of deployments) checkActor(deployment, "bounded-agents:dev");
      const executor = deployments.find((d) => d.metadata.name === "trading-executor") as K8sObject;
      const config = objects.find(
        (o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("trading-config"),
      );
      expect(JSON.stringify(podSpecOf(executor))).toContain(config?.metadata.name ?? "missing");
      const pdbs = objects.filter((o) => o.kind === "PodDisruptionBudget").map((o) => o.metadata.name);
      expect(pdbs).toEqual(expect.arrayContaining(["trading-executor", "trading-planner"]));
      checkRenderedNats(objects, "trading-dev");
    },
  );
});
