#!/usr/bin/env node
// Drives capstan's status page (GET / of any worker) in Debian's headless Chromium and checks
// what a person would see. One check a run:
//
//   node status_page.mjs <base-url> <screenshot-dir> <check> [args]
//
//   renders [timeout-s]                          ≥1 member, a leader, no script error, only
//                                                the page's own read endpoints requested
//   pipeline-state <name> <state> [timeout-s]    the pipeline's row shows that state
//   owner-changes <name> <old-owner> [timeout-s] the row shows an owner other than old-owner
//                                                (prints `ready: …` once the page is up, so a
//                                                test can start the failover after it)
//   halt-reason <name> <substring> [timeout-s]   the reason row (code + detail) contains it
//   snapshot-progress <name> [timeout-s]         a snapshot table of the pipeline shows a
//                                                progress bar with rows done/estimated
//   throughput <name> [timeout-s]                the row shows a throughput above 0 rows/s
//                                                and the throughput chart has drawn it
//   api-unreachable [timeout-s]                  the error banner appears (the API stopped
//                                                answering), then goes away once it answers
//   token-prompt [timeout-s]                     against a worker with a read token, and
//                                                with none stored: the page asks for one (a
//                                                401), refuses a wrong one, shows the cluster
//                                                once CAPSTAN_PROMPT_TOKEN is typed in, keeps
//                                                it in sessionStorage only (not in the URL, the
//                                                field or the page), across a reload, and
//                                                asks again after "Forget"
//
// Exit 0 on pass (a `pass: …` line on stdout), 1 on a failed check and 2 on bad usage (a
// `fail: …` line on stderr). Every run writes <screenshot-dir>/<check>[-<name>].png (also on
// failure) and a .log beside it with the page's console and failed requests.
// CAPSTAN_TOKEN, if set, is put into the page's token field (sessionStorage) before it loads.
// CAPSTAN_CHROMIUM overrides /usr/bin/chromium.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const USAGE = `usage: node status_page.mjs <base-url> <screenshot-dir> <check> [args]
checks:
  renders [timeout-s]
  pipeline-state <name> <state> [timeout-s]
  owner-changes <name> <old-owner> [timeout-s]
  halt-reason <name> <substring> [timeout-s]
  snapshot-progress <name> [timeout-s]
  throughput <name> [timeout-s]
  api-unreachable [timeout-s]
  token-prompt [timeout-s]`;

// The reads the page may make: anything else (a definition, a write) fails `renders`.
const ALLOWED_PATHS = [/^\/$/, /^\/cluster$/, /^\/health$/, /^\/pipelines$/,
  /^\/pipelines\/[^/]+\/status$/];

// Where the page keeps the token (sessionStorage).
const TOKEN_KEY = 'capstan.apiToken';

class CheckFailed extends Error {}
class UsageError extends Error {}

function parseTimeout(v, dflt) {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`timeout must be a positive number of seconds: ${v}`);
  return n;
}

function parseArgs(argv) {
  if (argv.length < 3) throw new UsageError('missing arguments');
  const [baseUrl, shotDir, check, ...rest] = argv;
  let url;
  try { url = new URL(baseUrl); } catch { throw new UsageError(`not a URL: ${baseUrl}`); }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`not an http(s) URL: ${baseUrl}`);
  const need = (n) => { if (rest.length < n) throw new UsageError(`${check} needs ${n} argument(s)`); };
  switch (check) {
    case 'renders': return { url, shotDir, check, timeout: parseTimeout(rest[0], 20) };
    case 'pipeline-state': need(2); return { url, shotDir, check, name: rest[0], state: rest[1], timeout: parseTimeout(rest[2], 30) };
    case 'owner-changes': need(2); return { url, shotDir, check, name: rest[0], oldOwner: rest[1], timeout: parseTimeout(rest[2], 30) };
    case 'halt-reason': need(2); return { url, shotDir, check, name: rest[0], substring: rest[1], timeout: parseTimeout(rest[2], 30) };
    case 'snapshot-progress': need(1); return { url, shotDir, check, name: rest[0], timeout: parseTimeout(rest[1], 30) };
    case 'throughput': need(1); return { url, shotDir, check, name: rest[0], timeout: parseTimeout(rest[1], 30) };
    case 'api-unreachable': return { url, shotDir, check, timeout: parseTimeout(rest[0], 60) };
    case 'token-prompt': {
      const token = process.env.CAPSTAN_PROMPT_TOKEN || '';
      if (!token) throw new UsageError('token-prompt needs CAPSTAN_PROMPT_TOKEN');
      if (process.env.CAPSTAN_TOKEN) throw new UsageError('token-prompt starts with no token: unset CAPSTAN_TOKEN');
      return { url, shotDir, check, token, timeout: parseTimeout(rest[0], 30) };
    }
    default: throw new UsageError(`unknown check: ${check}`);
  }
}

// What the page shows, read from its data-testid elements.
function readPage() {
  const q = (root, id) => root.querySelector(`[data-testid="${id}"]`);
  const text = (n) => (n ? n.textContent.trim() : null);
  const banner = q(document, 'error-banner');
  const auth = q(document, 'auth-banner');
  const leader = q(document, 'leader');
  const members = Array.from(document.querySelectorAll('[data-testid="member-row"]')).map((r) => ({
    id: r.getAttribute('data-member'),
    health: r.getAttribute('data-health'),
    leader: Boolean(q(r, 'leader-badge')),
  }));
  const pipelines = {};
  for (const r of document.querySelectorAll('[data-testid="pipeline-row"]')) {
    const name = r.getAttribute('data-pipeline');
    const reason = document.querySelector(`[data-testid="halt-reason"][data-pipeline="${CSS.escape(name)}"]`);
    const reasonShown = Boolean(reason && reason.offsetParent !== null);
    const code = reasonShown ? text(q(reason, 'halt-code')) : null;
    const detail = reasonShown ? text(q(reason, 'halt-detail')) : null;
    pipelines[name] = {
      state: text(q(r, 'pipeline-state')),
      owner: text(q(r, 'pipeline-owner')),
      ownerId: r.getAttribute('data-owner'),
      epoch: r.getAttribute('data-epoch'),
      lag: text(q(r, 'pipeline-lag')),
      throughput: text(q(r, 'pipeline-throughput')),
      rowsPerSecond: q(r, 'pipeline-throughput')?.getAttribute('data-rows-per-second') || '',
      rowsTotal: q(r, 'pipeline-throughput')?.getAttribute('data-rows-total') || '',
      reason: reasonShown ? [code, detail].filter(Boolean).join(': ') : null,
    };
  }
  const snapshots = {};
  for (const s of document.querySelectorAll('[data-testid="snapshot"]')) {
    snapshots[s.getAttribute('data-pipeline')] = {
      open: s.open,
      eta: text(q(s, 'snapshot-eta')),
      tables: Array.from(s.querySelectorAll('[data-testid="snapshot-table"]')).map((t) => {
        const bar = q(t, 'snapshot-progress');
        return {
          table: t.getAttribute('data-table'),
          status: t.getAttribute('data-status'),
          rowsDone: Number(t.getAttribute('data-rows-done')),
          rowsEstimated: Number(t.getAttribute('data-rows-estimated')),
          progress: bar && bar.tagName === 'PROGRESS' ? { value: bar.value, max: bar.max, width: bar.getBoundingClientRect().width } : null,
          rowsText: text(q(t, 'snapshot-rows')),
          etaText: text(q(t, 'snapshot-table-eta')),
        };
      }),
    };
  }
  const chart = q(document, 'chart');
  return {
    banner: banner && !banner.hidden ? text(banner) : null,
    auth: auth && !auth.hidden ? text(auth) : null,
    leader: leader ? leader.getAttribute('data-leader') : null,
    leaderText: text(leader),
    members,
    pipelines,
    snapshots,
    chart: chart ? {
      canvases: chart.querySelectorAll('canvas').length,
      width: chart.getBoundingClientRect().width,
      throughputSamples: Number(q(chart, 'chart-throughput')?.getAttribute('data-samples') || 0),
      legend: Array.from(chart.querySelectorAll('[data-testid="legend-item"]')).map((n) => n.textContent),
    } : null,
    updated: text(q(document, 'updated')),
  };
}

// The first line of an error's message, without terminal colours.
function firstLine(e) {
  // eslint-disable-next-line no-control-regex
  return String(e && e.message || e).replace(/\x1b\[[0-9;]*m/g, '').split('\n')[0];
}

// `name` inside a double-quoted CSS attribute selector.
function cssString(name) {
  return String(name).replace(/["\\]/g, '\\$&').replace(/\n/g, '\\a ');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls the page until `test(view)` returns a truthy value; throws with the last view.
async function waitFor(page, what, timeoutS, test, focus) {
  const deadline = Date.now() + timeoutS * 1000;
  let last = null;
  for (;;) {
    try {
      last = await page.evaluate(readPage);
      const ok = test(last);
      if (ok) return { view: last, result: ok };
    } catch (e) {
      if (e instanceof CheckFailed) throw e;
      last = { evaluateError: String(e && e.message || e) };
    }
    if (Date.now() > deadline) {
      throw new CheckFailed(`${what}: not seen within ${timeoutS} s; the page showed ${JSON.stringify(summarize(last, focus))}`);
    }
    await sleep(200);
  }
}

// What a failure message shows of the page: the banners, the cluster, and the pipeline the
// check is about (all pipelines when it is about none, or the names when it is not listed).
function summarize(view, focus) {
  if (!view || view.evaluateError) return view;
  const brief = (p) => ({ state: p.state, owner: p.ownerId, epoch: p.epoch, reason: p.reason,
    throughput: p.throughput, rowsTotal: p.rowsTotal });
  const out = { banner: view.banner, auth: view.auth, leader: view.leader, members: view.members.length };
  if (focus === undefined) {
    out.pipelines = Object.fromEntries(Object.entries(view.pipelines).map(([n, p]) => [n, brief(p)]));
  } else if (view.pipelines[focus]) {
    out[focus] = brief(view.pipelines[focus]);
    if (view.snapshots[focus]) out.snapshot = view.snapshots[focus].tables;
  } else {
    out.listed = Object.keys(view.pipelines);
  }
  return out;
}

function pipeline(view, name) {
  return view.pipelines[name] || null;
}

async function run(opts, page, log, shoot) {
  const { check, timeout } = opts;
  const started = Date.now();
  const secs = () => ((Date.now() - started) / 1000).toFixed(1);
  switch (check) {
    case 'renders': {
      const { view } = await waitFor(page, 'a cluster with a member and a leader', timeout,
        (v) => !v.banner && !v.auth && v.members.length > 0 && v.leader !== '' && v.leader !== null &&
          v.members.some((m) => m.leader));
      await sleep(1500);            // another refresh or two: errors of later polls count too
      const problems = [];
      if (log.pageErrors.length) problems.push(`script errors: ${log.pageErrors.join(' | ')}`);
      if (log.consoleErrors.length) problems.push(`console errors: ${log.consoleErrors.join(' | ')}`);
      if (log.foreign.length) problems.push(`requests outside the API: ${log.foreign.join(', ')}`);
      if (!view.chart || view.chart.canvases < 1 || view.chart.width <= 0) problems.push('no chart');
      if (problems.length) throw new CheckFailed(problems.join('; '));
      return `renders: ${view.members.length} member(s), leader node ${view.leader}, ` +
        `${Object.keys(view.pipelines).length} pipeline(s)`;
    }
    case 'pipeline-state': {
      const { view } = await waitFor(page, `pipeline ${opts.name} in state ${opts.state}`, timeout,
        (v) => !v.banner && pipeline(v, opts.name)?.state === opts.state, opts.name);
      const p = pipeline(view, opts.name);
      return `pipeline-state: ${opts.name} is ${p.state} (owner ${p.ownerId || 'none'}, epoch ${p.epoch}) after ${secs()} s`;
    }
    case 'owner-changes': {
      const old = String(opts.oldOwner);
      const first = await waitFor(page, `pipeline ${opts.name} listed`, timeout,
        (v) => !v.banner && pipeline(v, opts.name), opts.name);
      const before = pipeline(first.view, opts.name);
      console.log(`ready: ${opts.name} shows owner ${before.ownerId || 'none'} (epoch ${before.epoch})`);
      if (before.ownerId === old) await shoot('before');
      const { view } = await waitFor(page, `pipeline ${opts.name} owned by a worker other than ${old}`, timeout,
        (v) => {
          const p = pipeline(v, opts.name);
          return !v.banner && p && p.ownerId !== '' && p.ownerId !== old;
        }, opts.name);
      const p = pipeline(view, opts.name);
      return `owner-changes: ${opts.name} owner ${old} -> ${p.ownerId} (epoch ${p.epoch}, state ${p.state}) ` +
        `after ${secs()} s${before.ownerId === old ? '' : ` (the first view already showed owner ${before.ownerId || 'none'})`}`;
    }
    case 'halt-reason': {
      const { view } = await waitFor(page, `pipeline ${opts.name} showing a reason containing "${opts.substring}"`,
        timeout, (v) => (pipeline(v, opts.name)?.reason || '').includes(opts.substring), opts.name);
      const p = pipeline(view, opts.name);
      return `halt-reason: ${opts.name} is ${p.state}: ${p.reason}`;
    }
    case 'snapshot-progress': {
      const listed = await waitFor(page, `a snapshot of pipeline ${opts.name}`, timeout,
        (v) => v.snapshots[opts.name], opts.name);
      if (!listed.view.snapshots[opts.name].open) {
        // a finished snapshot is folded: open it as a person would
        await page.click(`[data-testid="snapshot"][data-pipeline="${cssString(opts.name)}"] > summary`);
      }
      const { result } = await waitFor(page, `a snapshot progress bar of pipeline ${opts.name}`, timeout, (v) => {
        const s = v.snapshots[opts.name];
        if (!s || !s.open) return null;
        const shown = s.tables.filter((t) => t.progress && t.progress.max > 0 && t.progress.width > 0 &&
          Number.isFinite(t.rowsDone) && /\d/.test(t.rowsText || ''));
        // the table being read, else one that is done, else any
        return shown.find((t) => t.status === 'in_progress') || shown.find((t) => t.status === 'complete') ||
          shown[0];
      }, opts.name);
      let t = result;
      if (t.status === 'in_progress') {
        // give the page a few refreshes to measure a rate and show an ETA (not required: a
        // table may finish meanwhile)
        const withEta = await waitFor(page, 'an ETA', Math.min(timeout, 8), (v) =>
          (v.snapshots[opts.name]?.tables || []).find((x) => x.table === t.table && /ETA \d/.test(x.etaText || '')),
        ).catch(() => null);
        if (withEta) t = withEta.result;
      }
      return `snapshot-progress: ${opts.name} ${t.table} ${t.status} ${t.rowsText}${t.etaText ? ` ${t.etaText.trim()}` : ''}`;
    }
    case 'throughput': {
      const { view } = await waitFor(page, `pipeline ${opts.name} with a throughput above 0 rows/s, charted`,
        timeout, (v) => {
          const p = pipeline(v, opts.name);
          return p && Number(p.rowsPerSecond) > 0 && /rows\/s$/.test(p.throughput || '') &&
            v.chart && v.chart.throughputSamples > 0 && v.chart.legend.includes(opts.name);
        }, opts.name);
      const p = pipeline(view, opts.name);
      return `throughput: ${opts.name} shows ${p.throughput} (${p.rowsTotal} rows counted by node ${p.ownerId}), ` +
        `${view.chart.throughputSamples} chart sample(s) after ${secs()} s`;
    }
    case 'api-unreachable': {
      await waitFor(page, 'the page showing the cluster', Math.min(timeout, 20),
        (v) => !v.banner && v.members.length > 0);
      console.log('ready: the page shows the cluster; waiting for the API to stop answering');
      const down = await waitFor(page, 'the error banner', timeout, (v) => v.banner);
      const shownAfter = secs();
      await shoot('down');
      await waitFor(page, 'the banner gone once the API answers again', timeout,
        (v) => !v.banner && v.members.length > 0);
      return `api-unreachable: banner shown after ${shownAfter} s ("${down.view.banner}"), gone after ${secs()} s`;
    }
    case 'token-prompt': {
      const asked = (v) => v.auth !== null && v.members.length === 0;
      const { view: first } = await waitFor(page, 'the page asking for a token', timeout,
        (v) => asked(v) && /asks for a bearer token/.test(v.auth));
      const focused = await page.evaluate(() => document.activeElement?.getAttribute('data-testid'));
      if (focused !== 'token-input') throw new CheckFailed(`asked for a token, but the focus is on ${focused}`);
      await shoot('asked');
      const submit = async (t) => {
        await page.fill('[data-testid="token-input"]', t);
        await page.press('[data-testid="token-input"]', 'Enter');
      };
      await submit('not-the-token');
      await waitFor(page, 'a wrong token refused', timeout, (v) => asked(v) && /refused the token/.test(v.auth));
      await submit(opts.token);
      const shows = (v) => !v.banner && !v.auth && v.members.length > 0 && v.leader !== '' && v.leader !== null;
      const { view } = await waitFor(page, 'the cluster once the token was given', timeout, shows);
      const kept = await page.evaluate((key) => ({
        stored: sessionStorage.getItem(key),
        local: Object.keys(localStorage).length,
        field: document.querySelector('[data-testid="token-input"]').value,
        html: document.documentElement.outerHTML,
        url: location.href,
      }), TOKEN_KEY);
      const problems = [];
      if (kept.stored !== opts.token) problems.push('the token is not in sessionStorage');
      if (kept.local !== 0) problems.push('something was put in localStorage');
      if (kept.field !== '') problems.push('the token stays in the field');
      if (kept.html.includes(opts.token)) problems.push('the token is in the page');
      if (kept.url.includes(opts.token) || page.url().includes(opts.token)) problems.push('the token is in the URL');
      if (problems.length) throw new CheckFailed(problems.join('; '));
      await page.reload({ waitUntil: 'load' });
      await waitFor(page, 'the cluster after a reload, with the kept token', timeout, shows);
      await page.click('#token-clear');
      await waitFor(page, 'the page asking again after "Forget"', timeout, (v) => v.auth !== null &&
        /asks for a bearer token/.test(v.auth));
      const left = await page.evaluate((key) => sessionStorage.getItem(key), TOKEN_KEY);
      if (left !== null) throw new CheckFailed('"Forget" left the token in sessionStorage');
      return `token-prompt: asked ("${first.auth}"), refused a wrong token, showed ${view.members.length} ` +
        `member(s) with the right one, kept it across a reload, asked again after "Forget" (${secs()} s)`;
    }
    default:
      throw new UsageError(`unknown check: ${check}`);
  }
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`fail: ${e.message}\n${USAGE}`);
    process.exit(2);
  }
  mkdirSync(opts.shotDir, { recursive: true });
  const stem = join(opts.shotDir, [opts.check, opts.name].filter(Boolean).join('-')
    .replace(/[^A-Za-z0-9._-]+/g, '_'));
  const log = { lines: [], pageErrors: [], consoleErrors: [], foreign: [] };
  const profile = mkdtempSync(join(tmpdir(), 'capstan-chromium-'));
  let context = null, page = null, outcome = null, code = 0;
  try {
    let chromium;
    try {
      ({ chromium } = await import('playwright-core'));
    } catch (e) {
      throw new CheckFailed(`playwright-core is not installed (run deploy/dev/browser-deps.sh): ${firstLine(e)}`);
    }
    const executablePath = process.env.CAPSTAN_CHROMIUM || '/usr/bin/chromium';
    context = await chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      viewport: { width: 1400, height: 1000 },
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
        '--disable-dev-shm-usage', '--disable-default-apps', '--disable-extensions',
        '--no-default-browser-check', '--metrics-recording-only', '--mute-audio'],
      timeout: 30000,
    }).catch((e) => {
      throw new CheckFailed(`cannot start Chromium at ${executablePath} (deploy/dev/browser-deps.sh installs it): ${firstLine(e)}`);
    });
    page = context.pages()[0] || await context.newPage();
    const origin = opts.url.origin;
    page.on('console', (m) => {
      const line = `console.${m.type()}: ${m.text()}`;
      log.lines.push(line);
      // a non-2xx answer the page expects (503 degraded health, a pipeline deleted between
      // two reads) or a connection refused during an outage is logged by the browser as
      // "Failed to load resource"; the page's own errors are anything else
      if (m.type() === 'error' && !/^Failed to load resource/.test(m.text())) log.consoleErrors.push(m.text());
    });
    page.on('pageerror', (e) => { log.lines.push(`pageerror: ${e.message}`); log.pageErrors.push(e.message); });
    page.on('request', (r) => {
      let u;
      try { u = new URL(r.url()); } catch { return; }
      if (u.protocol === 'data:') return;
      if (u.origin !== origin || r.method() !== 'GET' || !ALLOWED_PATHS.some((re) => re.test(u.pathname))) {
        log.foreign.push(`${r.method()} ${r.url()}`);
      }
    });
    page.on('requestfailed', (r) => log.lines.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText || ''}`));
    page.on('response', (r) => { if (r.status() >= 400) log.lines.push(`response ${r.status()}: ${r.url()}`); });
    if (process.env.CAPSTAN_TOKEN) {
      await page.addInitScript(([key, t]) => { try { sessionStorage.setItem(key, t); } catch { /* */ } },
        [TOKEN_KEY, process.env.CAPSTAN_TOKEN]);
    }
    const shoot = async (suffix) => {
      await page.screenshot({ path: `${stem}-${suffix}.png`, fullPage: true }).catch(() => {});
    };
    const resp = await page.goto(opts.url.href, { waitUntil: 'load', timeout: 20000 }).catch((e) => {
      throw new CheckFailed(`cannot load ${opts.url.href}: ${firstLine(e)}`);
    });
    if (!resp || !resp.ok()) throw new CheckFailed(`GET ${opts.url.href} answered ${resp ? resp.status() : 'nothing'}`);
    outcome = await run(opts, page, log, shoot);
  } catch (e) {
    code = e instanceof UsageError ? 2 : 1;
    outcome = e instanceof CheckFailed || e instanceof UsageError ? e.message : `error: ${firstLine(e)}`;
    if (!(e instanceof CheckFailed || e instanceof UsageError)) log.lines.push(`error: ${e && e.stack || e}`);
  } finally {
    if (page) await page.screenshot({ path: `${stem}.png`, fullPage: true }).catch(() => {});
    if (!page) {
      // no page to take a picture of: say so in an image anyway, so the artefact exists
      writeFileSync(`${stem}.png`, Buffer.from(
        'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64'));
    }
    writeFileSync(`${stem}.log`, [`check: ${process.argv.slice(4).join(' ')}`, `url: ${opts.url.href}`,
      `outcome: ${code === 0 ? 'pass' : 'fail'}: ${outcome}`, ...log.lines].join('\n') + '\n');
    if (context) await context.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  }
  if (code === 0) {
    console.log(`pass: ${outcome} (screenshot ${stem}.png)`);
  } else {
    console.error(`fail: ${outcome} (screenshot ${stem}.png, log ${stem}.log)`);
  }
  process.exit(code);
}

main();
