/** A Debian archive this machine's apt already uses, and the keyring it trusts it with. */
export interface DebianSource {
  uri: string;
  signedBy?: string;
}

/**
 * The main Debian archive among apt's sources (one-line `.list` files and deb822 `.sources`
 * stanzas): the first `deb` entry of a plain release suite, not a security or updates one, on a
 * Debian archive. Undefined when apt names none (another distribution, or no apt).
 */
export function debianSource(files: readonly string[]): DebianSource | undefined {
  for (const text of files) {
    for (const entry of [...deb822Entries(text), ...oneLineEntries(text)]) {
      const plain = entry.suites.some((suite) => !suite.includes("-") && !suite.includes("/"));
      const debian = entry.uri.includes("debian") && !entry.uri.includes("security");
      if (plain && debian)
        return entry.signedBy ? { uri: entry.uri, signedBy: entry.signedBy } : { uri: entry.uri };
    }
  }
  return undefined;
}

interface Entry extends DebianSource {
  suites: string[];
}

function deb822Entries(text: string): Entry[] {
  const entries: Entry[] = [];
  for (const stanza of text.split(/\n\s*\n/)) {
    const fields = new Map<string, string>();
    for (const line of stanza.split("\n")) {
      const match = /^([A-Za-z-]+):\s*(.*)$/.exec(line);
      if (match?.[1] && match[2] !== undefined) fields.set(match[1].toLowerCase(), match[2].trim());
    }
    if (!(fields.get("types") ?? "").split(/\s+/).includes("deb")) continue;
    const suites = (fields.get("suites") ?? "").split(/\s+/).filter(Boolean);
    const signedBy = fields.get("signed-by");
    for (const uri of (fields.get("uris") ?? "").split(/\s+/).filter(Boolean)) {
      entries.push({ uri, suites, ...(signedBy?.startsWith("/") ? { signedBy } : {}) });
    }
  }
  return entries;
}

function oneLineEntries(text: string): Entry[] {
  const entries: Entry[] = [];
  for (const raw of text.split("\n")) {
    const match = /^deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)/.exec(raw.trim());
    if (!match?.[2] || !match[3]) continue;
    const signedBy = /signed-by=(\S+)/.exec(match[1] ?? "")?.[1];
    entries.push({ uri: match[2], suites: [match[3]], ...(signedBy ? { signedBy } : {}) });
  }
  return entries;
}
