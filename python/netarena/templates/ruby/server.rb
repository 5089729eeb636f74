# A netarena contestant written by `netarena new`: Ruby's standard library only, so it needs no gems.
#
# Every route of the scenario catalog (docs/scenarios.md) but static is here; the manifest lists the ones it
# claims. What verification holds every server to: HTTP/1.1 keep-alive, 127.0.0.1 only, a listen backlog of
# at least 1024, TCP_NODELAY, and the exact bodies below. Replace it with your framework's and keep those.
require 'json'
require 'socket'

BACKLOG = 4096
BYTES = Hash.new { |cache, n| cache[n] = ('*' * n).freeze } # built once per size (the catalog's rule)
BYTES_LOCK = Mutex.new

def reply(client, type, body, status = '200 OK')
  client.write("HTTP/1.1 #{status}\r\nContent-Type: #{type}\r\nContent-Length: #{body.bytesize}\r\n\r\n#{body}")
end

def serve_http(client)
  while (request_line = client.gets)
    length = 0
    while (line = client.gets) && line != "\r\n" && line != "\n"
      name, value = line.split(':', 2)
      length = value.to_i if name.casecmp?('content-length')
    end
    client.read(length) if length.positive? # a request body is read and ignored
    path = request_line.split(' ')[1].to_s.split('?').first
    case path
    when '/hello' then reply(client, 'text/plain', 'Hello, World!')
    when '/json' then reply(client, 'application/json', JSON.generate({ message: 'Hello, World!' }))
    when %r{\A/bytes/(\d+)\z} then reply(client, 'application/octet-stream', BYTES_LOCK.synchronize { BYTES[$1.to_i] })
    when %r{\A/sleep/(\d+)\z}
      ms = $1.to_i
      sleep(ms / 1000.0) # blocks this connection's thread only
      reply(client, 'text/plain', "slept #{ms}")
    else reply(client, 'text/plain', '', '404 Not Found')
    end
  end
end

def serve_echo(client)
  while (data = client.readpartial(65_536))
    client.write(data)
  end
rescue EOFError
  nil
end

port = Integer(ARGV[ARGV.index('--port') + 1])
echo = ARGV.include?('--echo')
server = TCPServer.new('127.0.0.1', port)
server.listen(BACKLOG)
trap('TERM') { exit } # the manifest's stop_signal
loop do
  client = server.accept
  client.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
  Thread.new(client) do |c|
    echo ? serve_echo(c) : serve_http(c)
  rescue IOError, SystemCallError
    nil # the client went away
  ensure
    c.close
  end
end
