# The /mongo/{name} lookup through the official Ruby driver (Debian's ruby-mongo 2.5.1), shared by the Ruby
# contestants (ruby-eventmachine, ruby-puma). Found through RUBYLIB, which their manifests set to this folder.
# The driver blocks: each contestant calls find_json where blocking is its model (EventMachine's thread pool,
# Puma's request threads).
require "json"
require "logger"
require "mongo"
require "uri"

class NetarenaMongo
  # ruby-mongo 2.5.1 predates Ruby 3: its URL parser (Mongo::URI) decodes the database, user, password and
  # several options with URI.decode, which Ruby 3.0 removed, so Mongo::Client.new(url) raises NoMethodError
  # on mongodb://HOST:PORT/DATABASE. The driver's other constructor takes the seed list, the database and the
  # options instead; the URL netarena passes has no user and at most the option maxPoolSize (a suite's
  # mongo_pool), and anything else is refused here.
  URL = %r{\Amongodb://(?<hosts>[^/?@]+)/(?<database>[^/?@]+)(?:\?maxPoolSize=(?<pool>[1-9][0-9]*))?\z}.freeze

  # [hosts, database, the URL's maxPoolSize or nil]
  def self.parse_url(url)
    parts = URL.match(url) or abort "error: mongo URL #{url.inspect} is not mongodb://HOST:PORT[,HOST:PORT...]/DATABASE" \
                                    "[?maxPoolSize=N] (ruby-mongo 2.5.1 cannot parse users or other options under Ruby 3)"
    [parts[:hosts].split(","), URI::DEFAULT_PARSER.unescape(parts[:database]), parts[:pool]&.to_i]
  end

  def self.hosts_database(url)
    parse_url(url).first(2)
  end

  # One Mongo::Client per process, with a pool of `pool_size` connections: one for each thread that may query
  # at once, since the driver's default pool of 5 makes a 6th caller wait (1 s, then an error). The driver
  # starts monitor threads at once, which a fork does not copy: a pre-forking server builds this in each
  # worker after the fork. With the database gone it looks for a server for 30 s by default, longer than a
  # request may wait; 5 s leaves the time to answer 500. A maxPoolSize in the URL (a suite's mongo_pool) wins,
  # as it does in the other official drivers.
  def initialize(url, pool_size:)
    # The driver logs every command and heartbeat at DEBUG to stdout by default.
    Mongo::Logger.logger.level = Logger::WARN
    hosts, database, url_pool = NetarenaMongo.parse_url(url)
    @client = Mongo::Client.new(hosts, database: database, max_pool_size: url_pool || pool_size,
                                server_selection_timeout: 5)
    @database = @client.database
  end

  # One query by _id, blocking; the document as JSON (Ruby's json stdlib), or nil when there is none.
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
