# HTTP on Thin, the EventMachine-based Rack server, with a plain Rack app.
require "json"
require "rack"
require "thin"
require_relative "listen_socket"

USAGE = "ruby server.rb HOST PORT STATIC_DIR [MONGO_URL (empty: no /mongo routes)]"
MAX_BYTES = 16 * 1024 * 1024
MAX_SLEEP_MS = 60_000

# /mongo/{name}: the official Ruby driver (Debian's ruby-mongo), one Mongo::Client per process. The driver
# blocks, so every query runs on EventMachine's thread pool (EM.defer), never on the reactor thread.
class MongoDocs
  def initialize(url)
    # Required only when asked for, like node-http's driver.
    require "logger"
    require "mongo"
    require "uri"
    # The driver logs every command and heartbeat at DEBUG to stdout by default.
    Mongo::Logger.logger.level = Logger::WARN
    # Its pool holds 5 connections by default and makes a 6th caller wait (1 s, then an error); EM.defer runs
    # up to EM.threadpool_size (20) queries at once, so the pool gets one connection per thread. With the
    # database gone it looks for a server for 30 s by default, as long as Thin waits before it drops the
    # connection unanswered; 5 s leaves the time to answer 500.
    hosts, database = MongoDocs.hosts_database(url)
    @client = Mongo::Client.new(hosts, database: database, max_pool_size: EM.threadpool_size,
                                       server_selection_timeout: 5)
    @database = @client.database
  end

  # ruby-mongo 2.5.1 predates Ruby 3: its URL parser (Mongo::URI) decodes the database, user, password and
  # several options with URI.decode, which Ruby 3.0 removed, so Mongo::Client.new(url) raises NoMethodError
  # on mongodb://HOST:PORT/DATABASE. The driver's other constructor takes the seed list and the database
  # instead; the URL netarena passes has no user or options, and anything else is refused here.
  URL = %r{\Amongodb://(?<hosts>[^/?@]+)/(?<database>[^/?@]+)\z}.freeze

  def self.hosts_database(url)
    parts = URL.match(url) or abort "error: mongo URL #{url.inspect} is not mongodb://HOST:PORT[,HOST:PORT...]/DATABASE " \
                                    "(ruby-mongo 2.5.1 cannot parse users or options under Ruby 3)"
    [parts[:hosts].split(","), URI::DEFAULT_PARSER.unescape(parts[:database])]
  end

  # One query by _id, blocking (call it through EM.defer); the document as JSON, or nil when there is none.
  # It is the find command Collection#find sends, run through Database#command: Collection#find wraps every
  # answer in a Mongo::Cursor whose GC finalizer takes a Mutex, which Ruby 3 refuses in a finalizer
  # (ThreadError "can't be called from trap context"), so each query left a raised exception and a
  # 25-line warning in the log behind it.
  def find_json(name)
    reply = @database.command(find: "docs", filter: { _id: name }, limit: 1, singleBatch: true).documents.first
    doc = reply["cursor"]["firstBatch"].first
    doc && JSON.generate(doc)
  end
end

class Routes
  HELLO = "Hello, World!".freeze
  TEXT = "text/plain".freeze

  def initialize(mongo)
    @mongo = mongo
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
    when %r{\A/mongo/([^/]+)\z}
      return respond(404, TEXT, "not found\n") unless @mongo

      find_doc(Rack::Utils.unescape_path(Regexp.last_match(1)), env["async.callback"])
    else
      respond(404, TEXT, "not found\n")
    end
  end

  private

  # The query runs on a thread of EM's pool; the callback (or, when it raised, the errback) runs back on the
  # reactor thread and sends the response through Thin's async.callback.
  def find_doc(name, callback)
    EM.defer(
      -> { @mongo.find_json(name) },
      ->(json) { callback.call(json ? respond(200, "application/json", json) : respond(404, TEXT, "no document #{name}\n")) },
      ->(error) { callback.call(respond(500, TEXT, "database error: #{error.class}: #{error.message}\n")) },
    )
    Thin::Connection::AsyncResponse
  end

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

mongo_url = ARGV[3].to_s
routes = Routes.new(mongo_url.empty? ? nil : MongoDocs.new(mongo_url))
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
