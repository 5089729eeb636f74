require "socket"

module NetarenaListen
  # EventMachine's own start_server hard-codes listen(fd, 100). EM.attach_server adopts a socket
  # we opened ourselves, so we can ask for the backlog the catalog requires.
  BACKLOG = 1024

  def self.open(port)
    server = Socket.new(:INET, :STREAM)
    server.setsockopt(:SOCKET, :REUSEADDR, true)
    server.bind(Addrinfo.tcp("127.0.0.1", port))
    server.listen(BACKLOG)
    server
  rescue SystemCallError => e
    abort "error: cannot listen on 127.0.0.1:#{port}: #{e.message}"
  end

  def self.port_arg(argv, usage)
    port = Integer(argv.fetch(0), exception: false)
    abort "error: expected a TCP port as first argument\nusage: #{usage}" unless port&.between?(1, 65_535)
    port
  rescue IndexError
    abort "error: missing port\nusage: #{usage}"
  end
end
