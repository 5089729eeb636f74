'use strict';
// netarena contestant: Express on Node.js, HTTP scenarios only.
// Usage: node server.js --port P --workers W --static-dir D --mongo-url URL (empty: no /mongo or /gridfs routes)
//        [--pg-url URL --pg-pool N (TechEmpower's /db, /queries, /fortunes, /updates, /cached-queries)]
// Started for netarena's h1-tls (NETARENA_PROTOCOL, with the PEM files NETARENA_TLS_CERT and NETARENA_TLS_KEY) the app
// is served by Node's https.createServer instead, Express's documented way to serve HTTPS: Node's OpenSSL, its
// default TLS versions (1.2 and 1.3) and its https server's default ALPN, http/1.1 alone.

const fs = require('node:fs');
const path = require('node:path');
const http = require('node:http');
const https = require('node:https');
const express = require('express');
const { LISTEN_BACKLOG, MAX_BYTES_LEN, MAX_SLEEP_MS, bytesBody, prebuildBytesBodies } = require('../_node-shared/catalog.js');
const { runWorkers, parseArgs, parsePort, parseWorkers, fail } = require('../_node-shared/cluster.js');
const { connectFixture, findDoc, streamGridfsFile } = require('../_node-shared/mongo.js');
const tfb = require('../_node-shared/pg.js');
const { startedFor } = require('../_node-shared/tls.js');

const opts = parseArgs(process.argv.slice(2), { host: '127.0.0.1', port: undefined, workers: '1', static_dir: undefined, mongo_url: '', pg_url: '', pg_pool: '10' });
const port = parsePort(opts.port);
const workers = parseWorkers(opts.workers);
const pgPool = tfb.parsePgPool(opts.pg_pool);
const { tls } = startedFor(['h1', 'h1-tls']); // tls null: cleartext
if (!fs.statSync(opts.static_dir, { throwIfNoEntry: false })?.isDirectory()) {
  fail(`--static-dir ${opts.static_dir} is not a directory; pass the folder holding the static file set`);
}

function intParam(text, max) {
  const value = Number(text);
  return Number.isInteger(value) && value >= 0 && value <= max ? value : null;
}

// TechEmpower's database scenarios: the queries and the page are contestants/_node-shared/pg.js's (one pg.Pool
// per process, `world` = { pool, cache }). Express has no template engine of its own (res.render needs a view
// engine package), so the fortunes are escaped by hand there, as node-http and node-fastify do.
function addPostgres(app, world) {
  // TechEmpower requires Server and Date on these answers (Node's http adds Date itself).
  app.use(tfb.ROUTES, (req, res, next) => {
    res.set('Server', 'node-express');
    next();
  });
  // Express 5 turns a rejected promise into a 500.
  app.get('/db', async (req, res) => res.json(await tfb.readWorld(world.pool)));
  app.get('/queries', async (req, res) => res.json(await tfb.readWorlds(world.pool, tfb.clampQueries(req.query.queries))));
  app.get('/updates', async (req, res) => res.json(await tfb.updateWorlds(world.pool, tfb.clampQueries(req.query.queries))));
  app.get('/cached-queries', (req, res) => res.json(tfb.cachedWorlds(world.cache, tfb.clampQueries(req.query.count))));
  app.get('/fortunes', async (req, res) => res.type('text/html; charset=utf-8').send(await tfb.fortunesPage(world.pool)));
}

function buildApp(world) {
  const app = express();
  app.get('/hello', (req, res) => {
    res.type('text/plain').send('Hello, World!');
  });
  app.get('/json', (req, res) => {
    res.json({ message: 'Hello, World!' });
  });
  app.get('/bytes/:n', (req, res) => {
    const n = intParam(req.params.n, MAX_BYTES_LEN);
    if (n === null) return res.sendStatus(404);
    res.type('application/octet-stream').send(bytesBody(n));
  });
  app.get('/sleep/:ms', (req, res) => {
    const ms = intParam(req.params.ms, MAX_SLEEP_MS);
    if (ms === null) return res.sendStatus(404);
    setTimeout(() => res.type('text/plain').send(`slept ${ms}`), ms);
  });
  if (opts.mongo_url) {
    const { docs, bucket } = connectFixture(require('mongodb'), opts.mongo_url);
    app.get('/mongo/:name', async (req, res) => {
      // Express 5 turns a rejected promise into a 500.
      const doc = await findDoc(docs, req.params.name);
      if (doc === null) return res.sendStatus(404);
      res.json(doc);
    });
    // Express 5's named wildcard: req.params.path holds the path's segments.
    app.get('/gridfs/*path', (req, res) => {
      const name = req.params.path.join('/');
      res.type(path.extname(name) || 'application/octet-stream'); // Express's own extension lookup
      streamGridfsFile(bucket, name, res, res.get('Content-Type'));
    });
  }
  if (world !== null) addPostgres(app, world);
  app.use('/static', express.static(opts.static_dir));
  return app;
}

async function start() {
  prebuildBytesBodies();
  // The /cached-queries copy of World is read before listening, so the server is ready only with it.
  let world = null;
  if (opts.pg_url) world = await tfb.connectWorldOrFail(require('pg'), opts.pg_url, pgPool);
  // http.createServer rather than app.listen() only to pass noDelay explicitly; https.createServer for h1-tls.
  const app = buildApp(world);
  const server = tls === null ? http.createServer({ noDelay: true }, app) : https.createServer({ noDelay: true, ...tls }, app);
  server.listen({ host: opts.host, port, backlog: LISTEN_BACKLOG });
}

runWorkers(workers, start);
