# Raw TCP echo on EventMachine: the EM::Connection receive_data -> send_data idiom.
require "eventmachine"
require_relative "listen_socket"

class EchoConnection < EM::Connection
  def post_init
    set_sock_opt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
  end

  def receive_data(data)
    send_data(data)
  end
end

port = NetarenaListen.port_arg(ARGV, "ruby echo.rb PORT")
listener = NetarenaListen.open(port)
EM.epoll
EM.run do
  EM.attach_server(listener, EchoConnection)
  %w[TERM INT].each { |sig| trap(sig) { EM.stop } }
end
