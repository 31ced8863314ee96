import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";

/** Debian's Chromium (CHROMIUM_PATH moves it): the browser the console's tests drive. */
export function chromiumPath(): string {
  const path = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
  if (!existsSync(path))
    throw new Error(`no Chromium at ${path}: apt-get install chromium (.ci/run does), or set CHROMIUM_PATH`);
  return path;
}

/** A headless Chromium, closed on dispose. */
export async function launchChromium(): Promise<Browser & AsyncDisposable> {
  const browser = await chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    // A container's root user and its small /dev/shm.
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
  return Object.assign(browser, { [Symbol.asyncDispose]: () => browser.close() });
}
