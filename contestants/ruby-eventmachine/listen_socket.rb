require "socket"

module NetarenaListen
  # EventMachine's own start_server hard-codes listen(fd, 100). EM.attach_server adopts a socket
  # we opened ourselves, so we can ask for the backlog the catalog requires.
  BACKLOG = 1024

  def self.open(host, port)
    address = Addrinfo.tcp(host, port)
    server = Socket.new(address.afamily, :STREAM)
    server.setsockopt(:SOCKET, :REUSEADDR, true)
    server.bind(address)
    server.listen(BACKLOG)
    server
  rescue SystemCallError => e
    abort "error: cannot listen on #{host} port #{port}: #{e.message}"
  end

  # The command line starts with HOST PORT: the address to listen on (0.0.0.0: every address) and the port.
  def self.host_port_args(argv, usage)
    host = argv.fetch(0)
    port = Integer(argv.fetch(1), exception: false)
    abort "error: expected a TCP port as second argument\nusage: #{usage}" unless port&.between?(1, 65_535)
    [host, port]
  rescue IndexError
    abort "error: missing host or port\nusage: #{usage}"
  end
end
