'use strict';
// The scenario catalog's limits and /bytes bodies, shared by the node-http and node-express contestants.

// The catalog asks for at least 1024; the kernel caps it at somaxconn.
const LISTEN_BACKLOG = 4096;
// Refuse absurd /bytes/{n} and /sleep/{ms} so one request cannot exhaust memory or hang forever.
const MAX_BYTES_LEN = 64 * 1024 * 1024;
const MAX_SLEEP_MS = 600000;
const BYTES_SIZES = [40, 10000, 524288];

// /bytes/{n} bodies, built on first use and reused.
const bytesBodies = new Map();
function bytesBody(n) {
  let body = bytesBodies.get(n);
  if (body === undefined) {
    body = Buffer.alloc(n, '*');
    bytesBodies.set(n, body);
  }
  return body;
}

// Called once per worker before it listens: the catalog measures serving a body, not building it.
function prebuildBytesBodies() {
  for (const n of BYTES_SIZES) bytesBody(n);
}

module.exports = { LISTEN_BACKLOG, MAX_BYTES_LEN, MAX_SLEEP_MS, bytesBody, prebuildBytesBodies };
