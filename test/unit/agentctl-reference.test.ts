import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import { program } from "../../services/cli/program.js";
import { agentctlReference } from "../helpers/reference/agentctl-page.js";
import { repoRoot } from "../../services/local/paths.js";

/** Every command under `cmd`, groups included. */
const commandsOf = (cmd: Command): Command[] => cmd.commands.flatMap((c) => [c, ...commandsOf(c)]);

describe("docs/agentctl.md, every command of agentctl", () => {
  it("is the one agentctl's commander program makes (`-u` writes it anew)", async () => {
    const page = agentctlReference(program());
    expect(page).toMatch(/^### audit tail$/m);
    expect(page).toMatch(/^\| `--limit <n>` \| `50` \|/m);
    // Nothing of the machine that rendered it: the page is the same in every checkout.
    expect(page).not.toContain(repoRoot());
    if (process.env.USER) expect(page).not.toMatch(new RegExp(`\\| \`${process.env.USER}\` \\|`));
    await expect(page).toMatchFileSnapshot("../../docs/agentctl.md");
  });

  it("has a description for every command, argument and option (they are the user's docs)", () => {
    const missing = commandsOf(program()).flatMap((cmd) => [
      ...(cmd.description().trim() ? [] : [cmd.name()]),
      ...cmd.registeredArguments.filter((a) => !a.description.trim()).map((a) => `${cmd.name()} ${a.name()}`),
      ...cmd.options.filter((o) => !o.description.trim()).map((o) => `${cmd.name()} ${o.flags}`),
    ]);
    expect(missing).toEqual([]);
  });
});
