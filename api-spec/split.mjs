#!/usr/bin/env node
// split.mjs — generate one OpenAPI document per program from percolator.yaml.
//
// Usage: node split.mjs           write service.yaml and oracle.yaml
//        node split.mjs --check   exit 1 if either is missing or stale
//        --dir DIR                (either) the files in DIR, not api-spec/
//
// Why generated rather than split by hand: most of the spec (the error
// envelope, Health, Timestamp, the 4xx responses) is shared, and tools that
// users drive the API with (Prism, Portman, openapi-fetch) ignore per-path
// `servers` and want one self-contained document per server. One source
// keeps the shared parts in one place; each generated document holds only
// the paths its program serves (a path item's `x-programs`) and only the
// components those paths reach, with its own title, servers and description
// (`x-programs` at the top of the source). Comments and layout survive
// (the `yaml` package edits the parsed document in place).

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import YAML from 'yaml';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const SOURCE = path.join(HERE, 'percolator.yaml');

const BANNER = (name, file) =>
  `# ${file} — the OpenAPI document of percolator-${name}.\n` +
  '# GENERATED from percolator.yaml by split.mjs: do not edit; edit\n' +
  '# percolator.yaml and run `node api-spec/split.mjs` (make api-check fails\n' +
  '# while this file is stale).\n';

// Every local $ref string under a plain JS node.
function refsIn(node, out) {
  if (Array.isArray(node)) {
    for (const v of node) refsIn(v, out);
  } else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string' && v.startsWith('#/')) out.add(v);
      else refsIn(v, out);
    }
  }
  return out;
}

// The components ("section/name") reachable from the given roots.
function reachable(js, roots) {
  const seen = new Set();
  const todo = [...refsIn(roots, new Set())];
  while (todo.length) {
    const ref = todo.pop();
    const parts = ref.slice(2).split('/');
    if (parts[0] !== 'components' || parts.length < 3) continue;
    const key = `${parts[1]}/${parts[2]}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const target = js.components?.[parts[1]]?.[parts[2]];
    if (target === undefined) throw new Error(`unresolvable $ref: ${ref}`);
    todo.push(...refsIn(target, new Set()));
  }
  return seen;
}

// The programs a path item is for; every path must say.
function programsOf(template, item) {
  const p = item['x-programs'];
  if (!Array.isArray(p) || p.length === 0) throw new Error(`path ${template} has no x-programs`);
  return p;
}

// The document for one program, as YAML text.
export function generate(sourceText, name) {
  const doc = YAML.parseDocument(sourceText);
  if (doc.errors.length) throw new Error(doc.errors[0].message);
  const js = doc.toJS();
  const meta = js['x-programs']?.[name];
  if (!meta) throw new Error(`no x-programs.${name} in the source`);

  // Paths: keep this program's, without the x-programs marker.
  const usedTags = new Set();
  for (const [template, item] of Object.entries(js.paths)) {
    if (!programsOf(template, item).includes(name)) {
      doc.deleteIn(['paths', template]);
      delete js.paths[template];
      continue;
    }
    doc.deleteIn(['paths', template, 'x-programs']);
    for (const op of Object.values(item)) for (const t of op?.tags || []) usedTags.add(t);
  }

  // The source's section comments between paths would pile up where
  // paths were taken out: drop them.
  const pathsMap = doc.get('paths');
  pathsMap.commentBefore = null;
  for (const pair of pathsMap.items) pair.key.commentBefore = null;
  if (pathsMap.items.length) pathsMap.items[0].key.spaceBefore = false;

  // Top: this program's title, summary, description and servers.
  const own = doc.getIn(['x-programs', name], true);
  doc.setIn(['info', 'title'], meta.title);
  doc.setIn(['info', 'summary'], meta.summary);
  doc.setIn(['info', 'description'], own.get('description', true));
  doc.delete('x-programs');
  // servers right after info, where a reader looks for them.
  const items = doc.contents.items;
  const at = items.findIndex((pair) => pair.key.value === 'info');
  items.splice(at + 1, 0, doc.createPair('servers', own.get('servers', true)));

  // Tags and components: only those this document uses.
  const tags = doc.get('tags');
  if (tags) tags.items = tags.items.filter((t) => usedTags.has(t.get('name')));
  const keep = reachable(js, [js.paths, js['x-unrouted-responses']]);
  for (const [section, entries] of Object.entries(js.components || {})) {
    if (section === 'securitySchemes') continue; // named by `security`, not by $ref
    for (const entry of Object.keys(entries)) {
      if (!keep.has(`${section}/${entry}`)) doc.deleteIn(['components', section, entry]);
    }
  }

  // The source's header comment is about the source: drop it.
  doc.commentBefore = null;
  doc.contents.commentBefore = null;
  items[0].key.commentBefore = null;
  // The banner goes after the first line: a document starts with
  // `openapi: 3.1.x`, which some tools (and our tests) look for.
  const text = doc.toString({ lineWidth: 0, flowCollectionPadding: false, doubleQuotedAsJSON: true });
  const nl = text.indexOf('\n') + 1;
  return text.slice(0, nl) + BANNER(name, meta.file) + text.slice(nl);
}

// The programs the source defines: [{ name, file }].
export function programs(sourceText) {
  const js = YAML.parse(sourceText);
  return Object.entries(js['x-programs'] || {}).map(([name, m]) => ({ name, file: m.file }));
}

function main(argv) {
  const check = argv.includes('--check');
  const i = argv.indexOf('--dir');
  const dir = i >= 0 && argv[i + 1] ? argv[i + 1] : HERE;
  const source = fs.readFileSync(SOURCE, 'utf8');
  let stale = 0;
  for (const { name, file } of programs(source)) {
    const out = path.join(dir, file);
    const text = generate(source, name);
    const old = fs.existsSync(out) ? fs.readFileSync(out, 'utf8') : null;
    if (old === text) continue;
    if (check) {
      console.log(`api-spec: ${file} is stale: run node api-spec/split.mjs and commit it`);
      stale++;
    } else {
      fs.writeFileSync(out, text);
      console.log(`api-spec: wrote ${file}`);
    }
  }
  if (check && stale === 0) console.log('api-spec: service.yaml and oracle.yaml are up to date with percolator.yaml');
  return stale ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (e) {
    console.error(`api-spec: split.mjs: ${e.message}`);
    process.exitCode = 1;
  }
}
