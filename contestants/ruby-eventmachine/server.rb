# HTTP on Thin, the EventMachine-based Rack server, with a plain Rack app.
require "json"
require "rack"
require "thin"
require_relative "listen_socket"

USAGE = "ruby server.rb HOST PORT STATIC_DIR"
MAX_BYTES = 16 * 1024 * 1024
MAX_SLEEP_MS = 60_000

class Routes
  HELLO = "Hello, World!".freeze
  TEXT = "text/plain".freeze

  def initialize
    # /bytes/{n} bodies are built once per n and shared across requests.
    @bytes = Hash.new { |cache, n| cache[n] = ("*" * n).freeze }
    [40, 10_000, 524_288].each { |n| @bytes[n] }
  end

  def call(env)
    case env["PATH_INFO"]
    when "/hello"
      respond(200, TEXT, HELLO)
    when "/json"
      respond(200, "application/json", JSON.generate({ message: "Hello, World!" }))
    when %r{\A/bytes/(\d{1,9})\z}
      n = Integer(Regexp.last_match(1), 10)
      return respond(400, TEXT, "/bytes/{n} needs 0 <= n <= #{MAX_BYTES}\n") if n > MAX_BYTES

      respond(200, "application/octet-stream", @bytes[n])
    when %r{\A/sleep/(\d{1,9})\z}
      ms = Integer(Regexp.last_match(1), 10)
      return respond(400, TEXT, "/sleep/{ms} needs 0 <= ms <= #{MAX_SLEEP_MS}\n") if ms > MAX_SLEEP_MS

      # Thin's async response: answer later through async.callback, the reactor stays free.
      callback = env["async.callback"]
      EM.add_timer(ms / 1000.0) { callback.call(respond(200, TEXT, "slept #{ms}")) }
      Thin::Connection::AsyncResponse
    else
      respond(404, TEXT, "not found\n")
    end
  end

  private

  def respond(status, type, body)
    [status, { "Content-Type" => type, "Content-Length" => body.bytesize.to_s }, [body]]
  end
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
static_dir = ARGV[2] or abort "error: missing static dir\nusage: #{USAGE}"
abort "error: static dir #{static_dir} is not a directory; pass the folder holding the static file set" unless File.directory?(static_dir)

routes = Routes.new
app = Rack::Builder.new do
  map("/static") { run Rack::Files.new(File.expand_path(static_dir)) }
  run routes
end

Thin::Logging.silent = true
server = Thin::Server.new(host, port, app, backend: NetarenaBackend, listener: NetarenaListen.open(host, port))
# Thin's defaults keep only 100 connections persistent (the rest get "Connection: close") and
# accept at most 1024; the benchmark opens thousands of keep-alive connections.
server.maximum_persistent_connections = 20_000
server.maximum_connections = 20_000
server.start
