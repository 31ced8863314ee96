import { posix } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { CapabilityObject } from "../../shared/contracts/capability.js";
import { parseSubmitRequest } from "../../shared/bus/submit.js";
import {
  confineLexically,
  insideGrant,
  isWithin,
  lexicalRoots,
  requestedPath,
} from "../../shared/tools/path-grant.js";
import { checkGrantedPaths } from "../../services/supervisor/submit-request.js";
import { spec } from "../helpers/fixtures.js";

const refusal = { code: "PATH_NOT_ALLOWED" };

/** Where a path with `..` lands, segment by segment: the model `requestedPath` must agree with. */
function landsInside(segments: readonly string[]): boolean {
  let depth = 0;
  for (const segment of segments) {
    if (segment === "..") depth -= 1;
    else if (segment !== ".") depth += 1;
    if (depth < 0) return false;
  }
  return true;
}

describe("path confinement, lexical core", () => {
  it("isWithin: the root itself and what lies below it, never a sibling sharing its prefix", () => {
    expect(isWithin("/srv/data", "/srv/data")).toBe(true);
    expect(isWithin("/srv/data", "/srv/data/a/b")).toBe(true);
    expect(isWithin("/srv/data", "/srv/data-other/x")).toBe(false);
    expect(isWithin("/srv/data", "/srv")).toBe(false);
    expect(isWithin("/", "/etc/passwd")).toBe(true);
  });

  it("a relative path with any mix of `..` is inside exactly when it never climbs above the granted directory", () => {
    const segment = fc.constantFrom("..", ".", "a", "b", "..", "c.txt");
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 12 }), (segments) => {
        const asked = requestedPath(segments.join("/"), ["/srv/data"]);
        const inside = insideGrant(asked, lexicalRoots(["/srv/data"]), ["/srv/data"]);
        // Climbing out and back in ("../data/x") lands inside: only where it lands counts.
        const back = isWithin("/srv/data", posix.normalize(posix.join("/srv/data", ...segments)));
        expect(inside).toBe(back);
        if (landsInside(segments)) expect(inside).toBe(true);
      }),
    );
  });

  it("an empty path, a NUL byte, or a relative path with no granted directory is refused", () => {
    expect(() => requestedPath("", ["/srv"])).toThrow(expect.objectContaining(refusal));
    expect(() => requestedPath("a\0b", ["/srv"])).toThrow(expect.objectContaining(refusal));
    expect(() => requestedPath("notes.txt", ["*"])).toThrow(expect.objectContaining(refusal));
    expect(requestedPath("/etc/hosts", ["*"])).toBe("/etc/hosts");
  });

  it("`~` is never expanded, for the file tools as for the MCP bridge; a relative path starts from the first granted directory only where the caller allows it", () => {
    for (const path of ["~", "~/notes.txt", "~root/.ssh"]) {
      expect(() => requestedPath(path, ["/srv"]), path).toThrow(
        expect.objectContaining({
          code: "PATH_NOT_ALLOWED",
          message: expect.stringContaining("'~' is not expanded") as string,
        }),
      );
    }
    expect(requestedPath("a/../b", ["/srv"])).toBe("/srv/b");
    expect(() => requestedPath("b", ["/srv"], "refused")).toThrow(expect.objectContaining(refusal));
    expect(() => confineLexically("/srv-2/x", ["/srv"])).toThrow(expect.objectContaining(refusal));
    expect(confineLexically("/srv/a/../b", ["/srv"], "refused")).toBe("/srv/b");
  });
});

describe("a grant's allowedPaths at submit", () => {
  const submitted = (capabilities: unknown[]) =>
    parseSubmitRequest(spec({ tools: [], capabilities: capabilities as CapabilityObject[] }));

  it("an entry neither absolute nor `*` (fileRead, fileWrite, mcp) is INVALID_SPEC naming each field", () => {
    expect(() =>
      checkGrantedPaths(
        submitted([
          "compute",
          { kind: "fileRead", allowedPaths: ["/srv/ok", "work"] },
          { kind: "fileWrite", allowedPaths: ["~/out"] },
          { kind: "mcp", server: "fs", tool: "*", allowedPaths: ["./data", "*"] },
        ]),
      ),
    ).toThrow(
      expect.objectContaining({
        code: "INVALID_SPEC",
        message: expect.stringMatching(
          /^agent\.capabilities\[1\]\.allowedPaths\[1\] 'work', agent\.capabilities\[2\]\.allowedPaths\[0\] '~\/out', agent\.capabilities\[3\]\.allowedPaths\[0\] '\.\/data': an allowedPaths entry must be an absolute path or "\*"/,
        ) as string,
      }),
    );
  });

  it("absolute entries, `*`, and an mcp grant without allowedPaths pass", () => {
    expect(() =>
      checkGrantedPaths(
        submitted([
          { kind: "fileRead", allowedPaths: ["/srv", "*"] },
          { kind: "fileWrite", allowedPaths: ["/srv/out/../out"] },
          { kind: "mcp", server: "fs", tool: "*" },
          { kind: "shell", allowedCommands: ["wc"] },
        ]),
      ),
    ).not.toThrow();
  });
});
