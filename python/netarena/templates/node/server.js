// A netarena contestant written by `netarena new`: Node's core modules only, so it installs instantly.
//
// Every route of the scenario catalog (docs/scenarios.md) is here; the manifest lists the ones it claims.
// What verification holds every server to: HTTP/1.1 keep-alive, 127.0.0.1 only, a listen backlog of at least
// 1024, TCP_NODELAY, and the exact bodies below. Replace the handler with your framework's and keep those.
'use strict';
const fs = require('fs');
const http = require('http');
const net = require('net');
const path = require('path');

const BACKLOG = 4096;
const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const port = Number(option('--port'));
const staticDir = path.resolve(option('--static-dir', '.'));
const bytesBodies = new Map(); // built once per size, not per request (the catalog's rule)

function reply(res, type, body) {
  res.writeHead(200, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function handle(req, res) {
  const url = req.url.split('?')[0];
  let m;
  if (url === '/hello') {
    reply(res, 'text/plain', 'Hello, World!');
  } else if (url === '/json') {
    reply(res, 'application/json', JSON.stringify({ message: 'Hello, World!' }));
  } else if ((m = /^\/bytes\/(\d+)$/.exec(url))) {
    const n = Number(m[1]);
    if (!bytesBodies.has(n)) bytesBodies.set(n, Buffer.alloc(n, '*'));
    reply(res, 'application/octet-stream', bytesBodies.get(n));
  } else if ((m = /^\/sleep\/(\d+)$/.exec(url))) {
    setTimeout(() => reply(res, 'text/plain', `slept ${m[1]}`), Number(m[1]));
  } else if (url.startsWith('/static/')) {
    const file = path.join(staticDir, decodeURIComponent(url.slice('/static/'.length)));
    if (!file.startsWith(staticDir + path.sep)) {
      res.writeHead(404, { 'Content-Length': 0 }).end();
      return;
    }
    fs.readFile(file, (err, data) => {
      if (err) res.writeHead(404, { 'Content-Length': 0 }).end();
      else reply(res, 'application/octet-stream', data);
    });
  } else {
    res.writeHead(404, { 'Content-Length': 0 }).end();
  }
}

const server = args.includes('--echo')
  ? net.createServer({ noDelay: true }, (socket) => socket.pipe(socket))
  : http.createServer({ noDelay: true }, handle);
server.listen(port, '127.0.0.1', BACKLOG);
// SIGTERM (the manifest's stop_signal): stop at once, open keep-alive connections included.
process.on('SIGTERM', () => process.exit(0));
