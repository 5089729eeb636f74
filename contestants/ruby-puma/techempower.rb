# TechEmpower's database scenarios (/db, /queries, /fortunes, /updates, /cached-queries) on PostgreSQL through
# the pg gem (Debian's ruby-pg), for ruby-puma. Each worker holds its own pool of connections, opened after the
# fork (on_worker_boot): a libpq connection does not survive one. A request takes one connection for all its
# queries, one at a time (libpq here runs one query at a time on a connection: no pipelining).
require "erb"
require "json"
require "pg"
require "rack"
require "time"

module TechEmpower
  WORLD_ROWS = 10_000
  MAX_QUERIES = 500
  EXTRA_FORTUNE = "Additional fortune added at request time.".freeze
  PATHS = %w[/db /queries /fortunes /updates /cached-queries].freeze
  SELECT_WORLD = "SELECT id, randomnumber FROM world WHERE id = $1".freeze
  # One batched UPDATE (allowed), from two arrays: ids ascending, so that concurrent requests lock rows in the
  # same order and cannot deadlock.
  UPDATE_WORLDS = "UPDATE world SET randomnumber = v.n FROM unnest($1::int[], $2::int[]) AS v(id, n) " \
                  "WHERE world.id = v.id".freeze
  # ERB (Ruby's standard template engine); h is ERB::Util.html_escape, ERB's own escaping.
  FORTUNES = ERB.new(<<~HTML.delete("\n"))
    <!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>
    <% fortunes.each do |f| %><tr><td><%= f[:id] %></td><td><%= h(f[:message]) %></td></tr><% end %>
    </table></body></html>
  HTML

  # The template's binding: `fortunes` and ERB::Util's `h`.
  class Page
    include ERB::Util

    def initialize(fortunes)
      @fortunes = fortunes
    end

    attr_reader :fortunes

    def render
      FORTUNES.result(binding)
    end
  end

  # TechEmpower's clamp of a queries/count parameter's text: missing or non-numeric is 1, then 1..500.
  def self.clamp(text)
    n = Integer(text.to_s, 10, exception: false)
    n.nil? || n < 1 ? 1 : [n, MAX_QUERIES].min
  end

  def self.random_id
    rand(1..WORLD_ROWS)
  end

  # The copy of World for /cached-queries, indexed by id: read once, in Puma's master before it forks (the
  # workers share it), after the fixture is loaded (the server starts after the service is ready). A database
  # it cannot reach stops the start here, in the master, rather than each forked worker again and again.
  def self.world_cache(url)
    conn = PG.connect(url)
    cache = Array.new(WORLD_ROWS + 1)
    conn.exec("SELECT id, randomnumber FROM world").each_row do |id, number|
      cache[Integer(id, 10)] = { id: Integer(id, 10), randomNumber: Integer(number, 10) }.freeze
    end
    cache.freeze
  rescue PG::Error => e
    abort "error: NETARENA_PG_URL #{url}: #{e.message.strip}"
  ensure
    conn&.close
  end

  # A worker's connections: a queue of `size` open connections; a request pops one (waiting while all are in
  # use) and pushes it back.
  class Pool
    def initialize(url, size)
      @connections = Thread::Queue.new
      size.times { @connections << PG.connect(url) }
    end

    def with
      conn = @connections.pop
      yield conn
    ensure
      @connections << conn if conn
    end
  end

  # The Rack routes of the five scenarios; `call` answers nil for any other path.
  class Routes
    def initialize(cache)
      @cache = cache
      @pool = nil
    end

    # In each worker as it boots: the pool of `size` connections.
    def connect(url, size)
      @pool = Pool.new(url, size)
    end

    def call(env)
      path = env["PATH_INFO"]
      return nil unless PATHS.include?(path)

      params = Rack::Utils.parse_query(env["QUERY_STRING"])
      case path
      when "/db" then json(@pool.with { |conn| read_world(conn) })
      when "/queries" then json(@pool.with { |conn| read_worlds(conn, TechEmpower.clamp(params["queries"])) })
      when "/updates" then json(@pool.with { |conn| update_worlds(conn, TechEmpower.clamp(params["queries"])) })
      when "/cached-queries"
        json(Array.new(TechEmpower.clamp(params["count"])) { @cache[TechEmpower.random_id] })
      when "/fortunes" then respond("text/html; charset=utf-8", Page.new(@pool.with { |conn| fortunes(conn) }).render)
      end
    rescue PG::Error => e
      [500, { "Content-Type" => "text/plain" }, ["database error: #{e.class}: #{e.message}\n"]]
    end

    private

    # One row, by its own query (TechEmpower forbids reading several rows with one IN (...) query).
    def read_world(conn)
      id, number = conn.exec_params(SELECT_WORLD, [TechEmpower.random_id]).values.first
      { id: Integer(id, 10), randomNumber: Integer(number, 10) }
    end

    def read_worlds(conn, n)
      Array.new(n) { read_world(conn) }
    end

    def update_worlds(conn, n)
      rows = read_worlds(conn, n)
      # An id drawn twice keeps its last number, in the answer too.
      last = {}
      rows.each { |row| last[row[:id]] = row[:randomNumber] = TechEmpower.random_id }
      rows.each { |row| row[:randomNumber] = last[row[:id]] }
      ids = last.keys.sort
      # PostgreSQL's array literals of whole numbers, the text form the two $n::int[] parameters take.
      conn.exec_params(UPDATE_WORLDS, ["{#{ids.join(',')}}", "{#{ids.map { |id| last[id] }.join(',')}}"])
      rows
    end

    # Every fortune plus the one added per request, sorted by message (byte order: code-point order in UTF-8).
    def fortunes(conn)
      rows = conn.exec("SELECT id, message FROM fortune").map do |row|
        { id: Integer(row["id"], 10), message: row["message"].force_encoding(Encoding::UTF_8) }
      end
      rows << { id: 0, message: EXTRA_FORTUNE }
      rows.sort_by { |row| row[:message].b }
    end

    def json(value)
      respond("application/json", JSON.generate(value))
    end

    # TechEmpower requires Server and Date on these answers; neither Puma nor Rack adds them.
    def respond(type, body)
      [200, { "Content-Type" => type, "Content-Length" => body.bytesize.to_s, "Server" => "ruby-puma",
              "Date" => Time.now.httpdate }, [body]]
    end
  end
end
