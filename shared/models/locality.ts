const LOOPBACK = new Set(["localhost", "::1", "[::1]"]);

/** A model endpoint on this machine (Ollama, llama.cpp, a local vLLM) keeps data local. */
export function isLoopbackUrl(url: string): boolean {
  const host = new URL(url).hostname.toLowerCase();
  return LOOPBACK.has(host) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
