/**
 * A flame graph as a standalone SVG, from folded stacks (see cpuprofile.ts): the root at the
 * bottom, each frame as wide as the time spent in it and in what it called, callees stacked on
 * their caller, siblings ordered by name. Hovering a frame shows its name, time and share (an SVG
 * `<title>`); any browser opens the file. Colours tell where the code lives: the runtime's own
 * (`dist/`), the bench's, NATS's client, zod, other packages, Node's built-ins, and V8 itself
 * (GC, native code). No package renders a V8 profile to SVG without a browser: the one on npm
 * that tried (`flamegraph`) reads the profile format V8 had in 2017.
 */
export interface FlameOptions {
  title: string;
  /** Drawing width in pixels. */
  width?: number;
  /** Frames narrower than this many pixels are left out, with what they called. */
  minWidthPx?: number;
}

interface Frame {
  name: string;
  totalUs: number;
  children: Map<string, Frame>;
}

const ROW = 17;
const TOP = 40;
const FONT_PX = 11;
/** Average glyph width at FONT_PX, to decide how much of a name fits in its frame. */
const CHAR_PX = 6.2;

function tree(folded: Map<string, number>): Frame {
  const root: Frame = { name: "all", totalUs: 0, children: new Map() };
  for (const [stack, us] of folded) {
    root.totalUs += us;
    let at = root;
    for (const name of stack.split(";")) {
      let child = at.children.get(name);
      if (!child) {
        child = { name, totalUs: 0, children: new Map() };
        at.children.set(name, child);
      }
      child.totalUs += us;
      at = child;
    }
  }
  return root;
}

function depthOf(frame: Frame, minUs: number): number {
  let deepest = 0;
  for (const child of frame.children.values()) {
    if (child.totalUs >= minUs) deepest = Math.max(deepest, depthOf(child, minUs));
  }
  return deepest + 1;
}

/** Where code lives, its colour, and its name in the legend; the last entry takes the rest. */
const PALETTE: [RegExp, string, string][] = [
  [/^(?:dist|bench)\//, "#e8743b", "runtime / bench"],
  [/^@nats-io\//, "#3b8ee8", "NATS client"],
  [/^zod$/, "#9b59b6", "zod"],
  [/^node:/, "#7fb800", "node built-ins"],
  [/^\(native\/gc\)$/, "#c0c0c0", "V8: GC, native"],
  [/./, "#e8c33b", "other packages"],
];

/** The colour of a frame, by where its code lives (the place `frameName` puts after the function). */
export function colourOf(name: string): string {
  const place = / (\S+):\d+$/.exec(name)?.[1] ?? "";
  return PALETTE.find(([pattern]) => pattern.test(place))?.[1] ?? "#e8c33b";
}

const escapeXml = (text: string): string => text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function flameGraph(folded: Map<string, number>, options: FlameOptions): string {
  const width = options.width ?? 1200;
  const root = tree(folded);
  const scale = root.totalUs > 0 ? width / root.totalUs : 0;
  const minUs = scale > 0 ? (options.minWidthPx ?? 0.5) / scale : Infinity;
  const depth = root.totalUs > 0 ? depthOf(root, minUs) : 0;
  const height = TOP + depth * ROW + 10;
  const rects: string[] = [];
  const draw = (frame: Frame, x: number, level: number): void => {
    const w = frame.totalUs * scale;
    const y = TOP + (depth - level - 1) * ROW;
    const share = root.totalUs > 0 ? (100 * frame.totalUs) / root.totalUs : 0;
    const label = `${frame.name} (${(frame.totalUs / 1000).toFixed(1)} ms, ${share.toFixed(2)}%)`;
    const fits = Math.floor((w - 6) / CHAR_PX);
    const text =
      fits >= 3
        ? `<text x="${(x + 3).toFixed(1)}" y="${y + ROW - 5}">${escapeXml(
            frame.name.length <= fits ? frame.name : `${frame.name.slice(0, fits - 2)}..`,
          )}</text>`
        : "";
    const fill = level === 0 ? "#d0d0d0" : colourOf(frame.name);
    rects.push(
      `<g><title>${escapeXml(label)}</title><rect x="${x.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${ROW - 1}" fill="${fill}" rx="2"/>${text}</g>`,
    );
    let childX = x;
    for (const child of [...frame.children.values()].sort((a, b) => a.name.localeCompare(b.name))) {
      if (child.totalUs >= minUs) draw(child, childX, level + 1);
      childX += child.totalUs * scale;
    }
  };
  if (root.totalUs > 0) draw(root, 0, 0);
  const legend = PALETTE.map(
    ([, colour, what], i) =>
      `<rect x="${10 + i * 150}" y="24" width="10" height="10" fill="${colour}"/><text x="${24 + i * 150}" y="33">${what}</text>`,
  ).join("");
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="monospace" font-size="${FONT_PX}">`,
    `<text x="10" y="16" font-size="14">${escapeXml(options.title)}</text>`,
    legend,
    ...rects,
    "</svg>",
    "",
  ].join("\n");
}
