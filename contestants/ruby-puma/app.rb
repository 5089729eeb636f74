# ruby-puma's Rack app: the shared catalog routes (contestants/_ruby-shared/netarena_rack.rb) served by Puma,
# whose request threads may block, so /sleep and /mongo simply wait on the thread (seed 002's threaded model).
# Loaded by puma.rb for its settings and by config.ru for the app; Puma's preload_app! loads it once in the
# master process, before the workers fork.
require "netarena_rack"

module RubyPuma
  # The settings netarena passes through contestant.toml's [start.env]; a missing or malformed one stops the
  # start with one message naming it.
  def self.setting(name)
    ENV.fetch(name) { abort "error: #{name} is not set; ruby-puma takes its settings from the environment (contestant.toml [start.env])" }
  end

  def self.count(name)
    value = Integer(setting(name), 10, exception: false)
    return value if value&.positive?

    abort "error: #{name}=#{setting(name).inspect} is not a whole number of at least 1"
  end

  class Routes < NetarenaRack::Routes
    # TechEmpower's routes (techempower.rb) when a run gives a PostgreSQL URL, else nil.
    def initialize(mongo, techempower)
      super(mongo)
      @techempower = techempower
    end

    def call(env)
      @techempower&.call(env) || super
    end

    # TechEmpower's pool, opened in each worker after the fork, as /mongo's client is.
    def connect_postgresql(url, size)
      @techempower.connect(url, size)
    end

    # /mongo's client, built in each worker after the fork: the driver's monitor threads do not survive one.
    def connect_mongo(url, pool_size:)
      @mongo = NetarenaMongo.new(url, pool_size: pool_size)
    end

    protected

    # Kernel#sleep blocks this request's thread; the worker's other threads go on serving.
    def sleep_response(ms, _env)
      sleep(ms / 1000.0)
      slept(ms)
    end

    # The driver blocks this request's thread for the query, as sleep does.
    def mongo_response(name, _env)
      mongo_result(name) { @mongo.find_json(name) }
    end
  end

  MONGO_URL = ENV.fetch("NETARENA_MONGO_URL", "")
  # Required in the master, before the fork, when a run asks for /mongo; every other scenario starts without it.
  # The URL is checked here too: refused in a worker, it would stop that worker only, and the master would fork
  # it again and again.
  unless MONGO_URL.empty?
    require "netarena_mongo"
    NetarenaMongo.hosts_database(MONGO_URL)
  end

  PG_URL = ENV.fetch("NETARENA_PG_URL", "")
  # TechEmpower's scenarios when a run gives a PostgreSQL URL: the copy of World read here, in the master before
  # the fork (also checking the URL once), the pool opened in each worker (connect_databases).
  unless PG_URL.empty?
    require_relative "techempower"
    DB_POOL = count("NETARENA_DB_POOL") # a malformed one stops the start here, not each forked worker
    TECHEMPOWER = TechEmpower::Routes.new(TechEmpower.world_cache(PG_URL))
  end

  def self.routes
    @routes ||= Routes.new(nil, PG_URL.empty? ? nil : TECHEMPOWER)
  end

  def self.app
    NetarenaRack.app(routes, NetarenaRack.static_dir!(ENV["NETARENA_STATIC_DIR"]))
  end

  # Called in each worker as it boots (puma.rb's on_worker_boot), the hook Puma documents for opening database
  # connections after a preloaded fork. The mongo driver's pool gets one connection per thread of the worker,
  # which may all query at once; PostgreSQL's pool the manifest's [database] pool (NETARENA_DB_POOL).
  def self.connect_databases
    routes.connect_mongo(MONGO_URL, pool_size: count("NETARENA_THREADS")) unless MONGO_URL.empty?
    routes.connect_postgresql(PG_URL, DB_POOL) unless PG_URL.empty?
  end
end
