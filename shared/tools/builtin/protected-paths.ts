import type { Stats } from "node:fs";
import { realpath, stat, statfs } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { AgentError } from "../../runtime/errors.js";
import { isWithin } from "../path-grant.js";

/**
 * What the file tools never touch, whatever the grant (`"*"` and `/` included): the kernel's
 * interfaces, where any process of the actor's user reads the actor's environment
 * (`/proc/1/environ`: NATS_PASSWORD, a worker's model API keys), and the actor's own credential
 * files. Checked on resolved paths (symlinks followed) and on what was opened (a hard link to a
 * credential file is the same file).
 */

/** The kernel's interfaces: process environments and memory, kernel settings, devices. */
export const SYSTEM_DIRS = ["/proc", "/sys", "/dev"] as const;

/** procfs and sysfs, wherever they are mounted (statfs's f_type). */
const KERNEL_FILESYSTEMS: ReadonlySet<number> = new Set([0x9f_a0, 0x62_65_65_72]);

/** The settings of an actor's environment that name its credential files. */
export interface SecretFileEnv {
  NATS_NKEY_SEED_FILE?: string | undefined;
  NATS_CREDS_FILE?: string | undefined;
  NATS_TLS_KEY?: string | undefined;
}

/** The credential files an actor's environment names, as absolute paths. Pure. */
export function secretFilesOf(env: SecretFileEnv): string[] {
  return [env.NATS_NKEY_SEED_FILE, env.NATS_CREDS_FILE, env.NATS_TLS_KEY]
    .filter((file): file is string => file !== undefined && file.length > 0)
    .map((file) => resolve(file));
}

/** The system directory a resolved path lies in, if any. Pure. */
export function systemDirOf(real: string): string | undefined {
  return SYSTEM_DIRS.find((dir) => isWithin(dir, real));
}

const refused = (requested: string, why: string): AgentError =>
  new AgentError(
    "PATH_NOT_ALLOWED",
    `'${requested}' ${why}: the file tools never touch it, whatever the grant`,
  );

/** A credential file where it is now: a Kubernetes secret's symlinks change at each rotation. */
async function whereNow(file: string): Promise<{ real: string; info: Stats | undefined }> {
  const real = await realpath(file).catch(() => file);
  return { real, info: await stat(real).catch(() => undefined) };
}

/**
 * PATH_NOT_ALLOWED when a resolved path (and, once opened, the file itself) is protected: under a
 * system directory or on a kernel filesystem, or one of `secretFiles` by path or by identity.
 */
export async function assertUnprotected(
  requested: string,
  real: string,
  secretFiles: readonly string[],
  opened?: Pick<Stats, "dev" | "ino">,
): Promise<void> {
  const dir = systemDirOf(real);
  if (dir) throw refused(requested, `is under ${dir}`);
  // A file not there yet (a write) is on its directory's filesystem.
  const fs = await statfs(real).catch(() => statfs(dirname(real)).catch(() => undefined));
  if (fs && KERNEL_FILESYSTEMS.has(Number(fs.type))) throw refused(requested, "is on a kernel filesystem");
  for (const secret of secretFiles) {
    const now = await whereNow(secret);
    const same = opened && now.info && now.info.dev === opened.dev && now.info.ino === opened.ino;
    if (real === secret || real === now.real || same)
      throw refused(requested, "is one of this actor's credential files");
  }
}

/** The real path of an open file (Linux: /proc/self/fd), undefined where that cannot be known. */
export async function openedPath(fd: number): Promise<string | undefined> {
  return realpath(`/proc/self/fd/${fd}`).catch(() => undefined);
}
