import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  isSupportedVersion,
  MIN_SERVER_VERSION,
  NEWER_SERVER_HINT,
} from "../../shared/bus/server-version.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { debianSource } from "./debian-source.js";
import { repoRoot } from "./paths.js";

/** A nats-server binary new enough for the wire contract. */
export interface NatsBinary {
  path: string;
  /** As the binary prints it, e.g. `v2.15.1`. */
  version: string;
  /** How it was found, for the screen. */
  origin: string;
}

const APT_SOURCES = "/etc/apt/sources.list";
const APT_PARTS = "/etc/apt/sources.list.d";

let found: Promise<NatsBinary> | undefined;

/**
 * The nats-server to start, found once per process: NATS_SERVER_BIN when set; else `nats-server`
 * on PATH when it is at least MIN_SERVER_VERSION; else the one fetched earlier into the
 * project's `.cache/`; else Debian's newest package, fetched there with apt's own tools from the
 * archive this machine's apt already uses. UNSUPPORTED_SERVER, naming what to install, otherwise.
 */
export function natsServerBinary(say: (line: string) => void = () => undefined): Promise<NatsBinary> {
  found ??= Promise.resolve().then(() => locate(say));
  return found;
}

function locate(say: (line: string) => void): NatsBinary {
  const pinned = process.env.NATS_SERVER_BIN;
  if (pinned) {
    const version = versionOf(pinned);
    if (isSupportedVersion(version))
      return { path: pinned, version: version ?? "", origin: "NATS_SERVER_BIN" };
    throw unsupported(`NATS_SERVER_BIN=${pinned} is ${version ?? "not a runnable nats-server"}`);
  }
  const onPath = versionOf("nats-server");
  if (isSupportedVersion(onPath)) return { path: "nats-server", version: onPath ?? "", origin: "PATH" };
  const cacheDir = join(repoRoot(), ".cache", "nats-server");
  const cached = join(cacheDir, "root", "usr", "sbin", "nats-server");
  if (!isSupportedVersion(versionOf(cached))) {
    const seen = onPath ? `the nats-server on PATH is ${onPath}` : "there is no nats-server on PATH";
    say(`${seen}; fetching Debian's newest nats-server package into ${cacheDir}…`);
    const failure = fetchFromDebian(cacheDir);
    if (failure) throw unsupported(`${seen}, and fetching Debian's package failed: ${failure}`);
  }
  const version = versionOf(cached);
  if (!isSupportedVersion(version)) throw unsupported(`Debian's package holds nats-server ${version ?? "?"}`);
  return { path: cached, version: version ?? "", origin: "Debian's package, cached in .cache/nats-server" };
}

/** `v2.15.1` from `nats-server --version`; undefined when it does not run. */
function versionOf(binary: string): string | undefined {
  const run = spawnSync(binary, ["--version"], { encoding: "utf8", timeout: 10_000 });
  if (run.error || run.status !== 0) return undefined;
  return /v\d+\.\d+\.\d+\S*/.exec(run.stdout)?.[0];
}

function unsupported(what: string): AgentError {
  return new AgentError(
    "UNSUPPORTED_SERVER",
    `no nats-server ${MIN_SERVER_VERSION} or newer to start: ${what}. Install one (${NEWER_SERVER_HINT}) and put it on PATH or name it in NATS_SERVER_BIN, or set NATS_URL to a running server`,
  );
}

/**
 * Downloads Debian unstable's nats-server with apt-get into `dir`, touching nothing of the
 * system's apt state, and unpacks it there. Returns why it failed, or undefined.
 */
function fetchFromDebian(dir: string): string | undefined {
  if (spawnSync("apt-get", ["--version"], { stdio: "ignore" }).error) return "apt-get is not available";
  const source = debianSource(aptSourceFiles());
  if (!source) return `apt names no Debian archive in ${APT_SOURCES} or ${APT_PARTS}`;
  const apt = join(dir, "apt");
  for (const sub of ["parts", "lists/partial", "cache/archives/partial"])
    mkdirSync(join(apt, sub), { recursive: true });
  const keyring = source.signedBy ?? "/usr/share/keyrings/debian-archive-keyring.gpg";
  writeFileSync(
    join(apt, "parts", "unstable.sources"),
    `Types: deb\nURIs: ${source.uri}\nSuites: sid\nComponents: main\n${existsSync(keyring) ? `Signed-By: ${keyring}\n` : ""}`,
  );
  const options = [
    ...["-o", "Dir::Etc::sourcelist=/dev/null", "-o", `Dir::Etc::sourceparts=${join(apt, "parts")}`],
    ...["-o", `Dir::State::Lists=${join(apt, "lists")}`, "-o", `Dir::Cache=${join(apt, "cache")}`],
    // apt's download user cannot write into a directory of ours; as root, download as root.
    ...(process.getuid?.() === 0 ? ["-o", "APT::Sandbox::User=root"] : []),
  ];
  const step = (args: string[], cwd?: string): string | undefined => {
    const run = spawnSync(args[0] ?? "", args.slice(1), { cwd, encoding: "utf8", timeout: 300_000 });
    if (run.error) return `${args[0]}: ${run.error.message}`;
    return run.status === 0
      ? undefined
      : `${args.slice(0, 2).join(" ")} exited ${run.status}: ${run.stderr.trim().slice(-400)}`;
  };
  const failed =
    step(["apt-get", "-qq", ...options, "update"]) ??
    step(["apt-get", "-qq", ...options, "download", "nats-server"], apt);
  if (failed) return failed;
  const deb = readdirSync(apt).find((name) => /^nats-server_.*\.deb$/.test(name));
  if (!deb) return "apt-get download left no nats-server package";
  // Unpacked beside, then moved into place: a process looking meanwhile sees no tree or a whole one.
  const staging = join(dir, `root.${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  const unpacked = step(["dpkg-deb", "-x", join(apt, deb), staging]);
  if (unpacked) return unpacked;
  rmSync(join(dir, "root"), { recursive: true, force: true });
  try {
    renameSync(staging, join(dir, "root"));
  } catch (err) {
    // Another process put its own copy there first: the same package, so this one is not needed.
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(join(dir, "root"))) return `cannot move the package into place: ${String(err)}`;
  }
  rmSync(join(apt, deb), { force: true });
  return undefined;
}

function aptSourceFiles(): string[] {
  const files = [APT_SOURCES];
  if (existsSync(APT_PARTS)) {
    for (const name of readdirSync(APT_PARTS).sort()) {
      if (name.endsWith(".list") || name.endsWith(".sources")) files.push(join(APT_PARTS, name));
    }
  }
  return files.filter((file) => existsSync(file)).map((file) => readFileSync(file, "utf8"));
}
