/**
 * The checks the manifests' tests apply to what the overlays hold and render: the NATS
 * configuration, each actor's Deployment, their logins. Shared by deploy.test.ts.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nkeys } from "@nats-io/transport-node";
import { expect } from "vitest";
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
import { McpEnv } from "../../services/mcp/env.js";
import { natsServerBinary } from "../../services/local/nats-binary.js";
import { TradingExecutorEnv } from "../../examples/trading/executor/env.js";
import { SupervisorEnv } from "../../services/supervisor/env.js";
import { ToolsEnv } from "../../services/tools/env.js";
import { makeCa } from "./certificates.js";
import {
  K8S,
  ROOT,
  natsSizeBytes,
  podSpecOf,
  quantityBytes,
  type Container,
  readYaml,
  type K8sObject,
} from "./k8s.js";

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
export const EXTERNAL_SECRETS = ["nats-credentials", "model-api-keys", "nats-user-keys", "nats-encryption"];
export const IMAGE = "bounded-agents";
/** The actor kinds the base runs; the others are optional components. */
export const BASE_KINDS = ACTOR_KINDS.filter((kind) => !OPTIONAL_ACTOR_KINDS.includes(kind));

export function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(entry.name) ? [path] : [];
  });
}

export interface Kustomization {
  resources: string[];
  configMapGenerator?: { name: string; literals?: string[]; files?: string[] }[];
  images?: { name: string }[];
}
export const base = readYaml(join(K8S, "base", "kustomization.yaml"))[0] as Kustomization;
export const baseObjects = base.resources.flatMap((file) => readYaml(join(K8S, "base", file)) as K8sObject[]);
export const actorDeployments = baseObjects.filter(
  (o) => o.kind === "Deployment" && o.metadata.labels?.["app.kubernetes.io/component"] === "actor",
);
const sharedLiterals = (base.configMapGenerator ?? []).find((g) => g.name === "agents-env")?.literals;
export const sharedEnv = sharedLiterals?.map((line) => line.split("=")[0] ?? "");
export function sharedEnvValue(name: string): string | undefined {
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
export function testedNatsVersion(): string {
  const out = spawnSync(NATS_SERVER, ["--version"], { encoding: "utf8" });
  const version = /v(\d+\.\d+\.\d+)/.exec(`${out.stdout}${out.stderr}`)?.[1];
  if (!version) throw new Error(`nats-server --version: ${out.error?.message ?? out.stdout + out.stderr}`);
  return version;
}

/** The official NATS Helm chart's startup probe (nats-io/k8s, helm/charts/nats): 10 s + 90 × 10 s. */
export const CHART_STARTUP_BUDGET_S = 10 + 90 * 10;

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
export function checkNatsConfig(files: Record<string, string>, label: string): void {
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
export function checkNatsStore(
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
export function checkRenderedNats(objects: K8sObject[], overlay: string): void {
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
export function checkActor(deployment: K8sObject, image: string): void {
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
