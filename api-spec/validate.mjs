#!/usr/bin/env node
// validate.mjs — check recorded HTTP exchanges against the spec of the
// program that answered them: service.yaml or oracle.yaml.
//
// Usage: node validate.mjs [--spec file.yaml] exchanges.jsonl...
//
// Which spec: the exchange's "program" ("service" or "oracle"; the tests'
// exchange log records it for the programs they spawned), else the path
// (/v1/timestamps is the oracle's, anything else the service's: /v1/health
// and /metrics, which both serve, are the same in both). --spec checks
// every exchange against one file instead.
//
// Each line of an input file is one exchange, as recorded by the tests:
//   {"method":"PUT","url":"http://127.0.0.1:41234/v1/kv/a%2Fb?encoding=base64",
//    "status":200,"request_content_type":"application/json",
//    "request_body":"<text or null>","response_content_type":"application/json",
//    "response_body":"<text>","response_headers":{"retry-after":"1"}}
// Optional: "expect_off_spec": true marks a request the test sent on purpose to
// a path or method the spec does not document (it must then match no
// operation, answer 404 / 405 (or 401) and still carry the error envelope).
//
// What is checked for an exchange that matches an operation:
//   - the status is documented for the operation (or a `default` exists);
//   - the response content type is one the response documents, and a
//     response without content has an empty body;
//   - a JSON body parses and validates against the response schema
//     (JSON Schema 2020-12, as OpenAPI 3.1 uses);
//   - when response_headers was recorded, every header the response marks
//     `required` is there (e.g. Retry-After on 503, Allow on 405): a recorded
//     response_headers object is taken as the complete set of the reply's
//     headers (names case-insensitive); without it, headers are not checked;
//   - on a 2xx answer (the server accepted the request): the request body
//     validates against the requestBody schema, a required body was sent,
//     and the documented query parameters that were sent are valid;
//   - /metrics is Prometheus text, /openapi.yaml is an OpenAPI 3.1 document.
//
// Output: one line per failure, then
//   api-spec: P passed, F failed   (P + F exchanges checked)
// Exit status 1 when anything failed or when no exchange was given at all (an
// empty log means the tests recorded nothing, which is not a pass).

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import YAML from 'yaml';
import Ajv2020 from 'ajv/dist/2020.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

// ---------------------------------------------------------------- the spec

// Replace every local $ref ("#/components/...") by the object it points to,
// so that ajv gets plain, self-contained schemas. The same target always
// yields the same resolved object. Recursive references are not supported
// (the spec has none) and are reported rather than looping forever.
export function derefSpec(spec) {
  const resolved = new Map(); // ref string -> resolved object
  const resolving = new Set(); // refs on the current path, to catch cycles

  function pointer(ref) {
    if (!ref.startsWith('#/')) throw new Error(`only local $refs are supported: ${ref}`);
    let node = spec;
    for (const raw of ref.slice(2).split('/')) {
      const part = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
      if (node === null || typeof node !== 'object' || !(part in node)) {
        throw new Error(`unresolvable $ref: ${ref}`);
      }
      node = node[part];
    }
    return node;
  }

  function walk(node) {
    if (Array.isArray(node)) return node.map(walk);
    if (node === null || typeof node !== 'object') return node;
    if (typeof node.$ref === 'string') {
      const ref = node.$ref;
      let target = resolved.get(ref);
      if (!target) {
        if (resolving.has(ref)) throw new Error(`recursive $ref not supported: ${ref}`);
        resolving.add(ref);
        target = walk(pointer(ref));
        resolving.delete(ref);
        resolved.set(ref, target);
      }
      const siblings = Object.keys(node).filter((k) => k !== '$ref');
      if (siblings.length === 0) return target;
      // OpenAPI 3.1: `summary` / `description` beside a $ref override the
      // target's; any other keyword beside a $ref (only possible in a
      // schema) applies in addition to it.
      const notes = {};
      const rest = {};
      for (const k of siblings) {
        if (k === 'summary' || k === 'description') notes[k] = node[k];
        else rest[k] = walk(node[k]);
      }
      const base = Object.keys(rest).length ? { allOf: [target], ...rest } : { ...target };
      return Object.assign(base, notes);
    }
    const out = {};
    for (const [k, v] of Object.entries(node)) out[k] = walk(v);
    return out;
  }

  return walk(spec);
}

// Load and dereference the spec; build the list of routes (method + path
// template) with their operations.
export const SPEC_FILES = { service: 'service.yaml', oracle: 'oracle.yaml' };

export function loadSpec(specPath = path.join(HERE, SPEC_FILES.service)) {
  const raw = YAML.parse(fs.readFileSync(specPath, 'utf8'));
  const spec = derefSpec(raw);
  const routes = [];
  for (const [template, item] of Object.entries(spec.paths || {})) {
    const segments = template.split('/').slice(1);
    for (const method of METHODS) {
      if (!item[method]) continue;
      routes.push({
        method: method.toUpperCase(),
        template,
        segments,
        rest: restOfPath(segments, [...(item.parameters || []), ...(item[method].parameters || [])]),
        item,
        op: item[method],
        id: item[method].operationId || `${method.toUpperCase()} ${template}`,
      });
    }
  }
  return { spec, routes, file: path.basename(specPath) };
}

// Both programs' specs: { service: specInfo, oracle: specInfo }.
export function loadSpecs() {
  const out = {};
  for (const [name, file] of Object.entries(SPEC_FILES)) out[name] = loadSpec(path.join(HERE, file));
  return out;
}

// The program whose spec an exchange is checked against.
export function programOf(ex) {
  if (ex && typeof ex.program === 'string') return ex.program;
  let pathname = '';
  try {
    pathname = new URL(ex.url, 'http://localhost').pathname;
  } catch {
    // an unparsable url fails in checkExchange
  }
  return pathname === '/v1/timestamps' ? 'oracle' : 'service';
}

// Whether the template's last segment is a path parameter marked
// `x-rest-of-path: true`: it takes the rest of the path, raw slashes and all
// (the service's keys: /v1/kv/a/b is the key "a/b").
function restOfPath(segments, parameters) {
  const last = segments[segments.length - 1] || '';
  if (!last.startsWith('{') || !last.endsWith('}')) return false;
  const name = last.slice(1, -1);
  return parameters.some((p) => p && p.in === 'path' && p.name === name && p['x-rest-of-path'] === true);
}

// Does a raw (still percent-encoded) path match a template? A {param}
// segment matches one non-empty segment (a key may hold %2F); a last one
// marked x-rest-of-path matches everything left, if anything is.
// Returns the number of literal segments (more is a better match) or -1.
function matchTemplate(segments, pathSegs, rest) {
  if (rest && pathSegs.length > segments.length) {
    const n = segments.length;
    pathSegs = [...pathSegs.slice(0, n - 1), pathSegs.slice(n - 1).join('/')];
  }
  if (segments.length !== pathSegs.length) return -1;
  let literal = 0;
  for (let i = 0; i < segments.length; i++) {
    const t = segments[i];
    if (t.startsWith('{') && t.endsWith('}')) {
      if (pathSegs[i] === '') return -1;
    } else if (t === pathSegs[i]) {
      literal++;
    } else {
      return -1;
    }
  }
  return literal;
}

// The best route for method + path, and whether the path is known at all.
export function findRoute(routes, method, pathname) {
  const pathSegs = pathname.split('/').slice(1);
  let best = null;
  let bestScore = -1;
  let pathKnown = false;
  for (const r of routes) {
    const score = matchTemplate(r.segments, pathSegs, r.rest);
    if (score < 0) continue;
    pathKnown = true;
    if (r.method === method && score > bestScore) {
      best = r;
      bestScore = score;
    }
  }
  return { route: best, pathKnown };
}

// ------------------------------------------------------------- schemas

const ajv = new Ajv2020({
  allErrors: true,
  strict: true,
  strictTypes: false, // allOf branches legitimately omit `type`
  strictRequired: false,
  allowUnionTypes: true,
});
// OpenAPI's own annotation keywords inside schemas.
for (const k of ['example', 'discriminator', 'xml', 'externalDocs']) ajv.addKeyword(k);

const compiled = new WeakMap(); // schema object -> validate function

// Validate data against a schema; returns a list of readable problems.
// `root` names the whole value in messages (a body, a header, a parameter).
function check(schema, data, root = '(body)') {
  if (!schema) return [];
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(schema, validate);
  }
  if (validate(data)) return [];
  return (validate.errors || []).slice(0, 5).map((e) => {
    const where = e.instancePath || root;
    const extra = e.params && e.params.allowedValues ? ` ${JSON.stringify(e.params.allowedValues)}` : '';
    return `${where} ${e.message}${extra}`;
  });
}

// ------------------------------------------------------------- helpers

function mediaType(ct) {
  return (ct || '').split(';')[0].trim().toLowerCase();
}

function isJsonType(mt) {
  return mt === 'application/json' || mt.endsWith('+json');
}

// The documented content entry for a media type (exact, then wildcards).
function findContent(content, mt) {
  const keys = Object.keys(content);
  const exact = keys.find((k) => k.toLowerCase() === mt);
  if (exact) return content[exact];
  const wild = keys.find((k) => k.endsWith('/*') && mt.startsWith(k.slice(0, -1).toLowerCase()));
  if (wild) return content[wild];
  return content['*/*'] || null;
}

function isEmptyBody(body) {
  return body === null || body === undefined || body === '';
}

// Header lookup in a recorded header object, case-insensitively.
function header(headers, name) {
  const want = name.toLowerCase();
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === want) return Array.isArray(v) ? v.join(', ') : String(v);
  }
  return undefined;
}

// A query string value as the type its schema wants.
function coerce(value, schema) {
  const t = schema && schema.type;
  if ((t === 'integer' || t === 'number') && /^-?\d+(\.\d+)?$/.test(value)) return Number(value);
  if (t === 'boolean' && (value === 'true' || value === 'false')) return value === 'true';
  return value;
}

// Extra checks of non-JSON bodies, by operationId.
const BODY_CHECKS = {
  // Prometheus text exposition format: comments, or `name{labels} value [ts]`.
  getMetrics(body) {
    if (!body || !body.trim()) return ['empty metrics body'];
    const sample = /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})?[ \t]+\S+([ \t]+-?\d+)?$/;
    const bad = body.split('\n').filter((l) => l.trim() && !l.startsWith('#') && !sample.test(l));
    return bad.length ? [`not Prometheus text: ${JSON.stringify(bad[0].slice(0, 80))}`] : [];
  },
  // The spec itself: YAML with `openapi: 3.1.x`.
  getOpenApi(body) {
    try {
      const doc = YAML.parse(body || '');
      if (!doc || !/^3\.1\./.test(String(doc.openapi))) return ['not an OpenAPI 3.1 document'];
      return [];
    } catch (e) {
      return [`not YAML: ${e.message.split('\n')[0]}`];
    }
  },
};

// Check a response against a documented response object. Returns problems.
function checkResponse(resp, ex, opId) {
  const problems = [];
  const body = ex.response_body;
  const content = resp.content || null;

  // Headers the response marks required, when the test recorded headers.
  if (ex.response_headers && typeof ex.response_headers === 'object') {
    for (const [name, h] of Object.entries(resp.headers || {})) {
      if (!h || !h.required) continue;
      const v = header(ex.response_headers, name);
      if (v === undefined) {
        problems.push(`missing required header ${name}`);
      } else {
        for (const p of check(h.schema, coerce(v.trim(), h.schema), 'value')) problems.push(`header ${name}: ${p}`);
      }
    }
  }

  if (!content || Object.keys(content).length === 0) {
    if (!isEmptyBody(body)) problems.push(`expected no body, got ${JSON.stringify(String(body).slice(0, 60))}`);
    return problems;
  }

  const ct = ex.response_content_type ?? (ex.response_headers ? header(ex.response_headers, 'content-type') : undefined);
  const mt = mediaType(ct);
  const media = findContent(content, mt);
  if (!media) {
    problems.push(`response content type ${JSON.stringify(ct || '')} not documented (documented: ${Object.keys(content).join(', ')})`);
    return problems;
  }
  if (isJsonType(mt)) {
    let data;
    try {
      data = JSON.parse(body);
    } catch {
      problems.push(`response body is not JSON: ${JSON.stringify(String(body ?? '').slice(0, 60))}`);
      return problems;
    }
    for (const p of check(media.schema, data)) problems.push(`response ${p}`);
  } else if (BODY_CHECKS[opId]) {
    problems.push(...BODY_CHECKS[opId](body));
  }
  return problems;
}

// Check what the server accepted (only called for 2xx answers).
function checkAcceptedRequest(route, ex, url) {
  const problems = [];
  const { op, item } = route;

  // Query parameters that were sent and are documented must be valid.
  const params = new Map();
  for (const p of [...(item.parameters || []), ...(op.parameters || [])]) params.set(`${p.in}:${p.name}`, p);
  for (const p of params.values()) {
    if (p.in !== 'query') continue;
    const v = url.searchParams.get(p.name);
    if (v === null) {
      if (p.required) problems.push(`accepted without required query parameter ${p.name}`);
      continue;
    }
    for (const e of check(p.schema, coerce(v, p.schema), 'value')) problems.push(`accepted query parameter ${p.name}=${JSON.stringify(v)}: ${e}`);
  }

  const rb = op.requestBody;
  if (!rb) return problems;
  if (isEmptyBody(ex.request_body)) {
    if (rb.required) problems.push('accepted a request without its required body');
    return problems;
  }
  const mt = mediaType(ex.request_content_type);
  const media = findContent(rb.content || {}, mt);
  if (!media) {
    problems.push(`accepted a request body of type ${JSON.stringify(ex.request_content_type || '')} (documented: ${Object.keys(rb.content || {}).join(', ')})`);
    return problems;
  }
  if (isJsonType(mt)) {
    let data;
    try {
      data = JSON.parse(ex.request_body);
    } catch {
      problems.push('accepted a request body that is not JSON');
      return problems;
    }
    for (const p of check(media.schema, data)) problems.push(`request ${p}`);
  }
  return problems;
}

// Check one exchange. Returns { problems, route }.
export function checkExchange(specInfo, ex) {
  const { spec, routes } = specInfo;
  if (!ex || typeof ex !== 'object') return { problems: ['exchange is not a JSON object'] };
  if (typeof ex.method !== 'string' || typeof ex.url !== 'string' || !Number.isInteger(ex.status)) {
    return { problems: ['exchange lacks method, url or an integer status'] };
  }
  let url;
  try {
    url = new URL(ex.url, 'http://localhost');
  } catch {
    return { problems: [`unparsable url ${JSON.stringify(ex.url)}`] };
  }
  const method = ex.method.toUpperCase();
  const { route, pathKnown } = findRoute(routes, method, url.pathname);

  if (ex.expect_off_spec) {
    if (route) return { problems: [`marked expect_off_spec but matches the documented operation ${route.id} (${route.method} ${route.template})`] };
    // Off-spec: 405 for a known path, 404 otherwise; 401 when auth comes first.
    const unrouted = spec['x-unrouted-responses'] || {};
    const want = pathKnown ? 405 : 404;
    let resp;
    if (ex.status === want) resp = unrouted[String(want)];
    else if (ex.status === 401) resp = spec.components.responses.Unauthorized;
    if (!resp) return { problems: [`off-spec request answered ${ex.status}; expected ${want}${pathKnown ? ' (the path exists with other methods)' : ' (no such path)'} or 401`] };
    return { problems: checkResponse(resp, ex, null) };
  }

  if (!route) {
    return { problems: [pathKnown ? `method ${method} is not documented for this path` : 'no operation in the spec matches this path'] };
  }
  const responses = route.op.responses || {};
  const resp = responses[String(ex.status)] || responses[`${String(ex.status)[0]}XX`] || responses.default;
  if (!resp) {
    return { route, problems: [`status ${ex.status} not documented for ${route.id} (documented: ${Object.keys(responses).join(', ')})`] };
  }
  const problems = checkResponse(resp, ex, route.op.operationId);
  if (ex.status >= 200 && ex.status < 300) problems.push(...checkAcceptedRequest(route, ex, url));
  return { route, problems };
}

// ---------------------------------------------------------------- main

function main(argv) {
  let specPath = null;
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--spec') specPath = argv[++i];
    else files.push(argv[i]);
  }

  // name -> specInfo; with --spec, one spec under every name.
  let specs;
  try {
    if (specPath) {
      const one = loadSpec(specPath);
      specs = { only: one, get: () => one };
    } else {
      const both = loadSpecs();
      specs = { ...both, get: (name) => both[name] };
    }
  } catch (e) {
    console.error(`api-spec: cannot load ${specPath || Object.values(SPEC_FILES).join(' / ')}: ${e.message}`);
    return 1;
  }

  let checked = 0;
  let failed = 0;
  const exercised = new Map(); // spec file -> Set of operation ids
  for (const file of files) {
    let text;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (e) {
      console.log(`FAIL ${file}: cannot read: ${e.message}`);
      failed++;
      continue;
    }
    text.split('\n').forEach((line, i) => {
      if (!line.trim()) return;
      checked++;
      let ex;
      try {
        ex = JSON.parse(line);
      } catch {
        console.log(`FAIL ${file}:${i + 1}: line is not JSON`);
        failed++;
        return;
      }
      const program = programOf(ex);
      const specInfo = specs.get(program);
      let result;
      if (!specInfo) {
        result = { problems: [`unknown program ${JSON.stringify(program)} (known: ${Object.keys(SPEC_FILES).join(', ')})`] };
      } else {
        try {
          result = checkExchange(specInfo, ex);
        } catch (e) {
          result = { problems: [`validator error: ${e.message}`] };
        }
      }
      if (result.route && result.problems.length === 0) {
        if (!exercised.has(specInfo.file)) exercised.set(specInfo.file, new Set());
        exercised.get(specInfo.file).add(result.route.id);
      }
      if (result.problems.length) {
        failed++;
        const against = specInfo ? ` (${specInfo.file})` : '';
        for (const p of result.problems) {
          console.log(`FAIL ${ex.method} ${ex.url} -> ${ex.status}${against}: ${p}  [${file}:${i + 1}]`);
        }
      }
    });
  }

  if (checked === 0) {
    console.log('api-spec: no exchanges given (the tests recorded nothing): failing');
  } else {
    // Informational: which documented operations no exchange exercised.
    const infos = specPath ? [specs.only] : Object.keys(SPEC_FILES).map((n) => specs[n]);
    for (const info of infos) {
      const ids = [...new Set(info.routes.map((r) => r.id))];
      const seen = exercised.get(info.file) || new Set();
      const missing = ids.filter((id) => !seen.has(id));
      console.log(`api-spec: ${info.file}: ${ids.length - missing.length}/${ids.length} operations exercised` +
        (missing.length ? `; not exercised: ${missing.join(', ')}` : ''));
    }
  }
  console.log(`api-spec: ${checked - failed} passed, ${failed} failed`);
  return failed > 0 || checked === 0 ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  process.exitCode = main(process.argv.slice(2));
}
