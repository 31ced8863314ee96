/** Text for the generated Markdown references (docs/agentctl.md, docs/configuration.md). */

/** `<name>` outside code would read as an HTML tag; inside backticks it is shown as written. */
export const escapeAngles = (text: string): string =>
  text
    .split("`")
    .map((part, i) => (i % 2 === 0 ? part.replaceAll("<", "\\<") : part))
    .join("`");

/** Text for a table cell: a `|`, even inside backticks, would end the cell. */
export const tableCell = (text: string): string => escapeAngles(text).replaceAll("|", "\\|");

/** A table: its header, then one row per entry of `rows`. */
export const table = (header: readonly string[], rows: readonly (readonly string[])[]): string[] => [
  `| ${header.join(" | ")} |`,
  `| ${header.map(() => "---").join(" | ")} |`,
  ...rows.map((row) => `| ${row.map(tableCell).join(" | ")} |`),
];
