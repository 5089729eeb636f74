package netarena.netty;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;

/** Raw TCP echo, shaped like Netty's own EchoServer example. */
public final class EchoServer {

    @Sharable
    static final class EchoHandler extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }

        // A client that sends faster than it reads would otherwise grow our outbound buffer without
        // bound: stop reading until the socket drains.
        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            ctx.channel().config().setAutoRead(ctx.channel().isWritable());
            ctx.fireChannelWritabilityChanged();
        }

        // With half-closure allowed, a client that shuts down its sending side still gets every
        // byte back before we close.
        @Override
        public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
            if (evt instanceof ChannelInputShutdownEvent) {
                ctx.writeAndFlush(Unpooled.EMPTY_BUFFER).addListener(ChannelFutureListener.CLOSE);
            } else {
                ctx.fireUserEventTriggered(evt);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }

    public static void main(String[] argv) throws InterruptedException {
        Args args = new Args(argv, "java -cp netarena-netty.jar netarena.netty.EchoServer [--host ADDR] --port PORT [--workers N]");
        String host = args.string("host", "127.0.0.1");
        int port = args.positiveInt("port", null);
        int workers = args.positiveInt("workers", 1);

        EventLoopGroup boss = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(workers, NioIoHandler.newFactory());
        Runtime.getRuntime().addShutdownHook(new Thread(() -> HttpServer.shutdown(boss, group)));
        EchoHandler handler = new EchoHandler();
        Channel server = new ServerBootstrap()
                .group(boss, group)
                .channel(NioServerSocketChannel.class)
                .option(ChannelOption.SO_BACKLOG, 1024)
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childOption(ChannelOption.ALLOW_HALF_CLOSURE, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(handler);
                    }
                })
                .bind(host, port).awaitUninterruptibly().channel();
        HttpServer.exitUnlessBound(server, host, port, boss, group);
        server.closeFuture().sync();
    }
}
