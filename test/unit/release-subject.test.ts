import { describe, expect, it } from "vitest";
import { headlineOf } from "../../shared/contracts/log.js";
import { Subjects } from "../../shared/bus/subjects.js";
import { releasingSubject } from "../../services/supervisor/control.js";

describe("releasingSubject", () => {
  const subjects = new Subjects("agents");
  const subjectOf = (...kinds: string[]): string =>
    subjects.log("run-1", headlineOf(kinds.map((kind) => ({ kind: kind as never }))));

  it("reads a commit, a failure and a halt from the subject, whatever else the message holds", () => {
    expect(releasingSubject(subjectOf("tool.completed", "run.committed"))).toBe(true);
    expect(releasingSubject(subjectOf("run.resumed", "guard.blocked", "run.failed"))).toBe(true);
    expect(releasingSubject(subjectOf("approval.decided", "run.halted"))).toBe(true);
  });

  it("leaves an admission, a resume and a step unread", () => {
    expect(releasingSubject(subjectOf("run.admitted"))).toBe(false);
    expect(releasingSubject(subjectOf("run.resumed", "model.called"))).toBe(false);
    expect(releasingSubject(subjectOf("model.called"))).toBe(false);
  });
});
