/**
 * V8 CPU profiles (`node --cpu-prof`) read for the bench: self time by function and by package,
 * and folded stacks for a flame graph, optionally only for the samples taken inside a window.
 * V8 stamps a profile on the monotonic clock `process.hrtime` reads (µs), so a window marked by
 * the bench with `process.hrtime.bigint()` selects the measured level alone, without the
 * process's start-up and warm-up.
 */
import { readFile } from "node:fs/promises";

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Monotonic microseconds, on the clock V8 stamps profiles with. */
export interface Window {
  fromUs: number;
  toUs: number;
}

export const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

export async function readProfile(file: string): Promise<CpuProfile> {
  return JSON.parse(await readFile(file, "utf8")) as CpuProfile;
}

/** Where a script lives, shortened: a package name, a path under the repo, or a node built-in. */
export function placeOf(url: string): string {
  if (!url) return "(native/gc)";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg) return pkg;
  const own = /\/((?:dist|bench)\/.*)$/.exec(url)?.[1];
  return own ?? url;
}

/** A frame as the summaries and the flame graph name it: function, place and line. */
export function frameName(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  return `${functionName || "(anonymous)"} ${placeOf(url)}:${lineNumber + 1}`;
}

/**
 * Self time per node, in µs: each sample is weighted by the time until the next one (the last by
 * the time until the profile ends). With a window, only samples taken inside it count.
 */
export function selfTimes(profile: CpuProfile, window?: Window): Map<number, number> {
  const self = new Map<number, number>();
  const { samples, timeDeltas } = profile;
  let at = profile.startTime;
  for (let i = 0; i < samples.length; i += 1) {
    at += timeDeltas[i] ?? 0;
    const next = i + 1 < samples.length ? at + (timeDeltas[i + 1] ?? 0) : profile.endTime;
    if (window && (at < window.fromUs || at >= window.toUs)) continue;
    const id = samples[i]!;
    self.set(id, (self.get(id) ?? 0) + Math.max(0, next - at));
  }
  return self;
}

const IDLE = "(idle)";

export interface Summary {
  busyUs: number;
  idleUs: number;
  byPlace: Map<string, number>;
  byFunction: Map<string, number>;
}

/** Busy and idle time, and self time by place and by function (idle left out). */
export function summarise(profile: CpuProfile, window?: Window): Summary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const summary: Summary = { busyUs: 0, idleUs: 0, byPlace: new Map(), byFunction: new Map() };
  for (const [id, us] of selfTimes(profile, window)) {
    const node = byId.get(id);
    if (!node) continue;
    if (node.callFrame.functionName === IDLE) {
      summary.idleUs += us;
      continue;
    }
    summary.busyUs += us;
    const place = placeOf(node.callFrame.url);
    summary.byPlace.set(place, (summary.byPlace.get(place) ?? 0) + us);
    const fn = frameName(node);
    summary.byFunction.set(fn, (summary.byFunction.get(fn) ?? 0) + us);
  }
  return summary;
}

/**
 * Folded stacks, as flame graphs take them: each stack (root first, frames joined by `;`) with
 * the self time of the samples that ended in it. The synthetic `(root)` frame and idle time are
 * left out.
 */
export function foldedStacks(profile: CpuProfile, window?: Window): Map<string, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const stackOf = new Map<number, string | undefined>();
  const stack = (id: number): string | undefined => {
    if (stackOf.has(id)) return stackOf.get(id);
    const frames: string[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const node = byId.get(at)!;
      if (node.callFrame.functionName === IDLE) {
        stackOf.set(id, undefined);
        return undefined;
      }
      if (node.callFrame.functionName !== "(root)") frames.push(frameName(node));
    }
    const folded = frames.reverse().join(";");
    stackOf.set(id, folded);
    return folded;
  };
  const folded = new Map<string, number>();
  for (const [id, us] of selfTimes(profile, window)) {
    const key = stack(id);
    if (key) folded.set(key, (folded.get(key) ?? 0) + us);
  }
  return folded;
}

/**
 * Time in each frame and in what it called, from folded stacks: a frame counts once per stack
 * however often it recurs in it. `keep` picks the frames reported (the runtime's own, say).
 */
export function inclusiveTimes(
  folded: Map<string, number>,
  keep: (frame: string) => boolean,
): Map<string, number> {
  const total = new Map<string, number>();
  for (const [stack, us] of folded) {
    for (const frame of new Set(stack.split(";"))) {
      if (keep(frame)) total.set(frame, (total.get(frame) ?? 0) + us);
    }
  }
  return total;
}

/** The `n` largest entries as lines: share of `total`, milliseconds, name. */
export function topLines(map: Map<string, number>, total: number, n: number): string[] {
  return [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(
      ([k, v]) =>
        `${((100 * v) / total).toFixed(1).padStart(5)}%  ${(v / 1000).toFixed(0).padStart(6)} ms  ${k}`,
    );
}
