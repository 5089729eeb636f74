'use strict';
// Shared by node-express, node-fastify and node-hono: which of netarena's protocols a server is started for, and
// the certificate and key of its levels over TLS (docs/protocols.md). node-http chooses its servers itself.
//
// startedFor(served) returns { protocol, tls }: the protocol of NETARENA_PROTOCOL (unset: h1, a start by hand), and
// for h1-tls and h2 { cert, key } read from the PEM files netarena names in NETARENA_TLS_CERT and NETARENA_TLS_KEY, as
// strings (Node's tls options take them), null for the cleartext ones. A protocol the contestant does not serve (not
// in `served`), or one over TLS without readable files, stops the server with one message and exit 2 (cluster.js's
// fail).

const fs = require('node:fs');
const { fail } = require('./cluster.js');

const OVER_TLS = ['h1-tls', 'h2'];

function readPem(protocol, variable) {
  const file = process.env[variable];
  if (!file) fail(`NETARENA_PROTOCOL=${protocol} is over TLS: set ${variable} to a PEM file (netarena sets NETARENA_TLS_CERT and NETARENA_TLS_KEY for an h1-tls or h2 level)`);
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    return fail(`${variable}=${file} cannot be read (${err.code || err.message}); it must name a PEM file`);
  }
}

function startedFor(served) {
  const protocol = process.env.NETARENA_PROTOCOL || 'h1';
  if (!served.includes(protocol)) {
    fail(`NETARENA_PROTOCOL must be ${served.slice(0, -1).join(', ')} or ${served.at(-1)} (this contestant serves no other), got ${JSON.stringify(protocol)}`);
  }
  if (!OVER_TLS.includes(protocol)) return { protocol, tls: null };
  return { protocol, tls: { cert: readPem(protocol, 'NETARENA_TLS_CERT'), key: readPem(protocol, 'NETARENA_TLS_KEY') } };
}

module.exports = { startedFor };
