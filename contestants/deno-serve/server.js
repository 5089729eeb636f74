// netarena contestant: Deno.serve, Deno's own HTTP server, HTTP scenarios only.
// Usage: deno run --allow-net --allow-read --allow-env --allow-sys server.js --host H --port P --static-dir D --mongo-url URL
//        [--pg-url URL --pg-pool N (TechEmpower's /db, /queries, /fortunes, /updates, /cached-queries)]
//
// Deno.serve with a handler routing on the URL's path (Deno.serve has no router), Response.json per request,
// and the documented listen options: tcpBacklog 4096 (its default is 511, below the catalog's 1024).
// One process, one event loop: `deno serve --parallel`, Deno's own multi-core mode, listens with the default
// backlog and takes no other, and reusePort for several processes is an unstable API (--unstable-net).
// Static files: Deno's static-file facility is @std/http's serveDir, published on JSR only, a registry this
// project cannot reach; the file is opened and its stream returned (Deno's documented way to send a file),
// written here like node-http's.
// NETARENA_PROTOCOL: h1 and h2c are served by the same cleartext listener (Deno.serve tells an HTTP/1.1 request and
// HTTP/2's prior-knowledge preface apart by a connection's first bytes). Nothing over TLS: Deno.serve given a
// certificate and key offers h2 beside http/1.1 by ALPN (so it cannot serve h1-tls) and leaves TCP_NODELAY off on
// the connections it accepts, with no option to set it (so over h2 a response's last segment waits for the
// client's delayed ACK); the manifest's notes say more.

import { createRequire } from 'node:module';
import * as path from 'node:path';

// The catalog's limits, /bytes bodies and argument parsing are the Node contestants' (CommonJS).
const require = createRequire(import.meta.url);
const { LISTEN_BACKLOG, MAX_BYTES_LEN, MAX_SLEEP_MS, bytesBody, prebuildBytesBodies } = require('../_node-shared/catalog.js');
const { parseArgs, parsePort, fail } = require('../_node-shared/cluster.js');
const { connectFixture, findDoc } = require('../_node-shared/mongo.js');
const tfb = require('../_node-shared/pg.js');
const { startedFor } = require('../_node-shared/tls.js');

const opts = parseArgs(Deno.args, { host: '127.0.0.1', port: undefined, static_dir: undefined, mongo_url: '', pg_url: '', pg_pool: '10' });
const port = parsePort(opts.port);
const pgPool = tfb.parsePgPool(opts.pg_pool);
startedFor(['h1', 'h2c']);
let staticRoot;
try {
  if (!Deno.statSync(opts.static_dir).isDirectory) throw new Error();
  staticRoot = Deno.realPathSync(opts.static_dir);
} catch {
  fail(`--static-dir ${opts.static_dir} is not a directory; pass the folder holding the static file set`);
}

function intParam(text, max) {
  const value = Number(text);
  return Number.isInteger(value) && value >= 0 && value <= max ? value : null;
}

const notFound = () => new Response('not found', { status: 404, headers: { 'Content-Type': 'text/plain' } });

const STATIC_TYPES = { '.jpg': 'image/jpeg', '.html': 'text/html', '.txt': 'text/plain' };

// /static/{path}: the file under the static folder streamed with its length, or 404. The URL parser already
// removed dot segments; the check on the resolved path refuses what percent-decoding could still add (%2F..).
async function staticFile(pathname) {
  let file;
  try {
    file = path.resolve(staticRoot, decodeURIComponent(pathname.slice('/static/'.length)));
  } catch {
    return notFound();
  }
  if (!file.startsWith(staticRoot + path.sep)) return notFound();
  let handle;
  try {
    handle = await Deno.open(file);
    const info = await handle.stat();
    if (!info.isFile) throw new Deno.errors.NotFound();
    const type = STATIC_TYPES[path.extname(file)] ?? 'application/octet-stream';
    return new Response(handle.readable, { headers: { 'Content-Type': type, 'Content-Length': String(info.size) } });
  } catch (err) {
    handle?.close();
    if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.IsADirectory) return notFound();
    throw err;
  }
}

// TechEmpower's database scenarios: the queries and the page are contestants/_node-shared/pg.js's, node-postgres
// (`pg`) from node_modules through Deno's npm support, one pg.Pool (`world` = { pool, cache }). Deno.serve has
// no template engine, so the fortunes are escaped by hand there. The answer to `pathname`, or null for another
// path; a rejected promise becomes Deno.serve's 500.
async function techempower(world, pathname, params) {
  // TechEmpower requires Server and Date on these answers (Deno.serve adds Date itself).
  const json = (value) => Response.json(value, { headers: { Server: 'deno-serve' } });
  if (pathname === '/db') return json(await tfb.readWorld(world.pool));
  if (pathname === '/queries') return json(await tfb.readWorlds(world.pool, tfb.clampQueries(params.get('queries') ?? undefined)));
  if (pathname === '/updates') return json(await tfb.updateWorlds(world.pool, tfb.clampQueries(params.get('queries') ?? undefined)));
  if (pathname === '/cached-queries') return json(tfb.cachedWorlds(world.cache, tfb.clampQueries(params.get('count') ?? undefined)));
  if (pathname === '/fortunes') {
    return new Response(await tfb.fortunesPage(world.pool), { headers: { Server: 'deno-serve', 'Content-Type': 'text/html; charset=utf-8' } });
  }
  return null;
}

function handler(world) {
  const docs = opts.mongo_url ? connectFixture(require('mongodb'), opts.mongo_url).docs : null;
  return async (req) => {
    if (req.method !== 'GET') return new Response('method not allowed', { status: 405 });
    const { pathname, searchParams } = new URL(req.url);
    if (world !== null && tfb.ROUTES.includes(pathname)) return techempower(world, pathname, searchParams);
    if (pathname === '/hello') return new Response('Hello, World!', { headers: { 'Content-Type': 'text/plain' } });
    if (pathname === '/json') return Response.json({ message: 'Hello, World!' });
    if (pathname.startsWith('/bytes/')) {
      const n = intParam(pathname.slice('/bytes/'.length), MAX_BYTES_LEN);
      if (n === null) return notFound();
      return new Response(bytesBody(n), { headers: { 'Content-Type': 'application/octet-stream' } });
    }
    if (pathname.startsWith('/sleep/')) {
      const ms = intParam(pathname.slice('/sleep/'.length), MAX_SLEEP_MS);
      if (ms === null) return notFound();
      await new Promise((resolve) => setTimeout(resolve, ms));
      return new Response(`slept ${ms}`, { headers: { 'Content-Type': 'text/plain' } });
    }
    if (pathname.startsWith('/static/')) return staticFile(pathname);
    if (docs && pathname.startsWith('/mongo/')) {
      // A rejected promise becomes Deno.serve's 500.
      const doc = await findDoc(docs, decodeURIComponent(pathname.slice('/mongo/'.length)));
      return doc === null ? notFound() : Response.json(doc);
    }
    return notFound();
  };
}

async function serve() {
  prebuildBytesBodies();
  // The /cached-queries copy of World is read before listening, so the server is ready only with it.
  const world = opts.pg_url ? await tfb.connectWorldOrFail(require('pg'), opts.pg_url, pgPool) : null;
  for (const sig of ['SIGTERM', 'SIGINT']) Deno.addSignalListener(sig, () => Deno.exit(0));
  Deno.serve({
    hostname: opts.host,
    port,
    tcpBacklog: LISTEN_BACKLOG,
    onListen() {}, // Deno prints a line per listen otherwise
  }, handler(world));
}

serve();
