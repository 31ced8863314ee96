import { copyFile, mkdir, mkdtemp, stat } from "node:fs/promises";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { actorEntry } from "../../services/local/cluster.js";
import { launchChromium } from "../helpers/browser.js";
import { FULL_CLUSTER, runProcess, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

const TOKEN = "read-token-0123456789";
const OPERATE = "operate-token-0123456789";
const IMAGES = fileURLToPath(new URL("../../docs/images/", import.meta.url));

const suite = useClusterSuite("console", {
  ...FULL_CLUSTER,
  actors: [
    ...FULL_CLUSTER.actors,
    {
      entry: actorEntry("console"),
      name: "console",
      user: "console",
      env: { CONSOLE_PORT: "0", CONSOLE_TOKEN: TOKEN, CONSOLE_OPERATE_TOKEN: OPERATE },
    },
  ],
});

/** A critic model's verdict as its JSON answer: below the rubric's minimums under 0.7. */
function verdict(score: number): string {
  const passed = score >= 0.7;
  return JSON.stringify({
    scores: { correctness: score, completeness: score, coherence: score, safety: 1 },
    defects: passed ? [] : [{ severity: "high", rootCause: "incompleteness", description: "too short" }],
    repairHints: passed ? [] : ["say which checks passed"],
    passed,
  });
}

/** A run that echoes, then answers, reviewed by a scripted critic; with `repaired`, once repaired first. */
const reviewedRun = (name: string, repaired = false) =>
  spec({
    name,
    prompt: "Check the service and report",
    script: [
      {
        toolCalls: [{ name: "echo", input: { text: "service is green" } }],
        usage: { inputTokens: 120, outputTokens: 30 },
      },
      ...(repaired ? [{ text: "Green.", usage: { inputTokens: 150, outputTokens: 2 } }] : []),
      { text: "The service is green.", usage: { inputTokens: 180, outputTokens: 12 } },
    ],
    verifiers: [],
    critic: {
      model: {
        provider: "scripted",
        script: [...(repaired ? [{ text: verdict(0.4) }] : []), { text: verdict(0.91) }],
      },
    },
    resources: { maxIterations: 8, maxToolCalls: 4, maxTokensBudget: 5_000 },
  });

describe("the web console on a cluster, in a real browser", () => {
  let base: string;
  let browser: Browser & AsyncDisposable;
  let context: BrowserContext;
  let page: Page;
  const shots = new Map<string, string>();
  let shotDir: string;
  const api = (path: string, init: RequestInit = {}) => fetch(new URL(path, base), init);
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  const screenshot = async (name: string): Promise<void> => {
    const file = join(shotDir, `console-${name}.png`);
    await page.screenshot({ path: file, fullPage: true });
    shots.set(name, file);
  };

  beforeAll(async () => {
    base = suite.cluster.actors.get("console")?.url ?? "";
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    shotDir = await mkdtemp(join(tmpdir(), "console-shots-"));
    browser = await launchChromium();
    // Basic auth, as a person's browser would answer the console's challenge.
    context = await browser.newContext({
      httpCredentials: { username: "alice", password: TOKEN },
      viewport: { width: 1280, height: 800 },
    });
    page = await context.newPage();
  }, 30_000);
  afterAll(async () => {
    await context?.close();
    await browser?.close();
  });

  it("a submitted run appears in the runs list, live, and commits", async () => {
    await page.goto(`${base}#/runs`);
    await page.locator("table.runs thead").waitFor();
    const { runId } = await suite.client.submit(reviewedRun("checker"));
    const row = page.locator(`tr[data-run-id="${runId}"]`);
    await row.waitFor({ timeout: 15_000 });
    await page.locator(`tr[data-run-id="${runId}"][data-status="committed"]`).waitFor({ timeout: 30_000 });
    expect(await row.locator("td").nth(1).textContent()).toBe("checker");
    // The agent filter keeps it; another agent's name leaves it out.
    await page.fill('input[name="agent"]', "nobody");
    await row.waitFor({ state: "detached" });
    await page.fill('input[name="agent"]', "checker");
    await row.waitFor();
    await page.fill('input[name="agent"]', "");
  }, 60_000);

  it("a run's page shows its tool call with its input and output, its critic verdicts scored against the rubric, and its repair", async () => {
    const { runId } = await suite.client.submit(reviewedRun("reviewer", true));
    await suite.waitFor(runId, settled, 30_000);
    await page.goto(`${base}#/runs`);
    await page.click(`tr[data-run-id="${runId}"] a`);
    await page.locator('tr[data-kind="run.committed"]').waitFor({ timeout: 15_000 });
    const call = page.locator('tr[data-kind="tool.intent"]');
    expect(await call.locator('code[data-tool="echo"]').count()).toBe(1);
    expect(await call.locator(".tool-input").textContent()).toContain("service is green");
    const done = page.locator('tr[data-kind="tool.completed"]');
    expect(await done.locator(".tool-output").textContent()).toContain("service is green");
    // The first verdict fails the rubric's minimums, a repair follows, and the second passes.
    const verdicts = page.locator('tr[data-kind="critic.verdict"]');
    expect(await verdicts.count()).toBe(2);
    expect(await verdicts.first().locator("table.scores tr.fail").count()).toBe(3);
    expect(await page.locator('tr[data-kind="repair.started"]').count()).toBe(1);
    const scores = verdicts.last().locator("table.scores");
    expect(await scores.locator('tr[data-dimension="correctness"] td').allTextContents()).toEqual([
      "correctness",
      "0.91",
      "0.80",
      "0.40",
    ]);
    expect(await scores.locator("tr.fail").count()).toBe(0);
    expect(await page.locator('[data-budget="toolCalls"]').textContent()).toContain("1 / 4");
    expect(await page.locator(".output").textContent()).toBe("The service is green.");
    await screenshot("run");
  }, 60_000);

  it("approving a waiting run from the page commits it, and the log says who approved and why", async () => {
    const { runId } = await suite.client.submit(
      spec({ name: "payer", prompt: "Pay the invoice", script: [{ text: "paid" }], requiresApproval: true }),
    );
    await suite.waitFor(runId, (s) => s.status === "awaiting_approval", 20_000);
    await page.goto(`${base}#/run/${runId}`);
    await page.locator("h1 .badge.awaiting_approval").waitFor();
    // Without the operate token the console refuses, and says why.
    await page.fill('input[name="reason"]', "looks right");
    await page.click('button[data-action="approve"]');
    await expect.poll(() => page.locator("#notice").textContent()).toContain("FORBIDDEN");
    // The name typed is the client's word: the basic auth user (alice) is who the log says acted.
    await page.fill("#operator", "someone-else");
    await page.fill("#operate-token", OPERATE);
    await page.click('#operate-login button[type="submit"]');
    await expect.poll(() => page.locator("#operate-state").textContent()).toBe("operating");
    await page.locator('button[data-action="approve"]').waitFor();
    await screenshot("approval");
    await page.fill('input[name="reason"]', "looks right");
    await page.click('button[data-action="approve"]');
    await page.locator("h1 .badge.committed").waitFor({ timeout: 20_000 });
    const decided = (await suite.audit(runId)).find((e) => e.kind === "approval.decided");
    expect(decided).toMatchObject({ reason: "looks right", data: { decision: "approve", by: "alice" } });
    expect(await page.locator('tr[data-kind="approval.decided"]').count()).toBe(1);
  }, 60_000);

  it("a run tree shows the parent and its child with their states", async () => {
    const child = spec({ name: "child", script: [{ text: "child's answer" }] });
    const { runId } = await suite.client.submit(
      spec({
        name: "parent",
        script: [
          { toolCalls: [{ name: "spawn_agent", input: { runs: [child] } }] },
          { toolCalls: [{ name: "finish", input: { answer: "done" } }] },
        ],
        tools: ["spawn_agent", "echo"],
        capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
      }),
    );
    await suite.waitFor(runId, settled, 30_000);
    const childId = `${runId}-act-1-1`;
    await page.goto(`${base}#/tree/${childId}`);
    const root = page.locator(`ul.tree > li[data-run-id="${runId}"]`);
    await root.waitFor();
    expect(await root.locator(".badge").first().textContent()).toBe("committed");
    expect(await root.locator(`li[data-run-id="${childId}"] .badge`).textContent()).toBe("committed");
    await screenshot("tree");
  }, 60_000);

  it("the cluster page shows the actors and toggles the kill switch through the supervisor, who and why recorded", async () => {
    // The runs so far, for the runs page's picture.
    await page.goto(`${base}#/runs`);
    await expect.poll(() => page.locator("table.runs tbody tr").count()).toBeGreaterThanOrEqual(4);
    await screenshot("runs");
    await page.goto(`${base}#/cluster`);
    await page.locator('[data-killswitch="off"]').waitFor({ timeout: 15_000 });
    expect(await page.locator('[data-card="workers"] li').allTextContents()).toEqual(["agent-1", "agent-2"]);
    expect(await page.locator('[data-card="critics"] li').count()).toBe(1);
    await screenshot("cluster");
    await page.fill('input[name="killswitch-reason"]', "maintenance");
    await page.click('button[data-action="killswitch"]');
    await page.locator('[data-killswitch="on"]').waitFor({ timeout: 15_000 });
    expect((await suite.bus.buckets.pool.get("killswitch"))?.json()).toMatchObject({
      active: true,
      by: "alice",
      reason: "maintenance",
    });
    await page.click('button[data-action="killswitch"]');
    await page.locator('[data-killswitch="off"]').waitFor({ timeout: 15_000 });
  }, 60_000);

  it("API: 401 without or with a wrong token, bearer and basic accepted; operating needs the operate token (403)", async () => {
    const none = await api("/api/runs");
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toMatch(/^Basic /);
    expect(await none.json()).toMatchObject({ error: { code: "UNAUTHORIZED", retryable: false } });
    expect((await api("/api/runs", { headers: bearer("wrong-token-0123456789") })).status).toBe(401);
    expect((await api("/", {})).status).toBe(401);
    expect((await api("/api/runs", { headers: bearer(TOKEN) })).status).toBe(200);
    const basic = `Basic ${Buffer.from(`bob:${TOKEN}`).toString("base64")}`;
    expect((await api("/api/runs", { headers: { authorization: basic } })).status).toBe(200);
    const body = JSON.stringify({ active: true, by: "mallory" });
    const refused = await api("/api/operate/killswitch", {
      method: "POST",
      headers: { ...bearer(TOKEN), "content-type": "application/json" },
      body,
    });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ error: { code: "FORBIDDEN" } });
    const switched = await suite.bus.buckets.pool.get("killswitch");
    expect(switched?.json<{ active: boolean }>().active ?? false).toBe(false);
  });

  it("API: no cross-site request forgery: the operate token counts only in X-Operate-Token, the body must be JSON, a cross-site request is refused", async () => {
    const body = JSON.stringify({ active: true, by: "mallory" });
    // What another site's form posts with the operator's browser: basic auth, a text/plain body.
    const forged = await api("/api/operate/killswitch", {
      method: "POST",
      headers: {
        authorization: `Basic ${Buffer.from(`alice:${OPERATE}`).toString("base64")}`,
        "content-type": "text/plain",
      },
      body,
    });
    expect(forged.status).toBeGreaterThanOrEqual(400);
    const asBearer = await api("/api/operate/killswitch", {
      method: "POST",
      headers: { ...bearer(OPERATE), "content-type": "application/json" },
      body,
    });
    expect(asBearer.status).toBe(401);
    const operator = { ...bearer(TOKEN), "x-operate-token": OPERATE };
    const plain = await api("/api/operate/killswitch", {
      method: "POST",
      headers: { ...operator, "content-type": "text/plain" },
      body,
    });
    expect(plain.status).toBe(415);
    expect(await plain.json()).toMatchObject({ error: { code: "UNSUPPORTED_MEDIA_TYPE" } });
    const crossSite = await api("/api/operate/killswitch", {
      method: "POST",
      headers: { ...operator, "content-type": "application/json", "sec-fetch-site": "cross-site" },
      body,
    });
    expect(crossSite.status).toBe(403);
    expect(await crossSite.json()).toMatchObject({ error: { code: "FORBIDDEN" } });
    const switched = await suite.bus.buckets.pool.get("killswitch");
    expect(switched?.json<{ active: boolean }>().active ?? false).toBe(false);
  });

  it("without CONSOLE_TOKEN: only loopback Host names and CONSOLE_ALLOWED_HOSTS are answered (421), and CONSOLE_MAX_FEEDS caps the live feeds (503)", async () => {
    const open = await suite.cluster.launch({
      entry: actorEntry("console"),
      name: "console-open",
      user: "console",
      env: { CONSOLE_PORT: "0", CONSOLE_ALLOWED_HOSTS: "console.test", CONSOLE_MAX_FEEDS: "1" },
    });
    const url = new URL(open.url ?? "");
    // fetch names the URL's host itself: a rebound name is sent as a browser would, by hand.
    const statusFor = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = request(
          { host: url.hostname, port: url.port, path: "/api/whoami", headers: { host } },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.once("error", reject);
        req.end();
      });
    expect(await statusFor(`127.0.0.1:${url.port}`)).toBe(200);
    expect(await statusFor(`localhost:${url.port}`)).toBe(200);
    expect(await statusFor(`console.test:${url.port}`)).toBe(200);
    expect(await statusFor(`attacker.example:${url.port}`)).toBe(421);

    const first = new AbortController();
    const feed = await fetch(new URL("/api/live/runs", url), { signal: first.signal });
    expect(feed.status).toBe(200);
    const reader = feed.body?.getReader();
    expect(new TextDecoder().decode((await reader?.read())?.value as Uint8Array | undefined)).toContain(
      "event: ready",
    );
    const full = await fetch(new URL("/api/live/runs", url));
    expect(full.status).toBe(503);
    expect(await full.json()).toMatchObject({ error: { code: "TOO_MANY_FEEDS", retryable: true } });
    first.abort();
    await expect
      .poll(async () => {
        const again = await fetch(new URL("/api/live/runs", url));
        await again.body?.cancel();
        return again.status;
      })
      .toBe(200);
  });

  it("API: an unknown run is 404 NOT_FOUND, a bad runId, filter or body 400 INVALID_INPUT; halt and resume go through the supervisor", async () => {
    const auth = bearer(TOKEN);
    const missing = await api("/api/runs/no-such-run", { headers: auth });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: "NOT_FOUND" } });
    expect((await api("/api/runs/no-such-run/tree", { headers: auth })).status).toBe(404);
    const bad = await api("/api/runs/bad%20id!", { headers: auth });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { code: "INVALID_INPUT" } });
    const filter = await api("/api/runs?status=sleeping", { headers: auth });
    expect(filter.status).toBe(400);
    expect(await filter.json()).toMatchObject({
      error: { message: expect.stringContaining("unknown status 'sleeping'") as unknown },
    });
    expect((await api("/api/nothing", { headers: auth })).status).toBe(404);

    const { runId } = await suite.client.submit(
      spec({ name: "held", script: [{ text: "ok" }], requiresApproval: true }),
    );
    await suite.waitFor(runId, (s) => s.status === "awaiting_approval", 20_000);
    const operate = { ...bearer(TOKEN), "x-operate-token": OPERATE, "content-type": "application/json" };
    const post = (verb: string, payload: unknown) =>
      api(`/api/operate/runs/${runId}/${verb}`, {
        method: "POST",
        headers: operate,
        body: JSON.stringify(payload),
      });
    const nobody = await post("halt", { by: " " });
    expect(nobody.status).toBe(400);
    expect(await nobody.json()).toMatchObject({
      error: { message: expect.stringContaining("say who acts") as unknown },
    });
    expect((await post("halt", { by: "carol", reason: "hold on" })).status).toBe(200);
    await suite.waitFor(runId, (s) => s.status === "halted", 20_000);
    expect((await post("resume", { by: "carol" })).status).toBe(200);
    await suite.waitFor(runId, (s) => s.status === "awaiting_approval", 20_000);
    const kinds = (await suite.audit(runId)).map((e) => e.kind);
    expect(kinds).toEqual(expect.arrayContaining(["run.halted", "run.resumed"]));
    // Rejecting a run that waits no more is the supervisor's refusal, passed on with its code.
    expect((await post("reject", { by: "carol", reason: "no" })).status).toBe(200);
    await suite.waitFor(runId, (s) => s.status === "failed", 20_000);
    const again = await post("approve", { by: "carol" });
    expect(again.status).toBeGreaterThanOrEqual(400);
    expect(await again.json()).toMatchObject({ error: { code: expect.any(String) as unknown } });

    // The timeline is paged: the newest `limit` events, `more` before them, or those after a seq.
    type Page = { timeline: { seq: number; kind: string }[]; more: number };
    const whole = (await (await api(`/api/runs/${runId}`, { headers: auth })).json()) as Page;
    expect(whole.more).toBe(0);
    const last2 = (await (await api(`/api/runs/${runId}?limit=2`, { headers: auth })).json()) as Page;
    expect(last2.timeline).toEqual(whole.timeline.slice(-2));
    expect(last2.more).toBe(whole.timeline.length - 2);
    const pivot = whole.timeline.at(-3)?.seq ?? 0;
    const after = (await (
      await api(`/api/runs/${runId}?afterSeq=${pivot}`, { headers: auth })
    ).json()) as Page;
    expect(after.timeline.map((e) => e.seq)).toEqual(whole.timeline.slice(-2).map((e) => e.seq));
    expect((await api(`/api/runs/${runId}?limit=0`, { headers: auth })).status).toBe(400);
  }, 60_000);

  it("refuses to start bound beyond loopback without CONSOLE_TOKEN, saying how to fix it", async () => {
    const failed = await runProcess(process.execPath, [actorEntry("console")], {
      env: { ...suite.env(), CONSOLE_HOST: "0.0.0.0", CONSOLE_PORT: "0" },
      timeout: 15_000,
    }).then(
      () => undefined,
      (err: unknown) => err as { code: number; stdout: string; stderr: string },
    );
    expect(failed?.code).toBe(1);
    const out = `${failed?.stdout ?? ""}${failed?.stderr ?? ""}`;
    expect(out).toContain("INVALID_INPUT");
    expect(out).toContain("set CONSOLE_TOKEN");
  });

  it("took a screenshot of each page (UPDATE_CONSOLE_SCREENSHOTS=1 writes them to docs/images)", async () => {
    expect([...shots.keys()].sort()).toEqual(["approval", "cluster", "run", "runs", "tree"]);
    for (const file of shots.values()) expect((await stat(file)).size).toBeGreaterThan(10_000);
    if (process.env.UPDATE_CONSOLE_SCREENSHOTS !== "1") return;
    await mkdir(IMAGES, { recursive: true });
    for (const [name, file] of shots) await copyFile(file, join(IMAGES, `console-${name}.png`));
  });
});
