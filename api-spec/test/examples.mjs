#!/usr/bin/env node
// examples.mjs — turn the specs' examples (service.yaml and oracle.yaml)
// into recorded exchanges (JSONL on stdout, each naming its "program"), one
// per documented response of every operation, plus one 404 and one 405 per
// program for requests that match no operation. selftest.sh feeds them
// to validate.mjs: every example must validate against its own schema, and
// the validator must accept what the spec documents.
//
// test/valid.jsonl was made with: node test/examples.mjs > test/valid.jsonl

import { loadSpecs } from '../validate.mjs';

const BASES = { service: 'http://127.0.0.1:8080', oracle: 'http://127.0.0.1:8090' };
// A request per program that matches a known path with the wrong method.
const WRONG_METHOD = { service: ['POST', '/v1/kv/docs%2Freadme'], oracle: ['GET', '/v1/timestamps'] };

// The first example of a media type object (`example` or `examples`).
function exampleOf(media) {
  if (!media) return undefined;
  if (media.example !== undefined) return media.example;
  const first = Object.values(media.examples || {})[0];
  return first ? first.value : undefined;
}

// A response object as the recorded reply: content type, body, headers.
function reply(resp) {
  const out = { response_content_type: null, response_body: '', response_headers: {} };
  for (const [name, h] of Object.entries(resp.headers || {})) {
    if (h.required) out.response_headers[name.toLowerCase()] = String(h.example ?? h.schema?.example ?? 1);
  }
  const [ct, media] = Object.entries(resp.content || {})[0] || [];
  if (ct) {
    const ex = exampleOf(media);
    if (ex === undefined) return null; // nothing to build the body from
    out.response_content_type = ct;
    out.response_body = typeof ex === 'string' ? ex : JSON.stringify(ex);
    out.response_headers['content-type'] = ct;
  }
  return out;
}

const lines = [];
for (const [program, { spec, routes }] of Object.entries(loadSpecs())) {
  const BASE = BASES[program];
  for (const r of routes) {
    const params = [...(r.item.parameters || []), ...(r.op.parameters || [])];
    // Fill the path template with the parameters' examples, percent-encoded
    // (a key example like docs/readme becomes docs%2Freadme).
    const urlPath = r.template.replace(/\{(\w+)\}/g, (_, name) => {
      const p = params.find((q) => q.in === 'path' && q.name === name);
      return encodeURIComponent(String(p?.example ?? 'x'));
    });
    const reqMedia = r.op.requestBody?.content?.['application/json'];
    const reqExample = exampleOf(reqMedia);
    for (const [status, resp] of Object.entries(r.op.responses || {})) {
      if (!/^\d{3}$/.test(status)) continue;
      const rep = reply(resp);
      if (!rep) continue;
      const ok = status.startsWith('2');
      lines.push({
        program,
        method: r.method,
        url: BASE + urlPath,
        status: Number(status),
        request_content_type: ok && reqExample !== undefined ? 'application/json' : null,
        request_body: ok && reqExample !== undefined ? JSON.stringify(reqExample) : null,
        ...rep,
      });
    }
  }

  // Requests that match no operation.
  const unrouted = spec['x-unrouted-responses'];
  const [wrongMethod, wrongPath] = WRONG_METHOD[program];
  lines.push({ program, method: 'GET', url: `${BASE}/v2/nothing`, status: 404, expect_off_spec: true, request_content_type: null, request_body: null, ...reply(unrouted['404']) });
  lines.push({ program, method: wrongMethod, url: `${BASE}${wrongPath}`, status: 405, expect_off_spec: true, request_content_type: null, request_body: null, ...reply(unrouted['405']) });
}

for (const l of lines) console.log(JSON.stringify(l));
