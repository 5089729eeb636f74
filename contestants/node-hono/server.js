'use strict';
// netarena contestant: Hono on Node.js through @hono/node-server, HTTP scenarios only.
// Usage: node server.js --host H --port P --workers W --static-dir D --mongo-url URL (empty: no /mongo or /gridfs routes)
//
// Hono's Node set-up as its docs give it: the app's fetch handler served by @hono/node-server, serveStatic from
// @hono/node-server for files. createAdaptorServer is what serve() calls before listening; it is used instead
// of serve() only to listen with the catalog's backlog (serve() listens with Node's default of 511).

const fs = require('node:fs');
const { Hono } = require('hono');
const { createAdaptorServer } = require('@hono/node-server');
const { serveStatic } = require('@hono/node-server/serve-static');
const { RESPONSE_ALREADY_SENT } = require('@hono/node-server/utils/response');
const { getMimeType } = require('hono/utils/mime');
const { LISTEN_BACKLOG, MAX_BYTES_LEN, MAX_SLEEP_MS, bytesBody, prebuildBytesBodies } = require('../_node-shared/catalog.js');
const { runWorkers, parseArgs, parsePort, parseWorkers, fail } = require('../_node-shared/cluster.js');
const { connectFixture, findDoc, streamGridfsFile } = require('../_node-shared/mongo.js');

const opts = parseArgs(process.argv.slice(2), { host: '127.0.0.1', port: undefined, workers: '1', static_dir: undefined, mongo_url: '' });
const port = parsePort(opts.port);
const workers = parseWorkers(opts.workers);
if (!fs.statSync(opts.static_dir, { throwIfNoEntry: false })?.isDirectory()) {
  fail(`--static-dir ${opts.static_dir} is not a directory; pass the folder holding the static file set`);
}

function intParam(text, max) {
  const value = Number(text);
  return Number.isInteger(value) && value >= 0 && value <= max ? value : null;
}

function buildApp() {
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
  app.use('/static/*', serveStatic({ root: opts.static_dir, rewriteRequestPath: (p) => p.slice('/static'.length) }));
  return app;
}

function start() {
  prebuildBytesBodies();
  // noDelay is Node's default since 18; passed so the TCP_NODELAY the catalog asks for is visible here.
  const server = createAdaptorServer({ fetch: buildApp().fetch, serverOptions: { noDelay: true } });
  server.on('error', (err) => fail(`cannot listen on ${opts.host} port ${port}: ${err.message}`));
  server.listen({ host: opts.host, port, backlog: LISTEN_BACKLOG });
}

runWorkers(workers, start);
