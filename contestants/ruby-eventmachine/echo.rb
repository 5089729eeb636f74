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

host, port = NetarenaListen.host_port_args(ARGV, "ruby echo.rb HOST PORT")
listener = NetarenaListen.open(host, port)
EM.epoll
EM.run do
  EM.attach_server(listener, EchoConnection)
  %w[TERM INT].each { |sig| trap(sig) { EM.stop } }
end
