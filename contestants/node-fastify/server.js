'use strict';
// netarena contestant: Fastify on Node.js, HTTP scenarios only.
// Usage: node server.js --host H --port P --workers W --static-dir D --mongo-url URL (empty: no /mongo or /gridfs routes)
//        [--pg-url URL --pg-pool N (TechEmpower's /db, /queries, /fortunes, /updates, /cached-queries)]
//
// Fastify's documented production set-up: the logger off (Fastify's default; its docs warn that logging every
// request costs throughput), a response schema on /json so fast-json-stringify serializes it (the docs'
// recommended way to serialize), @fastify/static for files, fastify.listen(). Node's http server underneath
// sets TCP_NODELAY on accepted sockets by default (http.createServer's noDelay, true since Node 18).
// NETARENA_PROTOCOL says what it serves, each through Fastify's own options (its HTTP/2 reference page): h1-tls with
// `https` (the PEM files NETARENA_TLS_CERT and NETARENA_TLS_KEY), so Fastify builds Node's https server (Node's
// OpenSSL, its default TLS 1.2 and 1.3, the https server's default ALPN, http/1.1 alone); h2 with `http2` and
// `https`, so it builds http2.createSecureServer, allowHTTP1 false so that ALPN offers h2 alone; h2c with `http2`
// alone, http2.createServer (prior knowledge).

const fs = require('node:fs');
const Fastify = require('fastify');
const fastifyStatic = require('@fastify/static');
const mime = require('mime');
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

const JSON_SCHEMA = {
  response: { 200: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] } },
};

// TechEmpower's database scenarios through @fastify/postgres, Fastify's PostgreSQL plugin: it makes one
// node-postgres pg.Pool (max = --pg-pool) and decorates the app with it as app.pg. The queries and the page
// are contestants/_node-shared/pg.js's; Fastify has no template engine of its own, so the fortunes are
// escaped by hand there. The /cached-queries copy of World is read in an onReady hook: listen() waits for it.
function addPostgres(app) {
  app.register(require('@fastify/postgres'), { connectionString: opts.pg_url, max: pgPool });
  let cache = null;
  app.addHook('onReady', async () => {
    try {
      cache = await tfb.loadWorldCache(app.pg.pool);
    } catch (err) {
      fail(`--pg-url ${opts.pg_url}: ${err.message}`);
    }
  });
  // TechEmpower requires Server and Date on these answers (Node's http adds Date itself).
  const serverHeader = (req, reply, done) => {
    reply.header('Server', 'node-fastify');
    done();
  };
  app.register(async (routes) => {
    routes.addHook('onRequest', serverHeader);
    routes.get('/db', () => tfb.readWorld(app.pg.pool));
    routes.get('/queries', (req) => tfb.readWorlds(app.pg.pool, tfb.clampQueries(req.query.queries)));
    routes.get('/updates', (req) => tfb.updateWorlds(app.pg.pool, tfb.clampQueries(req.query.queries)));
    routes.get('/cached-queries', async (req) => tfb.cachedWorlds(cache, tfb.clampQueries(req.query.count)));
    routes.get('/fortunes', async (req, reply) => {
      reply.type('text/html; charset=utf-8');
      return tfb.fortunesPage(app.pg.pool);
    });
  });
}

// Node's http2 servers set TCP_NODELAY on every connection themselves, as its http server does.
function serverOptions() {
  if (protocol === 'h1') return {};
  if (protocol === 'h1-tls') return { https: tls };
  if (protocol === 'h2') return { http2: true, https: { ...tls, allowHTTP1: false } };
  return { http2: true };
}

function buildApp() {
  const app = Fastify({ logger: false, ...serverOptions() });
  app.get('/hello', (req, reply) => {
    reply.type('text/plain').send('Hello, World!');
  });
  app.get('/json', { schema: JSON_SCHEMA }, (req, reply) => {
    reply.send({ message: 'Hello, World!' });
  });
  app.get('/bytes/:n', (req, reply) => {
    const n = intParam(req.params.n, MAX_BYTES_LEN);
    if (n === null) return reply.code(404).send();
    reply.type('application/octet-stream').send(bytesBody(n));
  });
  app.get('/sleep/:ms', (req, reply) => {
    const ms = intParam(req.params.ms, MAX_SLEEP_MS);
    if (ms === null) return reply.code(404).send();
    setTimeout(() => reply.type('text/plain').send(`slept ${ms}`), ms);
    return reply; // tells Fastify the reply is sent later, from the timer
  });
  if (opts.mongo_url) {
    const { docs, bucket } = connectFixture(require('mongodb'), opts.mongo_url);
    // An async handler's returned object is serialized by reply.send (JSON.stringify: the document has no
    // fixed schema); a rejected promise becomes a 500.
    app.get('/mongo/:name', async (req, reply) => {
      const doc = await findDoc(docs, req.params.name);
      if (doc === null) return reply.code(404).send();
      return doc;
    });
    // The driver's GridFSBucket stream piped into Node's response (shared with node-express): the handler
    // takes the response over from Fastify (reply.hijack), the route's documented way to write it directly.
    app.get('/gridfs/*', (req, reply) => {
      const name = req.params['*'];
      reply.hijack();
      streamGridfsFile(bucket, name, reply.raw, mime.getType(name) ?? 'application/octet-stream');
    });
  }
  if (opts.pg_url) addPostgres(app);
  app.register(fastifyStatic, { root: opts.static_dir, prefix: '/static/' });
  return app;
}

function start() {
  prebuildBytesBodies();
  buildApp().listen({ host: opts.host, port, backlog: LISTEN_BACKLOG }, (err) => {
    if (err) fail(`cannot listen on ${opts.host} port ${port}: ${err.message}`);
  });
}

runWorkers(workers, start);
