import { describe, expect, it } from "vitest";
import { isSupportedVersion, parseVersion } from "../../shared/bus/server-version.js";
import { debianSource } from "../../services/local/debian-source.js";

describe("the oldest nats-server the contract runs on", () => {
  it("accepts 2.12.0 and newer, refuses anything older or unknown", () => {
    for (const ok of ["2.12.0", "v2.15.1", "2.12.0-RC.1", "2.13.2", "3.0.0"])
      expect(isSupportedVersion(ok), ok).toBe(true);
    for (const old of ["2.11.9", "2.9.10", "v2.10.26", "1.99.99", "", undefined]) {
      expect(isSupportedVersion(old), String(old)).toBe(false);
    }
    expect(parseVersion("nats-server: v2.15.1")).toEqual([2, 15, 1]);
  });
});

describe("the Debian archive apt already uses", () => {
  it("reads deb822 stanzas and one-line entries, skipping security and updates suites", () => {
    const deb822 = [
      "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main",
      "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg",
    ].join("\n\n");
    expect(debianSource([deb822])).toEqual({
      uri: "http://mirror.example/debian",
      signedBy: "/usr/share/keyrings/debian-archive-keyring.gpg",
    });
    const oneLine =
      "# comment\ndeb http://mirror.example/debian-security bookworm-security main\ndeb [arch=amd64] http://mirror.example/debian bookworm main\n";
    expect(debianSource([oneLine])).toEqual({ uri: "http://mirror.example/debian" });
  });

  it("names none on another distribution or with only deb-src entries", () => {
    expect(debianSource(["deb http://archive.example/ubuntu noble main"])).toBeUndefined();
    expect(debianSource(["Types: deb-src\nURIs: http://mirror.example/debian\nSuites: sid"])).toBeUndefined();
    expect(debianSource([])).toBeUndefined();
  });
});
