'use strict';
// TechEmpower's database scenarios (/db, /queries, /fortunes, /updates, /cached-queries) on PostgreSQL
// through node-postgres (`pg`), shared by node-http, node-fastify, node-express and node-hono. The contestant
// passes its own `pg` module (or, for node-fastify, the pool @fastify/postgres made) because `pg` is installed
// in the contestant's node_modules, not here.
//
// One pg.Pool per process of `poolSize` connections; pool.query checks a connection out for one query and
// returns it. node-postgres sends one query at a time on a connection: no pipelining.

const { fail } = require('./cluster.js');

const WORLD_ROWS = 10000;
const MAX_QUERIES = 500;
// The scenarios' paths, for a framework that sets the Server header TechEmpower requires on these alone.
const ROUTES = ['/db', '/queries', '/fortunes', '/updates', '/cached-queries'];
const EXTRA_FORTUNE = 'Additional fortune added at request time.';

// TechEmpower's clamp: a missing or non-numeric value is 1, then 1..500. `value` is the query parameter's
// text (undefined when missing).
function clampQueries(value) {
  const n = Number.parseInt(value, 10);
  if (!Number.isInteger(n) || n < 1) return 1;
  return Math.min(n, MAX_QUERIES);
}

// The value of `name` in a request target's query string (undefined when missing).
function queryParam(url, name) {
  const q = url.indexOf('?');
  return q < 0 ? undefined : new URLSearchParams(url.slice(q + 1)).get(name) ?? undefined;
}

function randomId() {
  return 1 + Math.floor(Math.random() * WORLD_ROWS);
}

// No template engine in these frameworks: the five characters HTML escaping needs, by hand.
const HTML_ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

// The copy of World taken at start for /cached-queries, indexed by id.
async function loadWorldCache(pool) {
  const cache = new Array(WORLD_ROWS + 1);
  const { rows } = await pool.query('SELECT id, randomnumber FROM world');
  for (const row of rows) cache[row.id] = { id: row.id, randomNumber: row.randomnumber };
  return cache;
}

// The --pg-pool value: a whole number >= 1, else the process ends saying so.
function parsePgPool(text) {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) fail(`--pg-pool must be a whole number >= 1, got ${JSON.stringify(text)}`);
  return n;
}

// A pool and the cache (resolves once the copy is read).
async function connectWorld(pg, url, poolSize) {
  const pool = new pg.Pool({ connectionString: url, max: poolSize });
  return { pool, cache: await loadWorldCache(pool) };
}

// connectWorld for a server's start: a database it cannot reach or read ends the process with the URL and why.
async function connectWorldOrFail(pg, url, poolSize) {
  try {
    return await connectWorld(pg, url, poolSize);
  } catch (err) {
    return fail(`--pg-url ${url}: ${err.message}`);
  }
}

// One row, by its own query (TechEmpower forbids reading several rows with one IN (...) query).
async function readWorld(pool) {
  const { rows } = await pool.query('SELECT id, randomnumber FROM world WHERE id = $1', [randomId()]);
  return { id: rows[0].id, randomNumber: rows[0].randomnumber };
}

// n rows, each by its own query, issued together: each takes a pool connection as one frees up.
function readWorlds(pool, n) {
  const reads = [];
  for (let i = 0; i < n; i++) reads.push(readWorld(pool));
  return Promise.all(reads);
}

async function updateWorlds(pool, n) {
  const rows = await readWorlds(pool, n);
  // An id drawn twice keeps its last number, in the answer too.
  const last = new Map();
  for (const row of rows) {
    row.randomNumber = randomId();
    last.set(row.id, row.randomNumber);
  }
  for (const row of rows) row.randomNumber = last.get(row.id);
  // One batched UPDATE (allowed), ids ascending so that concurrent requests lock rows in the same order
  // and cannot deadlock.
  const ids = [...last.keys()].sort((a, b) => a - b);
  await pool.query(
    'UPDATE world SET randomnumber = v.n FROM unnest($1::int[], $2::int[]) AS v(id, n) WHERE world.id = v.id',
    [ids, ids.map((id) => last.get(id))],
  );
  return rows;
}

function cachedWorlds(cache, n) {
  const rows = new Array(n);
  for (let i = 0; i < n; i++) rows[i] = cache[randomId()];
  return rows;
}

// Every fortune plus the one added per request, sorted by message: what TechEmpower's page lists.
async function fortunes(pool) {
  const { rows } = await pool.query('SELECT id, message FROM fortune');
  rows.push({ id: 0, message: EXTRA_FORTUNE });
  // Plain string order (UTF-16 code units: code-point order for these messages, all in the BMP), not the
  // locale's order, which localeCompare would give.
  rows.sort((a, b) => (a.message < b.message ? -1 : a.message > b.message ? 1 : 0));
  return rows;
}

// TechEmpower's page, escaped by hand, for the frameworks without a template engine.
async function fortunesPage(pool) {
  let page = '<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>';
  for (const row of await fortunes(pool)) page += `<tr><td>${row.id}</td><td>${escapeHtml(row.message)}</td></tr>`;
  return page + '</table></body></html>';
}

module.exports = { ROUTES, parsePgPool, clampQueries, queryParam, loadWorldCache, connectWorld, connectWorldOrFail, readWorld, readWorlds, updateWorlds, cachedWorlds, fortunes, fortunesPage };
