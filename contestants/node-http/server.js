'use strict';
// netarena contestant: Node.js core `http` for the HTTP scenarios, core `net` for echo.
// Usage: node server.js --mode http|echo --port P --workers W [--static-dir D] [--mongo-url URL (empty: no /mongo or /gridfs routes)]
//        [--pg-url URL --pg-pool N (TechEmpower's /db, /queries, /fortunes, /updates, /cached-queries)]
// With NETARENA_TLS_CERT and NETARENA_TLS_KEY (PEM files; netarena's h1-tls protocol) it serves HTTPS with core
// `https` (Node's OpenSSL) instead of cleartext: ALPN http/1.1, Node's default TLS versions (1.2 and 1.3).
// NETARENA_PROTOCOL says which protocol: h2 serves HTTP/2 over TLS with core `http2` (createSecureServer, ALPN h2
// alone), h2c cleartext HTTP/2 with prior knowledge (http2.createServer); the same handler through http2's
// compatibility API (request.url, response.writeHead/end, streams piped into the response).

const fs = require('node:fs');
const http = require('node:http');
const http2 = require('node:http2');
const https = require('node:https');
const net = require('node:net');
const path = require('node:path');
const { LISTEN_BACKLOG, MAX_BYTES_LEN, MAX_SLEEP_MS, bytesBody, prebuildBytesBodies } = require('../_node-shared/catalog.js');
const { runWorkers, parseArgs, parsePort, parseWorkers, fail } = require('../_node-shared/cluster.js');
const { connectFixture, findDoc, streamGridfsFile } = require('../_node-shared/mongo.js');
const tfb = require('../_node-shared/pg.js');

const CONTENT_TYPES = {
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.png': 'image/png',
  '.html': 'text/html',
  '.txt': 'text/plain',
  '.json': 'application/json',
};

const opts = parseArgs(process.argv.slice(2), { mode: undefined, host: '127.0.0.1', port: undefined, workers: '1', static_dir: '', mongo_url: '', pg_url: '', pg_pool: '10' });
if (opts.mode !== 'http' && opts.mode !== 'echo') fail(`--mode must be http or echo, got ${JSON.stringify(opts.mode)}`);
const port = parsePort(opts.port);
const workers = parseWorkers(opts.workers);
const pgPool = tfb.parsePgPool(opts.pg_pool);
const staticRoot = opts.static_dir ? path.resolve(opts.static_dir) : '';
if (opts.mode === 'http' && staticRoot && !fs.statSync(staticRoot, { throwIfNoEntry: false })?.isDirectory()) {
  fail(`--static-dir ${staticRoot} is not a directory; pass the folder holding the static file set`);
}

function send(res, status, contentType, body) {
  res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function notFound(res) {
  send(res, 404, 'text/plain', 'not found');
}

// Raw `http` has no static-file facility, so this is the hand-written version its users write:
// stat for the length, then stream the file. No ETag, ranges or caching headers.
function serveStatic(req, res, rel) {
  let decoded;
  try {
    decoded = decodeURIComponent(rel);
  } catch {
    return notFound(res);
  }
  const file = path.join(staticRoot, decoded);
  if (!staticRoot || !file.startsWith(staticRoot + path.sep)) return notFound(res);
  fs.stat(file, (err, st) => {
    if (err || !st.isFile()) return notFound(res);
    res.writeHead(200, {
      'Content-Type': CONTENT_TYPES[path.extname(file)] || 'application/octet-stream',
      'Content-Length': st.size,
    });
    const stream = fs.createReadStream(file);
    stream.on('error', () => res.destroy());
    stream.pipe(res);
  });
}

let mongo = null; // { docs, bucket } with --mongo-url

function serveMongo(res, rel) {
  let name;
  try {
    name = decodeURIComponent(rel);
  } catch {
    return notFound(res);
  }
  findDoc(mongo.docs, name).then(
    (doc) => (doc === null ? notFound(res) : send(res, 200, 'application/json', JSON.stringify(doc))),
    () => send(res, 500, 'text/plain', 'database error'),
  );
}

let world = null; // { pool, cache } with --pg-url

// TechEmpower requires Server and Date on these answers (Node's http adds Date itself).
function sendTfb(res, contentType, body) {
  res.writeHead(200, { Server: 'node-http', 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function serveTfb(res, url) {
  const route = url.split('?')[0];
  let answer;
  if (route === '/db') answer = tfb.readWorld(world.pool);
  else if (route === '/queries') answer = tfb.readWorlds(world.pool, tfb.clampQueries(tfb.queryParam(url, 'queries')));
  else if (route === '/updates') answer = tfb.updateWorlds(world.pool, tfb.clampQueries(tfb.queryParam(url, 'queries')));
  else if (route === '/cached-queries') {
    return sendTfb(res, 'application/json', JSON.stringify(tfb.cachedWorlds(world.cache, tfb.clampQueries(tfb.queryParam(url, 'count')))));
  } else if (route === '/fortunes') {
    return tfb.fortunesPage(world.pool).then(
      (page) => sendTfb(res, 'text/html; charset=utf-8', page),
      (err) => send(res, 500, 'text/plain', `database error: ${err.message}`),
    );
  } else return false;
  answer.then(
    (rows) => sendTfb(res, 'application/json', JSON.stringify(rows)),
    (err) => send(res, 500, 'text/plain', `database error: ${err.message}`),
  );
  return true;
}

function handle(req, res) {
  const url = req.url;
  if (url === '/hello') return send(res, 200, 'text/plain', 'Hello, World!');
  if (url === '/json') return send(res, 200, 'application/json', JSON.stringify({ message: 'Hello, World!' }));
  if (url.startsWith('/bytes/')) {
    const n = Number(url.slice(7));
    if (!Number.isInteger(n) || n < 0 || n > MAX_BYTES_LEN) return notFound(res);
    return send(res, 200, 'application/octet-stream', bytesBody(n));
  }
  if (url.startsWith('/sleep/')) {
    const ms = Number(url.slice(7));
    if (!Number.isInteger(ms) || ms < 0 || ms > MAX_SLEEP_MS) return notFound(res);
    setTimeout(() => send(res, 200, 'text/plain', `slept ${ms}`), ms);
    return;
  }
  if (url.startsWith('/static/')) return serveStatic(req, res, url.slice(8).split('?')[0]);
  if (mongo !== null && url.startsWith('/mongo/')) return serveMongo(res, url.slice(7).split('?')[0]);
  if (mongo !== null && url.startsWith('/gridfs/')) {
    const name = url.slice(8).split('?')[0];
    return streamGridfsFile(mongo.bucket, name, res, CONTENT_TYPES[path.extname(name)] || 'application/octet-stream');
  }
  if (world !== null && serveTfb(res, url) !== false) return;
  notFound(res);
}

async function startHttp() {
  prebuildBytesBodies();
  // The /cached-queries copy of World is read before listening, so the server is ready only with it.
  if (opts.pg_url) world = await tfb.connectWorldOrFail(require('pg'), opts.pg_url, pgPool);
  // Required only when asked for, so the other scenarios run without `npm ci`.
  if (opts.mongo_url) mongo = connectFixture(require('mongodb'), opts.mongo_url);
  server(process.env.NETARENA_PROTOCOL || (process.env.NETARENA_TLS_CERT ? 'h1-tls' : 'h1'))
    .listen({ host: opts.host, port, backlog: LISTEN_BACKLOG });
}

// The server for netarena's protocol, each alone: a server started for one never speaks another (h1-tls offers
// http/1.1 only by ALPN, h2 offers h2 only: allowHTTP1 stays false).
function server(protocol) {
  const tls = () => {
    if (!process.env.NETARENA_TLS_CERT) fail(`NETARENA_PROTOCOL=${protocol} is over TLS: NETARENA_TLS_CERT and NETARENA_TLS_KEY are needed`);
    return { cert: fs.readFileSync(process.env.NETARENA_TLS_CERT), key: fs.readFileSync(process.env.NETARENA_TLS_KEY) };
  };
  if (protocol === 'h1') return http.createServer({ noDelay: true }, handle);
  if (protocol === 'h1-tls') return https.createServer({ noDelay: true, ...tls(), ALPNProtocols: ['http/1.1'] }, handle);
  if (protocol === 'h2') return http2.createSecureServer({ noDelay: true, ...tls() }, handle);
  if (protocol === 'h2c') return http2.createServer({ noDelay: true }, handle);
  fail(`NETARENA_PROTOCOL must be h1, h1-tls, h2 or h2c, got ${JSON.stringify(protocol)}`);
}

function startEcho() {
  const server = net.createServer({ noDelay: true }, (socket) => {
    // A reset from the client is the client's business; just drop the connection.
    socket.on('error', () => socket.destroy());
    socket.pipe(socket);
  });
  server.listen({ host: opts.host, port, backlog: LISTEN_BACKLOG });
}

runWorkers(workers, opts.mode === 'http' ? startHttp : startEcho);
