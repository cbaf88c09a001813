#!/usr/bin/env node
// prism-replay.mjs — send the requests the integration tests recorded again,
// through Prism proxies in front of a fresh service and oracle, and report
// what Prism said about them (prism-check.sh runs it).
//
// Usage: node prism-replay.mjs --service URL --oracle URL [--per-op N] exchanges.jsonl...
//
// Which recorded requests: those the server accepted (2xx: the others are
// mostly wrong on purpose, and Prism, validating requests, would refuse
// them rightly), not marked expect_off_spec, not HEAD (the spec lists GET;
// every GET answers HEAD too), with their body recorded. Each goes to the
// Prism in front of its program (the exchange's "program", else its path:
// validate.mjs's programOf). Duplicates (same method, URL and body) go
// once, and at most --per-op (default 150) per operation, so the run stays
// bounded whatever the tests record.
//
// Rewritten on the way, the same operation still: a key sent with raw
// slashes (/v1/kv/a/b, which the service accepts, see `x-rest-of-path`)
// goes percent-encoded (/v1/kv/a%2Fb: OpenAPI cannot say that a parameter
// spans segments, so Prism, like generated clients, wants one segment), and
// a claim's wait_ms is 0 (a replay has nothing to wait for).
//
// The replay runs against a fresh store, so the answers differ from the
// recorded ones (a session id of the test run is 404 here): what counts is
// that each answer is one the spec documents, which Prism checks.
// A violation, as the client sees it: an `sl-violations` header, or a
// problem+json answer from Prism itself (https://stoplight.io/prism/errors).
// Output: the first violations in detail, then one summary line. Exit 1 on
// any violation or when nothing was replayed.

import fs from 'node:fs';
import { findRoute, loadSpecs, programOf } from './validate.mjs';

const SHOWN = 20; // violations printed in detail

function parseArgs(argv) {
  const opts = { bases: {}, perOp: 150, files: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--service') opts.bases.service = argv[++i];
    else if (argv[i] === '--oracle') opts.bases.oracle = argv[++i];
    else if (argv[i] === '--per-op') opts.perOp = Number(argv[++i]);
    else opts.files.push(argv[i]);
  }
  return opts;
}

// The path with a rest-of-path key in one segment (raw slashes as %2F).
function oneSegmentKey(route, pathname) {
  const segs = pathname.split('/').slice(1);
  const n = route.segments.length;
  if (!route.rest || segs.length <= n) return pathname;
  return '/' + [...segs.slice(0, n - 1), segs.slice(n - 1).join('%2F')].join('/');
}

// The requests to replay, and why the others are not.
function select(files, specs, perOp) {
  const skipped = { not_2xx: 0, off_spec: 0, head: 0, body_not_recorded: 0, no_operation: 0, duplicate: 0, over_cap: 0, unreadable: 0 };
  const seen = new Set();
  const perOpCount = new Map();
  const chosen = [];
  let recorded = 0;
  for (const file of files) {
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      recorded++;
      let ex;
      try {
        ex = JSON.parse(line);
      } catch {
        skipped.unreadable++;
        continue;
      }
      if (ex.expect_off_spec) { skipped.off_spec++; continue; }
      if (!(ex.status >= 200 && ex.status < 300)) { skipped.not_2xx++; continue; }
      if (String(ex.method).toUpperCase() === 'HEAD') { skipped.head++; continue; }
      const program = programOf(ex);
      const spec = specs[program];
      let url;
      try {
        url = new URL(ex.url);
      } catch {
        skipped.unreadable++;
        continue;
      }
      const method = ex.method.toUpperCase();
      const { route } = spec ? findRoute(spec.routes, method, url.pathname) : {};
      if (!route) { skipped.no_operation++; continue; }
      const rb = route.op.requestBody;
      if (rb && rb.required && (ex.request_body === null || ex.request_body === undefined)) {
        skipped.body_not_recorded++;
        continue;
      }
      if (url.searchParams.has('wait_ms')) url.searchParams.set('wait_ms', '0');
      const target = oneSegmentKey(route, url.pathname) + url.search;
      const key = `${program} ${method} ${target} ${ex.request_body ?? ''}`;
      if (seen.has(key)) { skipped.duplicate++; continue; }
      seen.add(key);
      const opKey = `${program}:${route.id}`;
      const n = perOpCount.get(opKey) || 0;
      if (n >= perOp) { skipped.over_cap++; continue; }
      perOpCount.set(opKey, n + 1);
      chosen.push({ program, method, target, ex, op: route.id });
    }
  }
  return { chosen, skipped, recorded, operations: perOpCount.size };
}

// One request through Prism; returns a violation text or null.
async function send(base, r) {
  const headers = {};
  const hasBody = r.ex.request_body !== null && r.ex.request_body !== undefined;
  if (hasBody && r.ex.request_content_type) headers['content-type'] = r.ex.request_content_type;
  let res;
  try {
    res = await fetch(base + r.target, {
      method: r.method,
      headers,
      body: hasBody ? r.ex.request_body : undefined,
      signal: AbortSignal.timeout(15000),
    });
  } catch (e) {
    return `no answer: ${e.message}`;
  }
  const text = await res.text();
  const violations = res.headers.get('sl-violations');
  if (violations) return `${res.status}, sl-violations: ${violations}`;
  if ((res.headers.get('content-type') || '').startsWith('application/problem+json')) {
    try {
      const p = JSON.parse(text);
      if (String(p.type || '').startsWith('https://stoplight.io/prism/errors')) {
        return `${res.status} from Prism: ${p.title}; ${JSON.stringify(p.validation || p.detail)}`;
      }
    } catch {
      // not Prism's: an answer of the service's, checked as such
    }
  }
  return null;
}

async function main(argv) {
  const opts = parseArgs(argv);
  if (!opts.bases.service || !opts.bases.oracle) {
    console.error('usage: prism-replay.mjs --service URL --oracle URL exchanges.jsonl...');
    return 2;
  }
  const specs = loadSpecs();
  const { chosen, skipped, recorded, operations } = select(opts.files, specs, opts.perOp);
  const byProgram = { service: 0, oracle: 0 };
  let violations = 0;
  for (const r of chosen) {
    const v = await send(opts.bases[r.program], r);
    byProgram[r.program]++;
    if (!v) continue;
    violations++;
    if (violations <= SHOWN) console.log(`VIOLATION ${r.method} ${r.target} (${r.program}, ${r.op}): ${v}`);
  }
  const why = Object.entries(skipped).filter(([, n]) => n).map(([k, n]) => `${n} ${k}`).join(', ');
  console.log(`prism-replay: ${chosen.length} of ${recorded} recorded requests replayed ` +
    `(${byProgram.service} service, ${byProgram.oracle} oracle; ${operations} operations)` +
    `${why ? `; not replayed: ${why}` : ''}; ${violations} with violations`);
  return violations > 0 || chosen.length === 0 ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
