# Puma's production set-up (Puma 5.6's README "Clustered mode" and docs/deployment.md): cluster mode, forked
# worker processes that each run a pool of threads, the app preloaded before the fork.
require_relative "app"
require "netarena_tls"

environment "production"

# Cluster mode with {workers} workers, the level's count. Puma's deployment guide says cluster mode on MRI
# with a worker per CPU core (5.6's edition said 1.5 per core, at least 2). With one worker the master and
# one worker still run, the same model at every count: the 5.6 guide calls single mode a development set-up.
# Puma warns about a single worker by default, which says nothing here.
workers RubyPuma.count("NETARENA_WORKERS")
silence_single_worker_warning

# Each worker's thread pool, a fixed {threads} threads (5 unless a suite sets another). Five is Puma's default
# maximum on MRI, and its deployment guide says "Puma defaults to 5, and that's a decent number" for apps not
# mostly waiting on I/O. The minimum is the same number rather than Puma's default 0 (threads started on
# demand), as in the puma.rb Rails generates: Puma 5.6 counts a thread it has just started for a new connection
# and that connection, still queued, both as busy (busy_threads = spawned - waiting + queued), so a burst of new
# connections stops the accept loop at 3 threads of 5 until a thread goes idle, which never happens while
# keep-alive clients send request after request. Measured with 0:5 on the first load after a start: of 4, 6 or
# 10 connections exactly 3 were answered for the whole 1.3 s; with 5:5 every one was.
threads RubyPuma.count("NETARENA_THREADS"), RubyPuma.count("NETARENA_THREADS")

# Load the app once in the master and fork the workers from it (copy-on-write); the database client is
# opened in each worker afterwards (app.rb).
preload_app!
on_worker_boot { RubyPuma.connect_databases }

# backlog=1024 is Puma's default, stated because the catalog asks for at least that. low_latency sets
# TCP_NODELAY on the listening socket, which accepted sockets inherit: Puma 5.6 leaves it off for a tcp://
# bind unless asked (on for ssl://) and corks each response instead (TCP_CORK, released after its last
# write). Without it netarena's Nagle check measured no stall either; it is set because the catalog asks
# every server to set TCP_NODELAY where its framework offers it, and Puma offers it here.
host = RubyPuma.setting("NETARENA_HOST")
host = "[#{host}]" if host.include?(":")
port = RubyPuma.count("NETARENA_PORT")
tls_cert, tls_key = NetarenaTLS.files
if tls_cert.nil?
  bind "tcp://#{host}:#{port}?backlog=1024&low_latency=true"
else
  # h1-tls (netarena gives the run's certificate and key): Puma's own TLS, its MiniSSL extension over OpenSSL,
  # with the same backlog. TLS 1.2 and 1.3 (no_tlsv1_1); no client certificates. Puma 5.6 sets TCP_NODELAY on
  # every ssl:// bind itself.
  ssl_bind host, port, cert: tls_cert, key: tls_key, verify_mode: "none", no_tlsv1_1: true, backlog: 1024
end

rackup File.join(__dir__, "config.ru")
