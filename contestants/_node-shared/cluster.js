'use strict';
// Shared by the node-http and node-express contestants (not a contestant itself: the leading
// underscore keeps it out of contestant discovery).
//
// runWorkers(workers, startWorker): with one worker the server runs in this process; with more,
// this process becomes the cluster primary and forks `workers` children that each run
// startWorker(). Node's cluster module shares one listening socket: on Linux the primary accepts
// and hands connections to workers round-robin (the cluster default, SCHED_RR).
//
// Stopping: the orchestrator signals the whole process group, so every process gets SIGTERM.
// Workers exit at once (a benchmark server has nothing to flush). The primary waits for its
// workers before exiting, so nothing outlives it; a worker dying on its own is an error, not
// something to hide by re-forking, so the primary then stops the rest and exits non-zero.

const cluster = require('node:cluster');

const STOP_SIGNALS = ['SIGTERM', 'SIGINT'];

function parseArgs(argv, known) {
  const opts = {};
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    const value = argv[i + 1];
    const key = flag.replace(/^--/, '').replace(/-/g, '_');
    if (!flag.startsWith('--') || !(key in known)) {
      fail(`unknown option ${JSON.stringify(flag)}; expected ${Object.keys(known).map((k) => '--' + k.replace(/_/g, '-')).join(', ')}`);
    }
    if (value === undefined) fail(`${flag} needs a value`);
    opts[key] = value;
  }
  const out = { ...known, ...opts };
  for (const [key, value] of Object.entries(out)) {
    if (value === undefined) fail(`--${key.replace(/_/g, '-')} is required`);
  }
  return out;
}

function fail(message) {
  process.stderr.write(`${process.argv[1]}: ${message}\n`);
  process.exit(2);
}

function parsePort(text) {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 1 || port > 65535) fail(`--port must be an integer 1..65535, got ${JSON.stringify(text)}`);
  return port;
}

function parseWorkers(text) {
  const workers = Number(text);
  if (!Number.isInteger(workers) || workers < 1) fail(`--workers must be an integer >= 1, got ${JSON.stringify(text)}`);
  return workers;
}

function exitOnStop() {
  for (const sig of STOP_SIGNALS) process.on(sig, () => process.exit(0));
}

function runWorkers(workers, startWorker) {
  if (workers === 1 || !cluster.isPrimary) {
    exitOnStop();
    startWorker();
    return;
  }
  // Counted here rather than read from cluster.workers, which drops a worker only once it has
  // both exited and disconnected, in either order.
  let alive = 0;
  let stopping = false;
  let exitCode = 0;
  const stopAll = (code) => {
    if (!stopping) {
      stopping = true;
      exitCode = code;
      for (const worker of Object.values(cluster.workers)) worker.process.kill('SIGTERM');
    }
    if (alive === 0) process.exit(exitCode);
  };
  cluster.on('exit', (worker, code, signal) => {
    alive -= 1;
    if (!stopping) {
      process.stderr.write(`worker ${worker.process.pid} died (code ${code}, signal ${signal}); stopping\n`);
      stopAll(1);
    } else if (alive === 0) {
      process.exit(exitCode);
    }
  });
  for (const sig of STOP_SIGNALS) process.on(sig, () => stopAll(0));
  for (let i = 0; i < workers; i++) {
    cluster.fork();
    alive += 1;
  }
}

module.exports = { runWorkers, parseArgs, parsePort, parseWorkers, fail };
