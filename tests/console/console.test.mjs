// The web console end to end, in headless Chromium against `occ dev` with real OpenClaw
// gateways (started by scripts/console-e2e.sh, which sets OCC_URL and OCC_DATA_DIR):
// sign in → create an Agent with an edited USER.md → deploy → see it running → its four files
// right away (within 10 s) → edit AGENTS.md and save → reload and see it → its gateway's output
// in the Logs tab (level chip, text filter, follow with the cursor and no duplicate, download)
// → stop → see it stopped → deploy a new version → roll back to the first revision → deploy a
// version whose gateway cannot start and diagnose it → delete; a stale defaults identity shows
// the reload message; an unknown write outcome disables Save until the file is reloaded; a
// read-only user sees no enabled mutating control, is told it may not read the logs, and gets
// the API's 403 explained when it forces a control; Try it sends a message through occ to an
// Agent whose model (a local fake) gets the bound Secret as its key; the Access page creates a service
// principal, grants it the built-in viewer Role on the Namespace, removes it, disables and deletes
// it; the Accounts page creates an account, disables it (its sign-in is refused) and enables it. Screenshots of each main page go to docs/console/.

import http from 'node:http';
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const URL_BASE = process.env.OCC_URL;
const DATA = process.env.OCC_DATA_DIR;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SHOTS = process.env.OCC_CONSOLE_SCREENSHOTS || path.join(root, 'docs/console');
const FAILURES = path.join(root, 'target/console-e2e');
/** A gateway cold start on a loaded 2-core machine. */
const DEPLOY_TIMEOUT = 240_000;
/** The four workspace files of a running Agent load well within this (a stall lasted 30 s+). */
const FILES_PROMPTLY = 10_000;
/** The four workspace files and the key of their fields (`#file-<key>`, `#ws-<key>`). */
const WORKSPACE_FILES = [['AGENTS.md', 'agents-md'], ['SOUL.md', 'soul-md'], ['IDENTITY.md', 'identity-md'], ['USER.md', 'user-md']];

if (!URL_BASE || !DATA) {
  throw new Error('OCC_URL and OCC_DATA_DIR are not set: run ./scripts/console-e2e.sh');
}

const ADMIN_EMAIL = 'admin@openclaw.local';
const ADMIN_PASSWORD = fs.readFileSync(path.join(DATA, 'admin-password'), 'utf8').trim();
const SERVICE_KEY = JSON.parse(fs.readFileSync(path.join(DATA, 'admin-service-key.json'), 'utf8')).data.key;
const VIEWER = { email: 'viewer@openclaw.local', password: 'viewer password 1234', name: 'Read-only viewer' };

const USER_MD = '# USER.md\n\nAda Lovelace. Metric units, short answers.\n';
const AGENTS_MARK = `Edited in the console ${Date.now()}.`;
const REQUEST_ID = /req_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;

/** The API with the bootstrap service key (setup only: the console itself never has a key). */
async function keyApi(method, p) {
  const r = await fetch(URL_BASE + p, { method, headers: { 'x-api-key': SERVICE_KEY } });
  return { status: r.status, body: await r.json() };
}

/** The API from inside a signed-in page: the session cookie and the browser's own Origin. */
async function pageApi(page, method, p, body) {
  return page.evaluate(async ({ method, p, body }) => {
    const init = { method, headers: {} };
    if (body !== undefined) {
      init.headers['content-type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const r = await fetch(p, init);
    return { status: r.status, body: await r.json().catch(() => null) };
  }, { method, p, body });
}

async function shot(page, name, options = {}) {
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), ...options });
}

async function confirmDialog(page, label) {
  const button = page.locator('dialog[open] button[value="confirm"]');
  await button.waitFor();
  assert.equal((await button.textContent()).trim(), label);
  await button.click();
}

async function state(page) {
  return page.locator('#agent-state [data-state]').getAttribute('data-state');
}

async function waitState(page, wanted, timeout) {
  await page.locator(`#agent-state [data-state="${wanted}"]`).waitFor({ timeout });
}

/** Every control marked mutating on the page is disabled. */
async function enabledMutating(page) {
  return page.$$eval('[data-mutating]', (els) => els.filter((e) => !e.disabled).map((e) => e.id || e.textContent.trim()));
}

async function alertText(page) {
  const alert = page.locator('#alert');
  await alert.waitFor({ state: 'visible' });
  return alert.innerText();
}

/**
 * A local OpenAI-compatible model for the Try it step: streamed chat completions answering
 * `reply`, recording each request's `Authorization` header. Resolves `{url, seen, close}`.
 */
async function fakeModel(reply) {
  const seen = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      seen.push({ path: req.url, authorization: req.headers.authorization || null });
      if (req.method === 'GET' && req.url === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: [{ id: 'fake-model', object: 'model' }, { id: 'fake-model-large', object: 'model' }] }));
        return;
      }
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'unknown route', type: 'not_found', code: 'not_found' } }));
        return;
      }
      const model = (JSON.parse(body || '{}').model) || 'fake-model';
      const chunk = (delta, finish) => ({ id: 'chatcmpl-console', object: 'chat.completion.chunk', created: 0, model,
        choices: [{ index: 0, delta, finish_reason: finish }] });
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const events = [chunk({ role: 'assistant', content: '' }, null)];
      for (const word of reply.split(/(?<= )/)) events.push(chunk({ content: word }, null));
      events.push({ ...chunk({}, 'stop'), usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } });
      for (const e of events) res.write(`data: ${JSON.stringify(e)}\n\n`);
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}/v1`, seen, close: () => server.close() };
}

test('the web console, end to end', { timeout: 15 * 60_000 }, async (t) => {
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--disable-dev-shm-usage'] });
  t.after(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  let current = 'setup';
  let ns;
  let agentId;
  let agentUrl;
  let talker = null;

  let failed = null;
  /** A step: on failure, a screenshot and the page's alert for the log; later steps are skipped. */
  async function step(name, fn) {
    if (failed) {
      await t.test(name, { skip: `the step “${failed}” failed` }, () => {});
      return;
    }
    await t.test(name, async () => {
      current = name;
      try {
        await fn();
      } catch (e) {
        failed = name;
        fs.mkdirSync(FAILURES, { recursive: true });
        const file = path.join(FAILURES, `${name.replace(/[^a-z0-9]+/gi, '-')}.png`);
        await page.screenshot({ path: file, fullPage: true }).catch(() => {});
        const alert = await page.locator('#alert').innerText().catch(() => '');
        const status = await page.locator('#status').innerText().catch(() => '');
        e.message += `\n  page: ${page.url()}\n  alert: ${alert}\n  status: ${status}\n  screenshot: ${file}`;
        throw e;
      }
    });
  }

  await step('the default Namespace is ready', async () => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const { body } = await keyApi('GET', '/namespaces');
      const found = body.data.find((n) => n.name === 'default');
      if (found && found.status === 'ready') {
        ns = found.id;
        break;
      }
      assert.ok(Date.now() < deadline, 'default never became ready');
      await new Promise((r) => setTimeout(r, 250));
    }
  });

  await step('sign in', async () => {
    await page.goto(`${URL_BASE}/console/`);
    await page.locator('#sign-in-email').waitFor();
    // signed out: no navigation, no Namespace selector
    assert.equal(await page.locator('#nav').isVisible(), false);
    await shot(page, 'sign-in');
    // a wrong password is refused with the API's code and request id
    await page.fill('#sign-in-email', ADMIN_EMAIL);
    await page.fill('#sign-in-password', 'not the password at all');
    await page.click('#sign-in-submit');
    const refused = await alertText(page);
    assert.match(refused, /UNAUTHENTICATED/);
    assert.match(refused, REQUEST_ID);
    await page.fill('#sign-in-password', ADMIN_PASSWORD);
    await page.click('#sign-in-submit');
    await page.locator('#create-agent').waitFor();
    assert.match(page.url(), new RegExp(`/console/agents\\?namespace=${ns}$`));
    assert.equal(await page.locator('#account-email').textContent(), ADMIN_EMAIL);
    // nothing of the session is kept by the console itself
    const stored = await page.evaluate(() => localStorage.length + sessionStorage.length);
    assert.equal(stored, 0);
    const cookies = await context.cookies();
    assert.ok(cookies.every((c) => c.httpOnly), 'the session cookie is HttpOnly');
  });

  await step('create form: a Configuration validation error is shown at the editor', async () => {
    await page.click('#create-agent');
    await page.locator('#create-agent-form').waitFor();
    assert.match(page.url(), /\/console\/agents\/new\?namespace=ns_/);
    // no Configuration in use yet: the JSON editor is the default choice
    assert.equal(await page.isChecked('#configuration-new'), true);
    // the four textareas hold the stock files, with the defaults identity
    const defaults = (await pageApi(page, 'GET', `/namespaces/${ns}/workspace-defaults`)).body.data;
    for (const [name, key] of WORKSPACE_FILES) {
      assert.equal(await page.inputValue(`#file-${key}`), defaults.files[name], name);
    }
    assert.equal(await page.inputValue('#workspace-defaults-id'), defaults.id);
    await page.fill('#agent-name', 'hello');
    await page.fill('#file-user-md', USER_MD);
    await shot(page, 'create-agent', { fullPage: true });
    await page.fill('#configuration-json', JSON.stringify({ models: { providers: { custom: { baseUrl: 'ftp://nowhere' } } } }, null, 2));
    await page.click('#create-agent-submit');
    const problem = page.locator('#configuration-json-problems li');
    await problem.first().waitFor();
    assert.match(await problem.first().innerText(), /\/models\/providers\/custom\/baseUrl\s+INVALID_VALUE/);
    assert.equal(await page.getAttribute('#configuration-json', 'aria-invalid'), 'true');
    const alert = await alertText(page);
    assert.match(alert, /INVALID_REQUEST/);
    assert.match(alert, REQUEST_ID);
    // the problem selects its place in the editor
    await problem.first().locator('button').click();
    const selected = await page.$eval('#configuration-json', (el) => el.value.slice(el.selectionStart, el.selectionEnd));
    assert.equal(selected, '"baseUrl"');
    // invalid JSON is caught before anything is sent
    await page.fill('#configuration-json', '{"agents": }');
    await page.click('#create-agent-submit');
    await page.locator('#configuration-json-problems li', { hasText: 'INVALID_JSON' }).waitFor();
  });

  await step('a stale defaults identity shows the reload message', async () => {
    await page.fill('#configuration-json', JSON.stringify({ agents: { defaults: { model: { primary: 'openai/gpt-5' } } } }, null, 2));
    const original = await page.inputValue('#workspace-defaults-id');
    // the form was rendered with stock files occ no longer installs
    await page.$eval('#workspace-defaults-id', (el) => { el.value = '0'.repeat(64); });
    await page.fill('#file-user-md', USER_MD);
    await page.click('#create-agent-submit');
    const stale = page.locator('#defaults-stale');
    await stale.waitFor({ state: 'visible' });
    assert.match(await stale.innerText(), /Reload the form’s stock files and submit again/);
    const alert = await alertText(page);
    assert.match(alert, /RESOURCE_CONFLICT/);
    assert.match(alert, /reload/i);
    assert.match(alert, REQUEST_ID);
    // the Configuration was created on the way: the form now uses it instead of a second one
    assert.equal(await page.isChecked('#configuration-existing'), true);
    assert.match(await page.inputValue('#configuration-select'), /^cfg_/);
    await page.click('#reload-defaults');
    await stale.waitFor({ state: 'hidden' });
    assert.equal(await page.inputValue('#workspace-defaults-id'), original);
    assert.notEqual(await page.inputValue('#file-user-md'), USER_MD, 'reloading replaced the edits');
  });

  await step('create an Agent with an edited USER.md', async () => {
    await page.fill('#file-user-md', USER_MD);
    const created = page.waitForResponse((r) => r.url().endsWith(`/namespaces/${ns}/agents`) && r.request().method() === 'POST');
    await page.click('#create-agent-submit');
    const response = await created;
    assert.equal(response.status(), 201);
    // the browser sent the exact origin (the API's CSRF rule), and LF newlines
    assert.equal((await response.request().allHeaders()).origin, URL_BASE);
    const sent = JSON.parse(response.request().postData());
    assert.equal(sent.initialWorkspaceFiles['USER.md'], USER_MD);
    assert.deepEqual(Object.keys(sent.initialWorkspaceFiles).sort(), ['AGENTS.md', 'IDENTITY.md', 'SOUL.md', 'USER.md']);
    await page.waitForURL(/\/console\/agents\/agt_[0-9a-f-]+\?/);
    agentId = page.url().match(/agt_[0-9a-f-]+/)[0];
    agentUrl = `${URL_BASE}/console/agents/${agentId}?namespace=${ns}`;
    await waitState(page, 'draft');
    assert.equal(await page.getAttribute('#tab-configuration', 'aria-selected'), 'true');
  });

  await step('deploy, watch the progress, see it running', async () => {
    await page.click('#deploy');
    // progress shows up and updates by itself (no reload, no click)
    await page.locator('#deploy-progress').waitFor({ state: 'visible' });
    await waitState(page, 'deploying', 10_000);
    await waitState(page, 'running', DEPLOY_TIMEOUT);
    assert.equal(await page.locator('#deploy-status').textContent(), 'Succeeded');
    await page.locator('#status', { hasText: 'hello is running revision #1.' }).waitFor();
    assert.match(await page.locator('#selected-revision').textContent(), /^#1 \(generation 1\)/);
    await shot(page, 'agent-configuration', { fullPage: true });
  });

  await step('the Workspace files tab right after the deploy shows the four files at once', async () => {
    // Issue 14: opened right after "Succeeded", the tab showed "Loading…" for 30 s and more.
    // Every file GET the page sends is followed until it finishes, so a stall names the
    // requests still pending.
    const sent = new Map();
    const track = (r) => r.url().includes('/workspace/files/') && sent.set(r, { at: Date.now(), done: null });
    const finish = (outcome) => (r) => {
      const entry = sent.get(r);
      if (entry) entry.done = `${outcome} after ${Date.now() - entry.at} ms`;
    };
    const finished = finish('finished');
    const failed = finish('failed');
    page.on('request', track);
    page.on('requestfinished', finished);
    page.on('requestfailed', failed);
    const clicked = Date.now();
    try {
      await page.click('#tab-files');
      for (const [, key] of WORKSPACE_FILES) {
        const left = Math.max(1, FILES_PROMPTLY - (Date.now() - clicked));
        await page.locator(`#ws-${key}-status`, { hasText: 'Loaded' }).waitFor({ timeout: left });
      }
    } catch (e) {
      const requests = [...sent].map(([r, { at, done }]) => `${r.url().split('/').pop()}: ${done || `pending for ${Date.now() - at} ms`}`);
      e.message += `\n  file requests: ${requests.join('; ') || 'none sent'}`;
      throw e;
    } finally {
      page.off('request', track);
      page.off('requestfinished', finished);
      page.off('requestfailed', failed);
    }
    assert.equal(sent.size, WORKSPACE_FILES.length, 'one GET per file');
    assert.equal(await page.inputValue('#ws-user-md'), USER_MD, 'USER.md as created in the form');
  });

  await step('workspace files: AGENTS.md edited, saved and reloaded', async () => {
    await page.locator('#save-agents-md:not([disabled])').waitFor({ timeout: 60_000 });
    const before = await page.inputValue('#ws-agents-md');
    await page.fill('#ws-agents-md', `${before}\n${AGENTS_MARK}\n`);
    await page.click('#save-agents-md');
    await page.locator('#ws-agents-md-status[data-state="saved"]').waitFor({ timeout: 60_000 });
    assert.match(await page.locator('#ws-agents-md-status').textContent(), /Saved \(\d+ bytes\)/);
    await page.reload();
    await page.locator('#save-agents-md:not([disabled])').waitFor({ timeout: 60_000 });
    assert.ok((await page.inputValue('#ws-agents-md')).includes(AGENTS_MARK), 'the saved text is read back after a reload');
    assert.equal(await page.getAttribute('#tab-files', 'aria-selected'), 'true', 'the tab is kept in the URL');
    await shot(page, 'agent-workspace-files', { fullPage: true });
  });

  await step('an unknown outcome disables Save until the file is reloaded; nothing is retried', async () => {
    let puts = 0;
    const route = '**/workspace/files/SOUL.md';
    await page.route(route, async (r) => {
      if (r.request().method() !== 'PUT') return r.continue();
      puts += 1;
      return r.fulfill({
        status: 503,
        contentType: 'application/json; charset=utf-8',
        headers: { 'x-request-id': 'req_00000000-0000-4000-8000-000000000001' },
        body: JSON.stringify({
          error: { code: 'UNKNOWN_OUTCOME', message: 'The gateway did not answer after the write was sent' },
          meta: { requestId: 'req_00000000-0000-4000-8000-000000000001' },
        }),
      });
    });
    await page.fill('#ws-soul-md', '# SOUL.md\n\nCalm.\n');
    await page.click('#save-soul-md');
    await page.locator('#ws-soul-md-status[data-state="unknown"]').waitFor();
    assert.equal(await page.isDisabled('#save-soul-md'), true);
    assert.match(await page.locator('#ws-soul-md-status').textContent(), /Reload the file/);
    const alert = await alertText(page);
    assert.match(alert, /UNKNOWN_OUTCOME/);
    assert.match(alert, /req_00000000-0000-4000-8000-000000000001/);
    await page.waitForTimeout(1500);
    assert.equal(puts, 1, 'the uncertain write was not retried');
    await page.unroute(route);
    await page.click('#reload-soul-md');
    await page.locator('#save-soul-md:not([disabled])').waitFor();
    assert.ok(!(await page.inputValue('#ws-soul-md')).includes('Calm.'), 'reload shows what the file really holds');
  });

  await step('the Logs tab: gateway lines, a level chip, the text filter, follow without duplicates, download', async () => {
    const revisions = (await pageApi(page, 'GET', `/namespaces/${ns}/agents/${agentId}/revisions`)).body.data;
    const reads = []; // every JSON page of the logs route, in the order answered
    const onResponse = (r) => {
      if (!r.url().includes('/runtime/logs?') || r.url().includes('download=true')) return;
      reads.push({ url: new URL(r.url()), status: r.status(), body: r.json().catch(() => null) });
    };
    const logsPage = (test) => page.waitForResponse((r) => r.url().includes('/runtime/logs?') && test(new URL(r.url())));
    /** Does `action`, and resolves the records of the new view it starts, once drawn. */
    const newView = async (action, test) => {
      const [response] = await Promise.all([logsPage(test), typeof action === 'string' ? page.click(action) : action()]);
      assert.equal(response.status(), 200);
      const { records } = (await response.json()).data;
      await page.waitForFunction((n) => !document.querySelector('#logs-output .loading')
        && document.querySelectorAll('#logs-output > div').length === n, records.length);
      return records;
    };
    page.on('response', onResponse);
    try {
      // a deep link to the tab (which also clears the earlier step's alert)
      const records = await newView(() => page.goto(`${agentUrl}&tab=logs`), (u) => u.searchParams.get('tailLines') === '200');
      assert.equal(await page.getAttribute('#tab-logs', 'aria-selected'), 'true');
      assert.ok(records.some((r) => r.type === 'line'), 'the running gateway has written lines');
      assert.equal(await page.inputValue('#logs-revision'), revisions[0].id, 'the active revision by default');

      // a level chip asks occ for that level and up (lines of no stated level stay)
      await newView('#logs-level-error', (u) => u.searchParams.get('minLevel') === 'error');
      assert.equal(await page.getAttribute('#logs-level-error', 'aria-pressed'), 'true');
      assert.equal(await page.getAttribute('#logs-level-all', 'aria-pressed'), 'false');
      const levels = await page.$$eval('#logs-output .log-line', (rows) => rows.map((r) => r.dataset.level));
      assert.ok(levels.every((l) => l === 'error' || l === 'unknown'), `levels shown: ${[...new Set(levels)]}`);
      await newView('#logs-level-all', (u) => !u.searchParams.has('minLevel') && !u.searchParams.has('cursor'));

      // the text filter hides the rows that do not contain it, on the client
      const texts = await page.$$eval('#logs-output .log-line', (rows) => rows.map((r) => r.textContent));
      const wanted = texts[texts.length - 1].slice(-12).trim();
      const before = reads.length;
      await page.fill('#logs-filter', wanted);
      const visible = await page.$$eval('#logs-output .log-line:not([hidden])', (rows) => rows.map((r) => r.textContent));
      assert.ok(visible.length >= 1, 'the row the filter came from shows');
      assert.ok(visible.every((x) => x.toLowerCase().includes(wanted.toLowerCase())), `every row shown contains “${wanted}”`);
      assert.match(await page.locator('#logs-status').textContent(), /matching/);
      await page.fill('#logs-filter', 'no line says this 9f2c');
      assert.equal(await page.locator('#logs-output .log-line:not([hidden])').count(), 0);
      await page.fill('#logs-filter', '');
      assert.equal(reads.length, before, 'filtering asks occ for nothing');

      // follow: each poll resumes the previous page's cursor, and each record shows once
      const viewStart = reads.length - 1;
      await page.click('#logs-follow');
      assert.equal(await page.getAttribute('#logs-follow', 'aria-pressed'), 'true');
      // the gateway writes a line (appended to its captured output, as its own writes are)
      const marker = `console e2e follow marker ${Date.now()}`;
      fs.appendFileSync(path.join(DATA, 'compute/namespaces', ns, 'agents', agentId, 'logs', revisions[0].id, 'gateway.log'), `${marker}\n`);
      const markerRow = page.locator('#logs-output .log-line', { hasText: marker });
      await markerRow.waitFor({ timeout: 20_000 });
      assert.ok(await page.$eval('#logs-output', (el) => el.scrollHeight - el.scrollTop - el.clientHeight < 24),
        'following keeps the newest line in view');
      const deadline = Date.now() + 20_000;
      while (reads.length - viewStart < 4) {
        assert.ok(Date.now() < deadline, `only ${reads.length - viewStart - 1} follow polls in 20 s`);
        await page.waitForTimeout(250);
      }
      await page.click('#logs-follow');
      assert.equal(await page.getAttribute('#logs-follow', 'aria-pressed'), 'false');
      await page.waitForTimeout(1500); // a poll already sent is still drawn
      const view = reads.slice(viewStart);
      const bodies = await Promise.all(view.map((r) => r.body));
      for (let i = 1; i < view.length; i += 1) {
        assert.equal(view[i].status, 200, JSON.stringify(bodies[i]));
        const previous = bodies.slice(0, i).reverse().find((b) => b.data.cursor).data.cursor;
        assert.equal(view[i].url.searchParams.get('cursor'), previous, `poll ${i} resumes the cursor of the page before`);
        assert.equal(view[i].url.searchParams.get('tailLines'), null, 'a poll asks for no tail');
      }
      const delivered = bodies.reduce((n, b) => n + b.data.records.length, 0);
      assert.equal(await page.locator('#logs-output > div').count(), delivered,
        'every record delivered is one row: nothing twice, nothing left out');
      assert.equal(await markerRow.count(), 1, 'the new line shows once, however many polls followed');
      const followed = bodies.slice(1).reduce((n, b) => n + b.data.records.length, 0);
      t.diagnostic(`follow: ${view.length - 1} polls delivered ${followed} new records`);
      await shot(page, 'agent-logs', { fullPage: true });

      // leaving the tab stops the polls
      await page.click('#logs-follow');
      await page.click('#tab-configuration');
      const left = reads.length;
      await page.waitForTimeout(4500);
      assert.equal(reads.length, left, 'no poll after the tab was left');

      // download: the same records as a text file
      await newView('#tab-logs', (u) => u.searchParams.has('tailLines'));
      const [download] = await Promise.all([page.waitForEvent('download'), page.click('#logs-download')]);
      assert.equal(download.suggestedFilename(), `${agentId}-${revisions[0].id}-gateway.log`);
      const text = fs.readFileSync(await download.path(), 'utf8');
      assert.ok(text.length > 0, 'the download is not empty');
      assert.ok(text.endsWith('\n'));
    } finally {
      page.off('response', onResponse);
    }
  });

  await step('a read-only user sees no enabled mutating control and gets the 403 explained', async () => {
    // the administrator grants read on the Namespace and on this Agent, its Configuration and
    // its revisions (exact bindings, as the Namespace IAM API makes them)
    const account = await pageApi(page, 'POST', '/api/auth/accounts', VIEWER);
    assert.equal(account.status, 201, JSON.stringify(account.body));
    const role = await pageApi(page, 'POST', `/namespaces/${ns}/iam/roles`, {
      name: 'console-viewer',
      permissions: ['namespace', 'agent', 'agent_revision', 'configuration'].map((k) => ({ action: 'read', resourceKind: k })),
    });
    assert.equal(role.status, 201, JSON.stringify(role.body));
    const agent = (await pageApi(page, 'GET', `/namespaces/${ns}/agents/${agentId}`)).body.data;
    const revisions = (await pageApi(page, 'GET', `/namespaces/${ns}/agents/${agentId}/revisions`)).body.data;
    const targets = [['namespace', ns], ['agent', agentId], ['configuration', agent.configurationId],
      ...revisions.map((r) => ['agent_revision', r.id])];
    for (const [kind, id] of targets) {
      const b = await pageApi(page, 'POST', `/namespaces/${ns}/iam/access-bindings`, {
        subjectKind: 'identity', subjectId: account.body.data.principalId, roleId: role.body.data.id, resourceKind: kind, resourceId: id,
      });
      assert.equal(b.status, 201, JSON.stringify(b.body));
    }

    const viewerContext = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const viewer = await viewerContext.newPage();
    try {
      await viewer.goto(`${URL_BASE}/console/login`);
      await viewer.fill('#sign-in-email', VIEWER.email);
      await viewer.fill('#sign-in-password', VIEWER.password);
      await viewer.click('#sign-in-submit');
      await viewer.locator('#agents-table').waitFor();
      assert.equal(await viewer.locator('#agents-table tbody tr').count(), 1);
      assert.deepEqual(await enabledMutating(viewer), [], 'Agents list');
      await viewer.locator(`#agents-table a`).first().click();
      await waitState(viewer, 'running');
      assert.equal(await viewer.locator('#view-only').isVisible(), true);
      let logReads = 0;
      viewer.on('request', (r) => { if (/\/deployments\/[^/]+\/runtime/.test(r.url())) logReads += 1; });
      for (const tab of ['configuration', 'activity', 'files', 'logs']) {
        await viewer.click(`#tab-${tab}`);
        await viewer.locator(`#panel-${tab} .loading`).waitFor({ state: 'detached' });
        if (tab === 'logs') {
          // without read_logs the tab says so, its controls are disabled and occ is not asked
          await viewer.locator('#logs-denied').waitFor();
          assert.match(await viewer.locator('#logs-denied').textContent(), /read_logs/);
          assert.equal(await viewer.isDisabled('#logs-follow'), true);
          assert.equal(await viewer.isDisabled('#logs-download'), true);
          assert.equal(logReads, 0, 'no runtime or log request was sent');
        }
        if (tab === 'files') {
          await viewer.locator('#reload-user-md:not([disabled])').waitFor({ timeout: 60_000 });
          assert.equal(await viewer.inputValue('#ws-user-md'), USER_MD, 'the viewer reads the files');
          assert.equal(await viewer.getAttribute('#ws-user-md', 'readonly'), '');
        }
        assert.deepEqual(await enabledMutating(viewer), [], `Agent page, ${tab} tab`);
      }
      await viewer.goto(`${URL_BASE}/console/agents/new?namespace=${ns}`);
      await viewer.locator('#create-agent-form').waitFor();
      assert.deepEqual(await enabledMutating(viewer), [], 'Create Agent');
      await viewer.goto(`${URL_BASE}/console/namespaces?namespace=${ns}`);
      await viewer.locator('#namespaces-table').waitFor();
      assert.deepEqual(await enabledMutating(viewer), [], 'Namespaces');

      // forcing a control anyway: the API refuses and the console explains it
      await viewer.goto(`${agentUrl}&tab=configuration`);
      await waitState(viewer, 'running');
      await viewer.$eval('#stop-agent', (el) => { el.disabled = false; });
      await viewer.click('#stop-agent');
      await confirmDialog(viewer, 'Stop Agent');
      const refused = await alertText(viewer);
      assert.match(refused, /FORBIDDEN/);
      assert.match(refused, /HTTP 403/);
      assert.match(refused, /not allowed to do this/);
      assert.match(refused, REQUEST_ID);
      await waitState(viewer, 'running');
    } finally {
      await viewerContext.close();
    }
  });

  await step('stop with confirmation, then see it stopped', async () => {
    await page.goto(`${agentUrl}&tab=configuration`);
    await waitState(page, 'running');
    await page.click('#stop-agent');
    await confirmDialog(page, 'Stop Agent');
    await page.locator('#desired-state', { hasText: 'stopped' }).waitFor();
    const deadline = Date.now() + 120_000;
    while ((await state(page)) !== 'stopped') {
      assert.ok(Date.now() < deadline, `still ${await state(page)}`);
      await page.click('#refresh-stop');
      await page.waitForTimeout(1000);
    }
    await page.click('#refresh-stop');
    await page.locator('#status', { hasText: 'selected revision: none' }).waitFor();
    assert.equal(await page.locator('#selected-revision').textContent(), 'none');
    assert.equal(await page.isDisabled('#stop-agent'), true);
  });

  await step('resume: Create new version → Deploy new version', async () => {
    // the tabs work with the keyboard
    await page.focus('#tab-configuration');
    await page.keyboard.press('ArrowRight');
    assert.equal(await page.getAttribute('#tab-activity', 'aria-selected'), 'true');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'tab-activity');
    await page.keyboard.press('ArrowLeft');
    assert.equal(await page.getAttribute('#tab-configuration', 'aria-selected'), 'true');

    await page.locator('#create-version').click();
    await page.fill('#configuration-editor', JSON.stringify({ agents: { defaults: { model: { primary: 'openai/gpt-5-mini' } } } }, null, 2));
    await page.click('#deploy');
    await page.locator('#configuration-generation', { hasText: '2' }).waitFor();
    await waitState(page, 'running', DEPLOY_TIMEOUT);
    assert.match(await page.locator('#selected-revision').textContent(), /^#2 \(generation 2\)/);
    assert.match(await page.locator('#configuration-document').textContent(), /gpt-5-mini/);

    await page.click('#tab-activity');
    const rows = page.locator('#activity-table tbody tr');
    await rows.first().waitFor();
    assert.deepEqual(await rows.evaluateAll((trs) => trs.map((tr) => [tr.dataset.revision, tr.dataset.status])),
      [['2', 'succeeded'], ['1', 'succeeded']], 'newest first');
    // the edit survived the stop and the redeploy
    const file = await pageApi(page, 'GET', `/namespaces/${ns}/agents/${agentId}/workspace/files/AGENTS.md`);
    assert.ok(file.body.data.content.includes(AGENTS_MARK));
  });

  await step('roll back to revision 1 from the Deployment activity tab, with confirmation', async () => {
    // the active revision offers no rollback; revision 1 does
    assert.equal(await page.isDisabled('#rollback-2'), true);
    await page.click('#rollback-1');
    await confirmDialog(page, 'Roll back');
    await page.locator('#selected-revision', { hasText: '#3 (generation 1)' }).waitFor({ timeout: DEPLOY_TIMEOUT });
    await waitState(page, 'running', DEPLOY_TIMEOUT);
    await page.locator('#activity-table tbody tr[data-revision="3"][data-status="succeeded"]').waitFor();
    const rows = page.locator('#activity-table tbody tr');
    assert.deepEqual(await rows.evaluateAll((trs) => trs.map((tr) => [tr.dataset.revision, tr.dataset.status])),
      [['3', 'succeeded'], ['2', 'succeeded'], ['1', 'succeeded']]);
    assert.match(await rows.first().textContent(), /rolled back to #1/);
    assert.equal(await page.isDisabled('#rollback-3'), true);
    assert.equal(await page.isDisabled('#rollback-2'), false);
    // revision 3 froze revision 1's document, not the Configuration's generation 2
    const revisions = (await pageApi(page, 'GET', `/namespaces/${ns}/agents/${agentId}/revisions`)).body.data;
    const byNumber = (n) => revisions.find((r) => r.revision === n);
    assert.equal(byNumber(3).redeployedFromRevisionId, byNumber(1).id);
    assert.deepEqual(byNumber(3).configuration, byNumber(1).configuration);
    assert.notDeepEqual(byNumber(3).configuration, byNumber(2).configuration);
    await shot(page, 'agent-deployment-activity', { fullPage: true });
    // live workspace edits survive a rollback too
    const file = await pageApi(page, 'GET', `/namespaces/${ns}/agents/${agentId}/workspace/files/AGENTS.md`);
    assert.ok(file.body.data.content.includes(AGENTS_MARK));
  });

  await step('Agents list, and the console at 390 px wide', async () => {
    await page.goto(`${URL_BASE}/console/agents?namespace=${ns}`);
    await page.locator(`#agents-table tr[data-agent="${agentId}"] [data-state="running"]`).waitFor();
    await shot(page, 'agents');
    await page.setViewportSize({ width: 390, height: 844 });
    for (const url of [`${URL_BASE}/console/agents?namespace=${ns}`, `${agentUrl}&tab=files`, `${agentUrl}&tab=logs`, `${URL_BASE}/console/agents/new?namespace=${ns}`]) {
      await page.goto(url);
      await page.locator('#main h1').waitFor();
      await page.waitForLoadState('networkidle');
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 390, `${url}: no horizontal scroll (content is ${width} px wide)`);
    }
    await page.goto(`${agentUrl}&tab=configuration`);
    await waitState(page, 'running');
    await shot(page, 'agent-390px', { fullPage: true });
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  await step('Namespaces: create one, see it ready, delete it', async () => {
    await page.goto(`${URL_BASE}/console/namespaces?namespace=${ns}`);
    await page.fill('#namespace-name', 'console-e2e');
    await page.click('#create-namespace');
    const row = page.locator('#namespaces-table tr[data-name="console-e2e"]');
    await row.waitFor();
    await page.locator('#namespaces-table tr[data-name="console-e2e"][data-status="ready"]').waitFor({ timeout: 60_000 });
    // the selector offers it too, after the next navigation
    await shot(page, 'namespaces');
    await page.click('#delete-namespace-console-e2e');
    await confirmDialog(page, 'Delete Namespace');
    await page.locator('#status', { hasText: 'Deleting Namespace console-e2e' }).waitFor();
    await page.waitForFunction(() => {
      const tr = document.querySelector('#namespaces-table tr[data-name="console-e2e"]');
      return !tr || tr.dataset.status === 'deleting';
    }, null, { timeout: 60_000 });
  });

  await step('Connections: save one (its key a Secret, never shown), a refused one leaves no Secret, delete it', async () => {
    await page.goto(`${URL_BASE}/console/connections?namespace=${ns}`);
    await page.locator('#create-connection-heading').waitFor();
    await page.fill('#connection-name', 'local-model');
    await page.selectOption('#connection-type', 'openai');
    await page.fill('#connection-base-url', 'http://127.0.0.1:9/v1');
    await page.fill('#connection-key', 'sk-console-connection-0123');
    await page.click('#create-connection');
    const row = page.locator('#connections-table tr[data-name="local-model"]');
    await row.waitFor();
    assert.ok((await row.textContent()).includes('http://127.0.0.1:9/v1'));
    assert.ok(!(await page.content()).includes('sk-console-connection'), 'the key is never shown');
    await shot(page, 'connections');
    const source = (await pageApi(page, 'GET', `/namespaces/${ns}/credential-sources`)).body.data
      .find((c) => c.name === 'local-model');
    const secretId = source.secrets.api_key.id;
    // refused (the base URL is not http): the error shows at the field, the Secret goes again
    await page.fill('#connection-name', 'refused-connection');
    await page.fill('#connection-base-url', 'ftp://nowhere');
    await page.fill('#connection-key', 'sk-refused-0123');
    await page.click('#create-connection');
    await page.locator('#alert', { hasText: 'Saving the connection' }).waitFor();
    const secrets = (await pageApi(page, 'GET', `/namespaces/${ns}/secrets`)).body.data.map((x) => x.name);
    assert.ok(!secrets.includes('refused-connection-api-key'), `no Secret left behind: ${secrets}`);
    await page.click('#delete-connection-local-model');
    await confirmDialog(page, 'Delete connection');
    await row.waitFor({ state: 'detached' });
    await pageApi(page, 'DELETE', `/namespaces/${ns}/secrets/${secretId}`);
  });

  await step('Access: a service principal gets the built-in viewer Role on the whole Namespace, then loses it', async () => {
    await page.goto(`${URL_BASE}/console/access?namespace=${ns}`);
    await page.locator('#grant-heading').waitFor();
    await page.fill('#principal-name', 'console-ci');
    await page.click('#create-principal');
    const row = page.locator('#service-principals-table tr[data-name="console-ci"]');
    await row.waitFor();
    const principal = await row.getAttribute('data-principal');
    assert.equal(await page.inputValue('#grant-subject'), principal, 'the new principal is offered for a grant');
    const roles = await page.locator('#grant-role option').allTextContents();
    assert.deepEqual(roles.slice(0, 3), ['viewer', 'operator', 'admin'], 'the built-in Roles come first');
    await page.selectOption('#grant-role', { label: 'viewer' });
    await page.click('#grant-role-button');
    const grant = page.locator(`#access-grants-table tr[data-subject="${principal}"][data-role="viewer"]`);
    await grant.waitFor();
    // the principal's key now reads every Agent of the Namespace
    const issued = await fetch(`${URL_BASE}/api/auth/service-keys`, {
      method: 'POST',
      headers: { 'x-api-key': SERVICE_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ servicePrincipalId: principal, namespaceId: ns, name: 'console-ci' }),
    });
    assert.equal(issued.status, 201);
    const ciKey = (await issued.json()).data.key;
    const asCi = async () => (await fetch(`${URL_BASE}/namespaces/${ns}/agents`, { headers: { 'x-api-key': ciKey } })).status;
    assert.equal(await asCi(), 200);
    await page.evaluate(() => window.scrollTo(0, 0));
    await shot(page, 'access', { fullPage: true });
    await grant.locator('button', { hasText: 'Remove' }).click();
    await confirmDialog(page, 'Remove');
    await grant.waitFor({ state: 'detached' });
    assert.equal(await asCi(), 403, 'without the Role the key reads nothing');
    await row.locator('button', { hasText: 'Disable' }).click();
    await page.locator('#service-principals-table tr[data-name="console-ci"] .badge', { hasText: 'disabled' }).waitFor();
    assert.equal(await asCi(), 401, 'a disabled principal\'s key is refused');
    await page.locator('#service-principals-table tr[data-name="console-ci"] button', { hasText: 'Delete' }).click();
    await confirmDialog(page, 'Delete service principal');
    await row.waitFor({ state: 'detached' });
  });

  await step('Accounts: create one, disable it (its sign-in is refused), enable it', async () => {
    const TEAMMATE = { email: 'teammate@openclaw.local', password: 'teammate password 1234' };
    await page.goto(`${URL_BASE}/console/accounts?namespace=${ns}`);
    await page.locator('#accounts-table').waitFor();
    await page.locator(`#accounts-table tr[data-email="${ADMIN_EMAIL}"]`, { hasText: '(you)' }).waitFor();
    await page.fill('#account-email-input', TEAMMATE.email);
    await page.fill('#account-password', TEAMMATE.password);
    await page.click('#create-account');
    const row = page.locator(`#accounts-table tr[data-email="${TEAMMATE.email}"]`);
    await row.waitFor();
    const signIn = async () => (await fetch(`${URL_BASE}/api/auth/sign-in/email`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(TEAMMATE),
    })).status;
    assert.equal(await signIn(), 200);
    await row.locator('button', { hasText: 'Disable' }).click();
    await page.locator(`#accounts-table tr[data-email="${TEAMMATE.email}"][data-disabled="true"]`).waitFor();
    assert.equal(await signIn(), 401, 'a disabled account signs in no more');
    await shot(page, 'accounts');
    await page.locator(`#accounts-table tr[data-email="${TEAMMATE.email}"] button`, { hasText: 'Enable' }).click();
    await page.locator(`#accounts-table tr[data-email="${TEAMMATE.email}"][data-disabled="false"]`).waitFor();
    assert.equal(await signIn(), 200);
  });

  await step('a version whose gateway cannot start fails; Diagnose names the cause', async () => {
    await page.goto(`${agentUrl}&tab=configuration`);
    await waitState(page, 'running');
    await page.locator('#create-version').click();
    await page.fill('#configuration-editor', JSON.stringify({
      agents: { defaults: { model: { primary: 'openai/gpt-5-mini' } } },
      // valid for occ and the schema, but the gateway finds no certificate and may not make one
      gateway: { tls: { enabled: true, autoGenerate: false } },
    }, null, 2));
    await page.click('#deploy');
    // the gateway gives up only once it has loaded far enough to read its TLS settings, which on
    // a loaded machine takes as long as a whole deploy; then the predecessor is restored
    await waitState(page, 'failed', 2 * DEPLOY_TIMEOUT);
    await page.click('#tab-activity');
    const failedRow = page.locator('#activity-table tbody tr[data-revision="4"][data-status="failed"]');
    await failedRow.waitFor();
    // only a failed deployment offers a diagnosis
    assert.equal(await page.locator('#activity-table [id^="diagnose-"]').count(), 1);
    await page.click('#diagnose-4');
    await page.locator('#diagnosis-code code').waitFor({ timeout: 30_000 });
    const code = await page.locator('#diagnosis-code').textContent();
    assert.match(code, /^(RUNTIME_STARTUP_FAILED|RUNTIME_CONFIGURATION_INVALID)$/);
    assert.equal(await page.locator('#diagnosis-step').textContent(), 'Deployment: reconciliation');
    assert.match(await page.locator('#diagnosis-message').textContent(), /Revision 3, which served before, was restored/);
    assert.ok((await page.locator('pre#diagnosis-output').textContent()).trim().length > 0, 'the gateway\'s last output lines');
    assert.match(await page.locator('#diagnosis-output').textContent(), /cert|tls|key/i, 'the output names the certificate problem');
    const actions = await page.$$eval('#diagnosis-actions li', (lis) => lis.map((li) => li.textContent));
    assert.ok(actions.some((a) => /restored the revision that served before/.test(a)), actions.join('\n'));
    assert.ok(actions.length >= 2, actions.join('\n'));
    await shot(page, 'agent-diagnosis', { fullPage: true });
    // the panel opens the failed revision's logs
    await page.click('#diagnosis-logs');
    assert.equal(await page.getAttribute('#tab-logs', 'aria-selected'), 'true');
    const revision4 = (await pageApi(page, 'GET', `/namespaces/${ns}/agents/${agentId}/revisions`)).body.data.find((r) => r.revision === 4);
    assert.equal(await page.inputValue('#logs-revision'), revision4.id);
  });

  await step('delete the Agent with confirmation', async () => {
    await page.goto(`${agentUrl}&tab=configuration`);
    await waitState(page, 'failed');
    await page.click('#delete-agent');
    await confirmDialog(page, 'Permanently delete Agent');
    await page.waitForURL(new RegExp(`/console/agents\\?namespace=${ns}$`), { timeout: 180_000 });
    await page.locator('#status', { hasText: 'Agent hello was deleted.' }).waitFor();
    await page.locator('#main .empty').waitFor();
    assert.equal((await pageApi(page, 'GET', `/namespaces/${ns}/agents/${agentId}`)).status, 404);
  });

  await step('create form: dedicated execution asks for the harness credential Secret', async () => {
    const secret = (await pageApi(page, 'POST', `/namespaces/${ns}/secrets`, { name: 'codex-key', value: 'sk-console-dedicated-0123456789' })).body.data;
    await page.goto(`${URL_BASE}/console/agents/new?namespace=${ns}`);
    await page.locator('#create-agent-form').waitFor();
    // occ dev's process Compute Driver runs both modes; embedded needs no credential
    assert.deepEqual(await page.$$eval('#execution-mode option', (os) => os.map((o) => o.value)), ['embedded', 'dedicated']);
    assert.equal(await page.isHidden('#harness-auth-panel'), true);
    await page.selectOption('#execution-mode', 'dedicated');
    assert.equal(await page.isVisible('#harness-auth-panel'), true);
    await page.fill('#agent-name', 'coder');
    // without the Secret's id nothing is sent
    await page.click('#create-agent-submit');
    await page.locator('#harness-auth-secret[aria-invalid="true"]').waitFor();
    await page.selectOption('#harness-auth-method', 'codex_pat');
    await page.fill('#harness-auth-secret', secret.id);
    const created = page.waitForResponse((r) => r.url().endsWith(`/namespaces/${ns}/agents`) && r.request().method() === 'POST');
    await page.click('#create-agent-submit');
    const response = await created;
    assert.equal(response.status(), 201);
    const sent = JSON.parse(response.request().postData());
    assert.equal(sent.executionMode, 'dedicated');
    assert.deepEqual(sent.harnessAuth, { method: 'codex_pat', source: { kind: 'secret', namespaceId: ns, id: secret.id } });
    const agent = (await response.json()).data;
    assert.equal(agent.executionMode, 'dedicated');
    assert.equal(agent.harnessAuth.method, 'codex_pat');
    assert.ok(!JSON.stringify(agent).includes('sk-console-dedicated'), 'the Secret value is never shown');
    await page.waitForURL(/\/console\/agents\/agt_[0-9a-f-]+\?/);
    // a draft: removed again without a deploy
    assert.ok((await pageApi(page, 'DELETE', `/namespaces/${ns}/agents/${agent.id}`)).status < 300);
  });

  await step('create form: a dedicated Agent may run with a ServiceAccount\'s credential', async () => {
    const account = (await pageApi(page, 'POST', `/namespaces/${ns}/service-accounts`, { name: 'console-runner' })).body.data;
    await page.goto(`${URL_BASE}/console/agents/new?namespace=${ns}`);
    await page.locator('#create-agent-form').waitFor();
    await page.selectOption('#execution-mode', 'dedicated');
    await page.selectOption('#harness-auth-method', 'chatgpt_service_account');
    // the Secret field gives way to the ServiceAccount and its Backend
    assert.equal(await page.isHidden('#harness-auth-secret'), true);
    assert.equal(await page.isVisible('#harness-auth-account'), true);
    assert.equal(await page.isVisible('#backend-id'), true);
    await page.fill('#agent-name', 'account-coder');
    await page.click('#create-agent-submit');
    await page.locator('#harness-auth-account[aria-invalid="true"]').waitFor();
    await page.fill('#harness-auth-account', account.id);
    const created = page.waitForResponse((r) => r.url().endsWith(`/namespaces/${ns}/agents`) && r.request().method() === 'POST');
    await page.click('#create-agent-submit');
    const response = await created;
    assert.equal(response.status(), 201);
    const sent = JSON.parse(response.request().postData());
    assert.deepEqual(sent.harnessAuth, { method: 'chatgpt_service_account', serviceAccountId: account.id });
    assert.equal(sent.backendId, undefined, 'no Backend named, none sent');
    const agent = (await response.json()).data;
    await page.waitForURL(/\/console\/agents\/agt_[0-9a-f-]+\?/);
    assert.ok((await pageApi(page, 'DELETE', `/namespaces/${ns}/agents/${agent.id}`)).status < 300);
  });

  await step('create form: a model provider key becomes a Secret, a binding in the new Configuration and the Agent\'s grant', async () => {
    const KEY = 'sk-console-create-form-0123456789';
    await page.goto(`${URL_BASE}/console/agents/new?namespace=${ns}`);
    await page.locator('#create-agent-form').waitFor();
    await page.check('#configuration-new');
    assert.equal(await page.isHidden('#model-key-panel'), true);
    await page.check('#model-key-enabled');
    await page.fill('#agent-name', 'keyed');
    await page.fill('#model-provider', 'local');
    await page.fill('#model-base-url', 'http://127.0.0.1:9/v1');
    await page.selectOption('#model-api', 'openai-completions');
    await page.fill('#model-id', 'fake-model');
    // without the key nothing is sent
    await page.click('#create-agent-submit');
    await page.locator('#model-key[aria-invalid="true"]').waitFor();
    await page.fill('#model-key', KEY);
    const created = page.waitForResponse((r) => r.url().endsWith(`/namespaces/${ns}/agents`) && r.request().method() === 'POST');
    await page.click('#create-agent-submit');
    const agent = (await (await created).json()).data;
    await page.waitForURL(/\/console\/agents\/agt_[0-9a-f-]+\?/);
    await page.locator('#status', { hasText: 'with its model key in Secret' }).waitFor();
    const cfg = (await pageApi(page, 'GET', `/namespaces/${ns}/configurations/${agent.configurationId}`)).body.data;
    const provider = cfg.values.models.providers.local;
    assert.deepEqual(provider, { baseUrl: 'http://127.0.0.1:9/v1', api: 'openai-completions', apiKey: '${MODEL_KEY_LOCAL}', models: [{ id: 'fake-model', name: 'fake-model' }] });
    assert.equal(cfg.values.agents.defaults.model.primary, 'local/fake-model');
    const secretId = cfg.secretBindings.MODEL_KEY_LOCAL.source.id;
    const secret = (await pageApi(page, 'GET', `/namespaces/${ns}/secrets/${secretId}`)).body.data;
    assert.equal(secret.name, 'keyed-model-key');
    const bindings = (await pageApi(page, 'GET', `/namespaces/${ns}/iam/access-bindings`)).body.data;
    assert.ok(bindings.some((b) => b.subjectId === agent.servicePrincipalId && b.resourceKind === 'secret' && b.resourceId === secretId),
      'the Agent may use the key\'s Secret');
    for (const body of [cfg, secret, agent]) assert.ok(!JSON.stringify(body).includes(KEY), 'the key is never shown');
    assert.ok((await pageApi(page, 'DELETE', `/namespaces/${ns}/agents/${agent.id}`)).status < 300);
  });

  await step('a new Agent from a Preset: its variables, a password kept as a Secret, the Configuration, the Agent and its grant in one step; a failed step undoes the others', async () => {
    const KEY = 'sk-console-preset-0123456789abcdef';
    await page.goto(`${URL_BASE}/console/agents?namespace=${ns}`);
    await page.click('#create-from-preset');
    await page.locator('#preset-form').waitFor();
    // the built-in Presets, and the variables of the chosen one
    const options = await page.locator('#preset-select option').allTextContents();
    assert.deepEqual(options.slice(0, 2), ['Standard OpenClaw', 'Standard Codex']);
    await page.selectOption('#preset-select', { label: 'Standard Codex' });
    await page.locator('#preset-var-modelSecret[type="password"]').waitFor();
    await page.fill('#preset-var-name', 'from-preset');
    await page.fill('#preset-var-model', 'gpt-5.6-sol');
    await page.uncheck('#preset-deploy');
    // without the key nothing is sent
    await page.click('#preset-submit');
    await page.locator('#preset-var-modelSecret[aria-invalid="true"]').waitFor();
    await page.fill('#preset-var-modelSecret', KEY);
    assert.equal(await page.locator('#preset-variables [aria-invalid="true"]').count(), 0, 'typing clears the field\'s error');
    // the name first, the password last
    assert.deepEqual(await page.locator('#preset-variables input').evaluateAll((els) => els.map((e) => e.id)),
      ['preset-var-name', 'preset-var-model', 'preset-var-modelSecret']);
    await shot(page, 'agent-from-preset', { fullPage: true });
    const created = page.waitForResponse((r) => r.url().endsWith(`/namespaces/${ns}/agents`) && r.request().method() === 'POST');
    await page.click('#preset-submit');
    const agent = (await (await created).json()).data;
    await page.waitForURL(/\/console\/agents\/agt_[0-9a-f-]+\?/);
    await page.locator('#status', { hasText: 'created from Standard Codex' }).waitFor();
    assert.equal(agent.name, 'from-preset');
    assert.equal(agent.executionMode, 'dedicated');
    const secretId = agent.harnessAuth.source.id;
    const secret = (await pageApi(page, 'GET', `/namespaces/${ns}/secrets/${secretId}`)).body.data;
    assert.equal(secret.name, 'from-preset-modelSecret');
    const cfg = (await pageApi(page, 'GET', `/namespaces/${ns}/configurations/${agent.configurationId}`)).body.data;
    assert.equal(cfg.values.agents.defaults.model, 'openai/gpt-5.6-sol');
    assert.deepEqual(cfg.values.agents.defaults.models, { 'openai/gpt-5.6-sol': { agentRuntime: { id: 'codex' } } });
    const bindings = (await pageApi(page, 'GET', `/namespaces/${ns}/iam/access-bindings`)).body.data;
    assert.ok(bindings.some((b) => b.subjectId === agent.servicePrincipalId && b.resourceKind === 'secret' && b.resourceId === secretId),
      'the Agent may use the key\'s Secret');
    for (const body of [cfg, secret, agent]) assert.ok(!JSON.stringify(body).includes(KEY), 'the key is never shown');
    assert.ok((await pageApi(page, 'DELETE', `/namespaces/${ns}/agents/${agent.id}`)).status < 300);

    // A Preset whose Agent the API refuses (an unknown Backend): provisioning refuses it whole
    // before anything is made.
    const preset = (await pageApi(page, 'POST', `/namespaces/${ns}/presets`, {
      name: 'broken',
      template: { variables: { name: { type: 'string', default: 'broken-agent' } },
        agent: { name: '{{ vars.name }}', backendId: 'no-such-backend' },
        configuration: { values: { agents: { defaults: { model: { primary: 'openai/gpt-5' } } } } } },
    })).body.data;
    await page.goto(`${URL_BASE}/console/agents/from-preset?namespace=${ns}`);
    await page.selectOption('#preset-select', { label: 'broken' });
    const refused = page.waitForResponse((r) => r.url().endsWith(`/namespaces/${ns}/agents/provision`) && r.request().method() === 'POST');
    await page.click('#preset-submit');
    assert.equal((await refused).status(), 404);
    assert.match(await alertText(page), /Creating an Agent from broken/);
    const agents = (await pageApi(page, 'GET', `/namespaces/${ns}/agents`)).body.data;
    assert.ok(!agents.some((a) => a.name === 'broken-agent'));
    assert.equal((await pageApi(page, 'DELETE', `/namespaces/${ns}/presets/${preset.id}`)).status, 204);
  });

  await step('one step from the built-in Standard OpenClaw Preset and a saved connection to a chat reply, the provisioning job\'s steps shown as it runs', async () => {
    const REPLY = 'Provisioned and answering.';
    const KEY = 'sk-console-provision-0123456789abcdef';
    const model = await fakeModel(REPLY);
    try {
      // a saved connection to the local endpoint, its key a Secret of the Namespace
      const keySecret = (await pageApi(page, 'POST', `/namespaces/${ns}/secrets`, { name: 'local-endpoint-key', value: KEY })).body.data;
      const connection = (await pageApi(page, 'POST', `/namespaces/${ns}/credential-sources`, {
        name: 'local-endpoint', type: 'openai', config: { base_url: model.url },
        secrets: { api_key: { kind: 'secret', namespaceId: ns, id: keySecret.id } },
      })).body.data;
      await page.goto(`${URL_BASE}/console/agents/from-preset?namespace=${ns}`);
      await page.selectOption('#preset-select', { label: 'Standard OpenClaw' });
      assert.equal(await page.inputValue('#preset-var-baseUrl'), 'https://api.openai.com/v1', 'the default is filled in');
      await page.fill('#preset-var-name', 'provisioned');
      // choosing the connection stands for the key, fills the base URL and offers the models
      // the endpoint lists for the connection's key
      await page.selectOption('#preset-var-modelKey-connection', connection.id);
      assert.equal(await page.inputValue('#preset-var-baseUrl'), model.url);
      assert.ok(await page.locator('#preset-var-modelKey').isDisabled(), 'no key is typed');
      await page.locator('#preset-var-model-offered', { hasText: '2 models offered by local-endpoint' }).waitFor();
      const offered = await page.locator('#preset-var-model-choices option').evaluateAll((els) => els.map((e) => e.value));
      assert.deepEqual(offered, ['fake-model', 'fake-model-large']);
      assert.ok(model.seen.some((c) => c.path === '/v1/models' && c.authorization === `Bearer ${KEY}`),
        'occ asked the endpoint with the connection\'s key');
      await page.fill('#preset-var-model', 'fake-model');
      const admitted = page.waitForResponse((r) => r.url().endsWith(`/namespaces/${ns}/agents/provision`) && r.request().method() === 'POST');
      const polled = page.waitForResponse((r) => /\/agents\/provision\/prv_[0-9a-f-]+$/.test(r.url()));
      await page.click('#preset-submit');
      assert.equal((await admitted).status(), 202);
      // the job's steps, shown while the worker runs them
      await page.locator('#preset-progress li[data-phase]').first().waitFor();
      const steps = await page.locator('#preset-progress li[data-phase]').evaluateAll((els) => els.map((e) => e.dataset.phase));
      assert.deepEqual(steps, ['admitted', 'configuration', 'transport', 'handoff']);
      assert.equal((await polled).status(), 200);
      await page.waitForURL(/\/console\/agents\/agt_[0-9a-f-]+\?/, { timeout: 120_000 });
      await page.locator('#status', { hasText: 'created from Standard OpenClaw and deploying' }).waitFor();
      const agentId = /\/agents\/(agt_[0-9a-f-]+)/.exec(page.url())[1];
      const agent = (await pageApi(page, 'GET', `/namespaces/${ns}/agents/${agentId}`)).body.data;
      const secrets = (await pageApi(page, 'GET', `/namespaces/${ns}/secrets`)).body.data;
      assert.ok(!secrets.some((s) => s.name === 'provisioned-modelKey'), 'no Secret is made: the connection\'s is used');
      const secret = secrets.find((s) => s.id === keySecret.id);
      const cfg = (await pageApi(page, 'GET', `/namespaces/${ns}/configurations/${agent.configurationId}`)).body.data;
      assert.equal(cfg.secretBindings.MODEL_API_KEY.source.id, secret.id);
      const bindings = (await pageApi(page, 'GET', `/namespaces/${ns}/iam/access-bindings`)).body.data;
      assert.ok(bindings.some((b) => b.subjectId === agent.servicePrincipalId && b.resourceKind === 'secret' && b.resourceId === secret.id),
        'the job let the Agent use its Secret');
      await waitState(page, 'running', DEPLOY_TIMEOUT);
      await page.click('#tab-chat');
      await page.locator('#chat-message').waitFor({ timeout: 30_000 });
      await page.fill('#chat-message', 'Are you there?');
      await page.click('#chat-send');
      await page.locator('#chat-log .chat-agent[data-state="done"]').waitFor({ timeout: 120_000 });
      assert.equal(await page.locator('#chat-log .chat-agent .chat-text').last().textContent(), REPLY);
      assert.ok(model.seen.some((c) => c.authorization === `Bearer ${KEY}`), 'the model got exactly the connection\'s key');
      assert.ok(!(await page.content()).includes(KEY), 'the key is never on the page');
      for (const body of [cfg, agent, secret]) assert.ok(!JSON.stringify(body).includes(KEY), 'the key is never shown');
      assert.ok((await pageApi(page, 'DELETE', `/namespaces/${ns}/agents/${agentId}`)).status < 300);
      assert.equal((await pageApi(page, 'DELETE', `/namespaces/${ns}/credential-sources/${connection.id}`)).status, 204);
    } finally {
      model.close();
    }
  });

  await step('Try it: a message through occ, answered by the Agent\'s model with its bound key (after the offer to let the Agent use the Secret)', async () => {
    const REPLY = 'Hello from the console fake model.';
    const KEY = 'sk-console-try-it-0123456789abcdef';
    const model = await fakeModel(REPLY);
    try {
      const secret = (await pageApi(page, 'POST', `/namespaces/${ns}/secrets`, { name: 'try-it-key', value: KEY })).body.data;
      const cfg = (await pageApi(page, 'POST', `/namespaces/${ns}/configurations`, {
        kind: 'agent',
        values: {
          // its native Control UI is opened through occ below (the gateway runs in trusted-proxy mode)
          gateway: { controlUi: { enabled: true } },
          agents: { defaults: { model: { primary: 'fake/fake-model' } } },
          models: { providers: { fake: { baseUrl: model.url, api: 'openai-completions', apiKey: '${FAKE_API_KEY}',
            models: [{ id: 'fake-model', name: 'Fake model' }] } } },
        },
        secretBindings: { FAKE_API_KEY: { source: { kind: 'secret', namespaceId: ns, id: secret.id } } },
      })).body.data;
      const agent = (await pageApi(page, 'POST', `/namespaces/${ns}/agents`, { name: 'talker', configurationId: cfg.id, harnessAuth: { method: 'runtime' } })).body.data;
      // before a deploy the tab says why it cannot talk yet
      await page.goto(`${URL_BASE}/console/agents/${agent.id}?namespace=${ns}&tab=chat`);
      await page.locator('#chat-unavailable').waitFor();
      await page.click('#tab-configuration');
      // the Agent may not use the Secret yet: the refusal comes with the offer to grant it
      await page.click('#deploy');
      assert.match(await alertText(page), new RegExp(`not allowed to operate secret ${secret.id}`));
      await page.click('#grant-secret');
      await waitState(page, 'running', DEPLOY_TIMEOUT);
      const bindings = (await pageApi(page, 'GET', `/namespaces/${ns}/iam/access-bindings`)).body.data;
      assert.ok(bindings.some((b) => b.subjectId === agent.servicePrincipalId && b.resourceKind === 'secret' && b.resourceId === secret.id),
        'the offer bound the Agent\'s principal to exactly this Secret');
      await page.click('#tab-chat');
      await page.locator('#chat-message').waitFor({ timeout: 30_000 });
      await page.fill('#chat-message', 'What can you do?');
      const sent = page.waitForRequest((r) => r.url().endsWith(`/agents/${agent.id}/chat`));
      await page.click('#chat-send');
      const request = await sent;
      assert.equal((await request.allHeaders()).accept, 'text/event-stream');
      await page.locator('#chat-log .chat-agent[data-state="done"]').waitFor({ timeout: 120_000 });
      assert.equal(await page.locator('#chat-log .chat-agent .chat-text').last().textContent(), REPLY);
      assert.match(await page.locator('#chat-status').textContent(), /fake-model · \d+ ms/);
      const calls = model.seen.filter((c) => c.path === '/v1/chat/completions');
      assert.ok(calls.length >= 1, 'the gateway called the model');
      assert.ok(calls.every((c) => c.authorization === `Bearer ${KEY}`), 'with exactly the Secret\'s value');
      assert.ok(!(await page.content()).includes(KEY), 'the key is never on the page');
      await shot(page, 'agent-try-it', { fullPage: true });
      await page.click('#chat-new');
      assert.equal(await page.locator('#chat-log li').count(), 0);
      talker = agent;
    } finally {
      model.close();
    }
  });

  let controlUi = null;
  await step('the Control UI needs a runtime role on the Agent: an administrator assigns one to themselves in one click', async () => {
    const refused = await pageApi(page, 'GET', `/namespaces/${ns}/agents/${talker.id}/native-admin`);
    assert.equal(refused.status, 403);
    assert.match(refused.body.error.message, /runtime role/);
    const assign = page.locator('#assign-runtime-role');
    await assign.waitFor();
    assert.match(await page.locator('#control-ui-status').innerText(), /runtime role assigned to you/);
    await shot(page, 'agent-control-ui-assign');
    await assign.click();
    await page.locator('#open-control-ui').waitFor();
    const bindings = (await pageApi(page, 'GET', `/namespaces/${ns}/iam/access-bindings`)).body.data;
    const mine = bindings.filter((b) => b.resourceId === talker.id && b.runtimeRole);
    assert.equal(mine.length, 1, JSON.stringify(bindings));
    assert.equal(mine[0].runtimeRole, 'platform-administrator');
  });

  await step('the Agent\'s native Control UI opens through occ at its own origin and connects its WebSocket', async () => {
    const status = (await pageApi(page, 'GET', `/namespaces/${ns}/agents/${talker.id}/native-admin`)).body.data;
    assert.equal(status.status, 'available');
    assert.match(status.host, /^agent-[0-9a-f]{32}\.localhost$/);
    const link = page.locator('#open-control-ui');
    await link.waitFor();
    assert.equal(await link.getAttribute('href'), status.url);
    assert.equal(await link.getAttribute('rel'), 'noopener noreferrer');
    const popupOpened = context.waitForEvent('page');
    await link.click();
    const ui = await popupOpened;
    const sockets = [];
    ui.on('websocket', (ws) => {
      const entry = { url: ws.url(), frames: [], closed: false };
      ws.on('framereceived', (f) => entry.frames.push(String(f.payload)));
      ws.on('close', () => { entry.closed = true; });
      sockets.push(entry);
    });
    // through the console's launch and back: the UI loads from the Agent's origin
    await ui.waitForURL((u) => u.origin === status.origin && u.pathname === '/', { timeout: 30_000 });
    await ui.waitForLoadState('load');
    const deadline = Date.now() + 30_000;
    let socket;
    while (!(socket = sockets.find((w) => w.frames.some((f) => f.includes('"hello-ok"'))))) {
      assert.ok(Date.now() < deadline, `no socket of the Control UI reached hello-ok: ${JSON.stringify(sockets.map((w) => ({ url: w.url, frames: w.frames.slice(0, 3) })))}`);
      await ui.waitForTimeout(250);
    }
    assert.ok(socket.url.startsWith(status.origin.replace('http://', 'ws://')), socket.url);
    await ui.waitForTimeout(1000);
    await shot(ui, 'agent-control-ui');
    // the pass is the origin's own: the console never sees it, and the Agent origin never gets the console's cookie
    const uiCookies = await context.cookies(status.origin);
    assert.deepEqual(uiCookies.map((c) => c.name), ['occ_native_admin']);
    assert.ok(uiCookies[0].httpOnly);
    controlUi = { page: ui, socket, status };
  });

  await step('sign out: the Control UI\'s socket closes, and its origin is refused without a session', async () => {
    await page.click('#sign-out');
    await page.locator('#sign-in-email').waitFor();
    assert.equal((await pageApi(page, 'GET', '/api/auth/session')).body.data, null);
    if (controlUi) {
      const deadline = Date.now() + 10_000;
      while (!controlUi.socket.closed) {
        assert.ok(Date.now() < deadline, 'the Control UI socket stayed open after sign-out');
        await page.waitForTimeout(100);
      }
      // a fresh browser (no session) opening the Agent origin, or another Agent's, is refused
      const stranger = await browser.newContext();
      try {
        const other = await stranger.newPage();
        for (const origin of [controlUi.status.origin, controlUi.status.origin.replace(/agent-[0-9a-f]{32}/, 'agent-00000000000000000000000000000000')]) {
          const response = await other.goto(`${origin}/`);
          assert.equal(response.status(), 401, `${origin} without a session`);
          assert.match(await other.content(), /Sign in to the occ console/);
        }
      } finally {
        await stranger.close();
      }
      await controlUi.page.close();
    }
    if (talker) assert.ok((await keyApi('DELETE', `/namespaces/${ns}/agents/${talker.id}`)).status < 300);
  });

  assert.deepEqual(pageErrors, [], `uncaught errors in the page (last step: ${current})`);
});
