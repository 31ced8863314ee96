/**
 * Summarises V8 CPU profiles (`node --cpu-prof`) taken by hand: where the time went, by function
 * and by package or source file, self time only; with `--flame <dir>`, also a flame graph of each.
 * `node bench/profile-summary.ts [--flame <dir>] <file.cpuprofile>...` (`npm run bench:profile`
 * does all of it for a W1 level).
 */
import { mkdir, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { Command } from "commander";
import { foldedStacks, readProfile, summarise, topLines } from "./lib/cpuprofile.ts";
import { flameGraph } from "./lib/flame.ts";

const program = new Command("profile-summary")
  .argument("<files...>", ".cpuprofile files")
  .option("--flame <dir>", "also write a flame graph of each profile here")
  .parse();
const { flame } = program.opts<{ flame?: string }>();
if (flame) await mkdir(flame, { recursive: true });

for (const file of program.args) {
  const profile = await readProfile(file);
  const s = summarise(profile);
  console.log(`\n${file}: busy ${(s.busyUs / 1000).toFixed(0)} ms, idle ${(s.idleUs / 1000).toFixed(0)} ms`);
  console.log("by place:\n" + topLines(s.byPlace, s.busyUs, 15).join("\n"));
  console.log("by function:\n" + topLines(s.byFunction, s.busyUs, 25).join("\n"));
  if (flame) {
    const out = join(flame, `${basename(file, ".cpuprofile")}.svg`);
    await writeFile(out, flameGraph(foldedStacks(profile), { title: basename(file) }));
    console.log(`flame graph: ${out}`);
  }
}
