import { randomUUID } from "node:crypto";

/** Id generation is injected so that tests and replays produce the same ids. */
export interface IdGenerator {
  next(prefix?: string): string;
}

export const RUN_ID_MAX_LENGTH = 64;
export const RUN_ID_PATTERN = new RegExp(`^[A-Za-z0-9_-]{1,${RUN_ID_MAX_LENGTH}}$`);

export const uuidIds: IdGenerator = {
  next: (prefix) => (prefix ? `${prefix}-` : "") + randomUUID().replaceAll("-", ""),
};

export function sequentialIds(start = 1): IdGenerator {
  let n = start;
  return { next: (prefix) => `${prefix ?? "id"}-${String(n++).padStart(6, "0")}` };
}
