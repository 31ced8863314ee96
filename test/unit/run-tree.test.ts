import { describe, expect, it } from "vitest";
import { runTree } from "../../shared/bus/run-tree.js";
import { queuedStatus } from "../helpers/fixtures.js";

const status = (runId: string, parentRunId?: string) => queuedStatus(runId, 0, parentRunId);

describe("a run's tree, as the statuses name parents", () => {
  it("is the run, then its children, then theirs (breadth first); other trees are left out", () => {
    const statuses = [
      status("grandchild", "child-b"),
      status("child-a", "root"),
      status("other"),
      status("root"),
      status("child-b", "root"),
      status("other-child", "other"),
    ];
    expect(runTree("root", statuses).map((s) => s.runId)).toEqual([
      "root",
      "child-a",
      "child-b",
      "grandchild",
    ]);
    expect(runTree("child-b", statuses).map((s) => s.runId)).toEqual(["child-b", "grandchild"]);
  });

  it("is empty for a run no status names, and ends on statuses that name each other as parents", () => {
    expect(runTree("missing", [status("root")])).toEqual([]);
    const looped = [status("a", "b"), status("b", "a")];
    expect(runTree("a", looped).map((s) => s.runId)).toEqual(["a", "b"]);
  });
});
