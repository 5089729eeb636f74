'use strict';
// netarena contestant: Hono on Node.js through @hono/node-server, HTTP scenarios only.
// Usage: node server.js --host H --port P --workers W --static-dir D --mongo-url URL (empty: no /mongo or /gridfs routes)
//        [--pg-url URL --pg-pool N (TechEmpower's /db, /queries, /fortunes, /updates, /cached-queries)]
//
// Hono's Node set-up as its docs give it: the app's fetch handler served by @hono/node-server, serveStatic from
// @hono/node-server for files. createAdaptorServer is what serve() calls before listening; it is used instead
// of serve() only to listen with the catalog's backlog (serve() listens with Node's default of 511).
// NETARENA_PROTOCOL says which Node server the adapter builds, through @hono/node-server's documented `createServer`
// option (the certificate and key, the PEM files NETARENA_TLS_CERT and NETARENA_TLS_KEY, in `serverOptions`):
// http.createServer for h1; https.createServer for h1-tls (Node's OpenSSL, its default TLS 1.2 and 1.3, the https
// server's default ALPN, http/1.1 alone); http2.createSecureServer for h2 (allowHTTP1 false, so ALPN offers h2
// alone), http2.createServer for h2c (prior knowledge), as Hono's Node.js page shows for HTTP/2.

const fs = require('node:fs');
const http = require('node:http');
const http2 = require('node:http2');
const https = require('node:https');
const { Hono } = require('hono');
const { createAdaptorServer } = require('@hono/node-server');
const { serveStatic } = require('@hono/node-server/serve-static');
const { RESPONSE_ALREADY_SENT } = require('@hono/node-server/utils/response');
const { getMimeType } = require('hono/utils/mime');
const { html } = require('hono/html');
const { LISTEN_BACKLOG, MAX_BYTES_LEN, MAX_SLEEP_MS, bytesBody, prebuildBytesBodies } = require('../_node-shared/catalog.js');
const { runWorkers, parseArgs, parsePort, parseWorkers, fail } = require('../_node-shared/cluster.js');
const { connectFixture, findDoc, streamGridfsFile } = require('../_node-shared/mongo.js');
const tfb = require('../_node-shared/pg.js');
const { startedFor } = require('../_node-shared/tls.js');

const opts = parseArgs(process.argv.slice(2), { host: '127.0.0.1', port: undefined, workers: '1', static_dir: undefined, mongo_url: '', pg_url: '', pg_pool: '10' });
const port = parsePort(opts.port);
const workers = parseWorkers(opts.workers);
const pgPool = tfb.parsePgPool(opts.pg_pool);
const { protocol, tls } = startedFor(['h1', 'h1-tls', 'h2', 'h2c']); // tls null: cleartext
if (!fs.statSync(opts.static_dir, { throwIfNoEntry: false })?.isDirectory()) {
  fail(`--static-dir ${opts.static_dir} is not a directory; pass the folder holding the static file set`);
}

function intParam(text, max) {
  const value = Number(text);
  return Number.isInteger(value) && value >= 0 && value <= max ? value : null;
}

// TechEmpower's database scenarios: the queries are contestants/_node-shared/pg.js's (one pg.Pool per process,
// `world` = { pool, cache }); the fortunes page is Hono's html template helper (hono/html), which escapes every
// interpolated string.
function addPostgres(app, world) {
  // TechEmpower requires Server and Date on these answers (Node's http adds Date itself).
  for (const route of tfb.ROUTES) {
    app.use(route, async (c, next) => {
      c.header('Server', 'node-hono');
      await next();
    });
  }
  app.get('/db', async (c) => c.json(await tfb.readWorld(world.pool)));
  app.get('/queries', async (c) => c.json(await tfb.readWorlds(world.pool, tfb.clampQueries(c.req.query('queries')))));
  app.get('/updates', async (c) => c.json(await tfb.updateWorlds(world.pool, tfb.clampQueries(c.req.query('queries')))));
  app.get('/cached-queries', (c) => c.json(tfb.cachedWorlds(world.cache, tfb.clampQueries(c.req.query('count')))));
  app.get('/fortunes', async (c) => {
    const rows = await tfb.fortunes(world.pool);
    return c.html(html`<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>${rows.map((row) => html`<tr><td>${row.id}</td><td>${row.message}</td></tr>`)}</table></body></html>`);
  });
}

function buildApp(world) {
  const app = new Hono();
  app.get('/hello', (c) => c.text('Hello, World!'));
  app.get('/json', (c) => c.json({ message: 'Hello, World!' }));
  app.get('/bytes/:n', (c) => {
    const n = intParam(c.req.param('n'), MAX_BYTES_LEN);
    if (n === null) return c.notFound();
    return c.body(bytesBody(n), 200, { 'Content-Type': 'application/octet-stream' });
  });
  app.get('/sleep/:ms', async (c) => {
    const ms = intParam(c.req.param('ms'), MAX_SLEEP_MS);
    if (ms === null) return c.notFound();
    await new Promise((resolve) => setTimeout(resolve, ms));
    return c.text(`slept ${ms}`);
  });
  if (opts.mongo_url) {
    const { docs, bucket } = connectFixture(require('mongodb'), opts.mongo_url);
    // A rejected promise becomes Hono's 500.
    app.get('/mongo/:name', async (c) => {
      const doc = await findDoc(docs, c.req.param('name'));
      if (doc === null) return c.notFound();
      return c.json(doc);
    });
    // The driver's GridFSBucket stream piped into Node's response (shared with node-express): @hono/node-server
    // hands the handler Node's response as c.env.outgoing, and RESPONSE_ALREADY_SENT tells it the handler wrote it.
    app.get('/gridfs/:path{.+}', (c) => {
      const name = c.req.param('path'); // the rest of the path, slashes included, percent-decoded
      streamGridfsFile(bucket, name, c.env.outgoing, getMimeType(name) ?? 'application/octet-stream');
      return RESPONSE_ALREADY_SENT;
    });
  }
  if (world !== null) addPostgres(app, world);
  app.use('/static/*', serveStatic({ root: opts.static_dir, rewriteRequestPath: (p) => p.slice('/static'.length) }));
  return app;
}

function nodeServer() {
  if (protocol === 'h1') return { createServer: http.createServer, serverOptions: { noDelay: true } };
  if (protocol === 'h1-tls') return { createServer: https.createServer, serverOptions: { noDelay: true, ...tls } };
  if (protocol === 'h2') return { createServer: http2.createSecureServer, serverOptions: { noDelay: true, ...tls, allowHTTP1: false } };
  return { createServer: http2.createServer, serverOptions: { noDelay: true } };
}

async function start() {
  prebuildBytesBodies();
  // The /cached-queries copy of World is read before listening, so the server is ready only with it.
  const world = opts.pg_url ? await tfb.connectWorldOrFail(require('pg'), opts.pg_url, pgPool) : null;
  // noDelay is Node's default since 18 (its http2 servers set it too); passed so the TCP_NODELAY the catalog asks
  // for is visible here.
  const server = createAdaptorServer({ fetch: buildApp(world).fetch, ...nodeServer() });
  server.on('error', (err) => fail(`cannot listen on ${opts.host} port ${port}: ${err.message}`));
  server.listen({ host: opts.host, port, backlog: LISTEN_BACKLOG });
}

runWorkers(workers, start);
