# The catalog's HTTP routes as a plain Rack app, shared by the Ruby contestants (ruby-eventmachine on Thin,
# ruby-puma). Found through RUBYLIB, which their manifests set to this folder. What differs between servers
# is how a request waits (/sleep and /mongo): Thin answers later from its reactor, Puma blocks the request's
# thread. Each server subclasses NetarenaRack::Routes for those two; the rest is defined here once.
require "json"
require "rack"

module NetarenaRack
  MAX_BYTES = 16 * 1024 * 1024
  MAX_SLEEP_MS = 60_000
  HELLO = "Hello, World!".freeze
  TEXT = "text/plain".freeze
  JSON_TYPE = "application/json".freeze

  # The Rack app: /static/{path} through Rack::Files (Rack's own static-file facility; neither Thin nor Puma
  # has one) mounted with Rack::Builder#map, everything else through `routes`.
  def self.app(routes, static_dir)
    root = File.expand_path(static_dir)
    Rack::Builder.new do
      map("/static") { run Rack::Files.new(root) }
      run routes
    end.to_app
  end

  # The static set's folder, refused with one message when it is not one.
  def self.static_dir!(path)
    return path if path && File.directory?(path)

    abort "error: static dir #{path.inspect} is not a directory; pass the folder holding the static file set"
  end

  class Routes
    def initialize(mongo)
      @mongo = mongo
      # /bytes/{n} bodies are built once per n and shared across requests. The catalog's sizes are built here,
      # before a pre-forking server forks; under threads two first requests for another n may both build it
      # (the Hash itself stays consistent under MRI's global lock), and both get the same bytes.
      @bytes = Hash.new { |cache, n| cache[n] = ("*" * n).freeze }
      [40, 10_000, 524_288].each { |n| @bytes[n] }
    end

    def call(env)
      case env["PATH_INFO"]
      when "/hello"
        respond(200, TEXT, HELLO)
      when "/json"
        respond(200, JSON_TYPE, JSON.generate({ message: "Hello, World!" }))
      when %r{\A/bytes/(\d{1,9})\z}
        n = Integer(Regexp.last_match(1), 10)
        return respond(400, TEXT, "/bytes/{n} needs 0 <= n <= #{MAX_BYTES}\n") if n > MAX_BYTES

        respond(200, "application/octet-stream", @bytes[n])
      when %r{\A/sleep/(\d{1,9})\z}
        ms = Integer(Regexp.last_match(1), 10)
        return respond(400, TEXT, "/sleep/{ms} needs 0 <= ms <= #{MAX_SLEEP_MS}\n") if ms > MAX_SLEEP_MS

        sleep_response(ms, env)
      when %r{\A/mongo/([^/]+)\z}
        return respond(404, TEXT, "not found\n") unless @mongo

        mongo_response(Rack::Utils.unescape_path(Regexp.last_match(1)), env)
      else
        respond(404, TEXT, "not found\n")
      end
    end

    protected

    # The answer to /sleep/{ms}, "slept {ms}" after ms milliseconds, however the server waits.
    def sleep_response(_ms, _env)
      raise NotImplementedError, "#{self.class} must define sleep_response"
    end

    # The answer to /mongo/{name}, built by mongo_result around the blocking query, wherever it runs.
    def mongo_response(_name, _env)
      raise NotImplementedError, "#{self.class} must define mongo_response"
    end

    def slept(ms)
      respond(200, TEXT, "slept #{ms}")
    end

    # The response to one query by _id: the document's JSON, a 404 when there is none, a 500 when it raised.
    def mongo_result(name)
      json = yield
      json ? respond(200, JSON_TYPE, json) : respond(404, TEXT, "no document #{name}\n")
    rescue StandardError => e
      respond(500, TEXT, "database error: #{e.class}: #{e.message}\n")
    end

    def respond(status, type, body)
      [status, { "Content-Type" => type, "Content-Length" => body.bytesize.to_s }, [body]]
    end
  end
end
