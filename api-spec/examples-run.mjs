#!/usr/bin/env node
// examples-run.mjs — the specs' request examples, sent in order to a fresh
// store (through Prism, by prism-check.sh): each must be answered 2xx, so
// the examples are a story that works, not just values that fit schemas.
//
// Usage: node examples-run.mjs --service URL --oracle URL
//
// ORDER lists the operations in story order. A request is its operation's
// path with the path parameters' examples (the session id: the one the
// begin example got back), and its request body example, if any; no query
// parameters (the examples of those are for reading, not for running).
// Operations not in ORDER (backup: needs --backup-dir; rollback and the
// session deletes: they would end the story's session; watch: a stream
// that does not end, tested by tests/integration/test_watch.c) are not sent.
// Output: one line per failure, then a summary. Exit 1 on any failure.

import { loadSpecs } from './validate.mjs';

const ORDER = [
  ['oracle', 'allocateTimestamps'],
  ['service', 'getHealth'], ['service', 'getReady'],
  ['service', 'putKv'], ['service', 'getKv'], ['service', 'scanKv'],
  ['service', 'putObserver'],
  ['service', 'beginTxn'], ['service', 'getTxnKey'], ['service', 'putTxnKey'],
  ['service', 'batchTxn'], ['service', 'scanTxn'], ['service', 'keepaliveTxn'],
  ['service', 'listLocks'], ['service', 'commitTxn'], ['service', 'getTxn'],
  ['service', 'runTxn'], ['service', 'listObservers'], ['service', 'claimNotification'],
  ['service', 'deleteKv'], ['service', 'deleteObserver'],
  ['service', 'getMetrics'], ['service', 'getOpenApi'], ['oracle', 'getHealth'], ['oracle', 'getMetrics'],
];

function exampleOf(media) {
  if (!media) return undefined;
  if (media.example !== undefined) return media.example;
  const first = Object.values(media.examples || {})[0];
  return first ? first.value : undefined;
}

async function main(argv) {
  const bases = {};
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--service') bases.service = argv[++i];
    else if (argv[i] === '--oracle') bases.oracle = argv[++i];
  }
  const specs = loadSpecs();
  const ids = {}; // path parameter values learnt on the way: { id }
  let failed = 0;
  for (const [program, opId] of ORDER) {
    const r = specs[program].routes.find((x) => x.op.operationId === opId);
    if (!r) {
      console.log(`EXAMPLE ${program} ${opId}: no such operation`);
      failed++;
      continue;
    }
    const params = [...(r.item.parameters || []), ...(r.op.parameters || [])];
    const urlPath = r.template.replace(/\{(\w+)\}/g, (_, name) => {
      const p = params.find((q) => q.in === 'path' && q.name === name);
      return encodeURIComponent(String(ids[name] ?? p?.example ?? 'x'));
    });
    const body = exampleOf(r.op.requestBody?.content?.['application/json']);
    let res;
    let text = '';
    try {
      res = await fetch(bases[program] + urlPath, {
        method: r.method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(15000),
      });
      text = await res.text();
    } catch (e) {
      console.log(`EXAMPLE ${r.method} ${urlPath} (${opId}): no answer: ${e.message}`);
      failed++;
      continue;
    }
    if (res.status < 200 || res.status > 299) {
      console.log(`EXAMPLE ${r.method} ${urlPath} (${opId}): ${res.status} ${text.slice(0, 200)}`);
      failed++;
      continue;
    }
    if (opId === 'beginTxn') ids.id = JSON.parse(text).id;
  }
  console.log(`examples-run: ${ORDER.length - failed} of ${ORDER.length} example requests answered 2xx in order on a fresh store`);
  return failed ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
