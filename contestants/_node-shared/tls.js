'use strict';
// Shared by node-express, node-fastify and node-hono: which of netarena's protocols a server is
// started for, and the certificate and key of its h1-tls level (docs/protocols.md). These contestants speak h1
// and h1-tls only; node-http, which also speaks HTTP/2, chooses its servers itself.
//
// h1Tls() returns null for h1 (cleartext) and, for h1-tls, { cert, key } read from the PEM files netarena names in
// NETARENA_TLS_CERT and NETARENA_TLS_KEY, as strings (Node's tls options take them), for their https server. Any other
// protocol, or h1-tls without readable files, stops the server with one message and exit 2 (cluster.js's fail).

const fs = require('node:fs');
const { fail } = require('./cluster.js');

function readPem(variable) {
  const file = process.env[variable];
  if (!file) fail(`NETARENA_PROTOCOL=h1-tls is HTTPS: set ${variable} to a PEM file (netarena sets NETARENA_TLS_CERT and NETARENA_TLS_KEY for an h1-tls level)`);
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    return fail(`${variable}=${file} cannot be read (${err.code || err.message}); it must name a PEM file`);
  }
}

function h1Tls() {
  // Unset: started by hand, cleartext as netarena's default level.
  const protocol = process.env.NETARENA_PROTOCOL || 'h1';
  if (protocol === 'h1') return null;
  if (protocol !== 'h1-tls') fail(`NETARENA_PROTOCOL must be h1 or h1-tls (this contestant serves no other), got ${JSON.stringify(protocol)}`);
  return { cert: readPem('NETARENA_TLS_CERT'), key: readPem('NETARENA_TLS_KEY') };
}

module.exports = { h1Tls };
