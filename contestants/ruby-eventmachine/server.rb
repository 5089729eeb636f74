# HTTP on Thin, the EventMachine-based Rack server, with a plain Rack app.
require "netarena_rack"
require "netarena_tls"
require "thin"
require_relative "listen_socket"

USAGE = "ruby server.rb HOST PORT STATIC_DIR [MONGO_URL (empty: no /mongo routes)]"

# The shared routes (contestants/_ruby-shared), waiting the reactor's way: nothing blocks the reactor thread.
class ThinRoutes < NetarenaRack::Routes
  protected

  # Thin's async response: answer later through async.callback, the reactor stays free.
  def sleep_response(ms, env)
    callback = env["async.callback"]
    EM.add_timer(ms / 1000.0) { callback.call(slept(ms)) }
    Thin::Connection::AsyncResponse
  end

  # The driver blocks, so the query runs on a thread of EM's pool (EM.defer); the callback runs back on the
  # reactor thread and sends the response through Thin's async.callback.
  def mongo_response(name, env)
    callback = env["async.callback"]
    EM.defer(-> { mongo_result(name) { @mongo.find_json(name) } }, ->(response) { callback.call(response) })
    Thin::Connection::AsyncResponse
  end
end

# /mongo/{name}: the official Ruby driver (Debian's ruby-mongo, through contestants/_ruby-shared), one client per
# process, required only when a URL is given; its pool gets a connection for each thread of EM's pool.
def mongo_docs(url)
  require "netarena_mongo"
  NetarenaMongo.new(url, pool_size: EM.threadpool_size)
end

# Thin's TCP backend, listening on our own socket (see listen_socket.rb) and setting TCP_NODELAY,
# which Thin leaves off.
class NetarenaBackend < Thin::Backends::TcpServer
  def initialize(host, port, options)
    super(host, port)
    @listener = options.fetch(:listener)
  end

  def connect
    @signature = EventMachine.attach_server(@listener, Thin::Connection, &method(:initialize_connection))
  end

  protected

  def initialize_connection(connection)
    connection.set_sock_opt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
    super
  end
end

host, port = NetarenaListen.host_port_args(ARGV, USAGE)
static_dir = NetarenaRack.static_dir!(ARGV[2])

mongo_url = ARGV[3].to_s
app = NetarenaRack.app(ThinRoutes.new(mongo_url.empty? ? nil : mongo_docs(mongo_url)), static_dir)

Thin::Logging.silent = true
server = Thin::Server.new(host, port, app, backend: NetarenaBackend, listener: NetarenaListen.open(host, port))
# Thin's defaults keep only 100 connections persistent (the rest get "Connection: close") and
# accept at most 1024; the benchmark opens thousands of keep-alive connections.
server.maximum_persistent_connections = 20_000
server.maximum_connections = 20_000
# h1-tls (netarena gives the run's certificate and key): Thin's own TLS, EventMachine's start_tls on every accepted
# connection (Thin's backend calls it), TLS 1.2 and 1.3, no client certificates.
tls_cert, tls_key = NetarenaTLS.files
unless tls_cert.nil?
  server.ssl = true
  server.ssl_options = { cert_chain_file: tls_cert, private_key_file: tls_key, verify_peer: false,
                         ssl_version: %w[TLSv1_2 TLSv1_3] }
end
server.start
