package netarena.netty;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpServerKeepAliveHandler;
import io.netty.handler.ssl.ApplicationProtocolConfig;
import io.netty.handler.ssl.ApplicationProtocolNames;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;
import io.netty.handler.stream.ChunkedWriteHandler;
import java.io.File;
import javax.net.ssl.SSLException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * HTTP/1.1 server: one boss thread accepts, {workers} event-loop threads serve the connections. With
 * NETARENA_TLS_CERT and NETARENA_TLS_KEY (PEM files; netarena's h1-tls) every connection is HTTPS: an SslHandler
 * first in its pipeline, the JDK's own TLS (SslProvider.JDK), ALPN http/1.1.
 */
public final class HttpServer {

    public static void main(String[] argv) throws InterruptedException {
        Args args = new Args(argv,
                "java -jar netarena-netty.jar [--host ADDR] --port PORT [--workers N] --static-dir DIR"
                        + " [--mongo-url mongodb://HOST:PORT/DATABASE]");
        String host = args.string("host", "127.0.0.1");
        int port = args.positiveInt("port", null);
        int workers = args.positiveInt("workers", 1);
        Path staticDir = Path.of(args.string("static-dir", null)).toAbsolutePath().normalize();
        if (!Files.isDirectory(staticDir)) {
            args.fail("--static-dir " + staticDir + " is not a directory; pass the folder holding the static file set");
        }
        // Empty (netarena's {mongo_url} outside mongo measurements): no database, /mongo answers 404.
        String mongoUrl = args.string("mongo-url", "");
        Mongo mongo = null;
        if (!mongoUrl.isEmpty()) {
            try {
                mongo = Mongo.open(mongoUrl);
            } catch (RuntimeException e) {
                args.fail("--mongo-url '" + mongoUrl + "': " + e.getMessage());
            }
        }
        Mongo database = mongo;

        EventLoopGroup boss = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(workers, NioIoHandler.newFactory());
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            shutdown(boss, group);
            if (database != null) {
                database.close();
            }
        }));
        Routes routes = new Routes(staticDir, database);
        SslContext tls = null;
        String tlsCert = System.getenv("NETARENA_TLS_CERT");
        if (tlsCert != null && !tlsCert.isEmpty()) {
            try {
                tls = tlsContext(tlsCert, System.getenv("NETARENA_TLS_KEY"));
            } catch (SSLException | IllegalArgumentException e) {
                args.fail("NETARENA_TLS_CERT / NETARENA_TLS_KEY: " + e.getMessage());
            }
        }
        SslContext sslContext = tls;
        Channel server = new ServerBootstrap()
                .group(boss, group)
                .channel(NioServerSocketChannel.class)
                .option(ChannelOption.SO_BACKLOG, 1024)
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline()
                                .addLast(new HttpServerCodec())
                                // Sets Connection headers and closes after the last response when the
                                // client did not ask for keep-alive (HTTP/1.0 or "Connection: close").
                                .addLast(new HttpServerKeepAliveHandler())
                                .addLast(new HttpObjectAggregator(64 * 1024));
                        if (sslContext != null) {
                            // TLS below HTTP, as Netty's HttpStaticFileServer example sets it up; files are then
                            // written in chunks (ChunkedWriteHandler): sendfile cannot pass through the encryption.
                            ch.pipeline().addFirst(sslContext.newHandler(ch.alloc()));
                            ch.pipeline().addLast(new ChunkedWriteHandler());
                        }
                        ch.pipeline().addLast(new HttpHandler(routes));
                    }
                })
                .bind(host, port).awaitUninterruptibly().channel();
        HttpServer.exitUnlessBound(server, host, port, boss, group);
        server.closeFuture().sync();
    }

    // The JDK's TLS (1.2 and 1.3, its default ciphers) with the PEM certificate and PKCS#8 key netarena gives.
    private static SslContext tlsContext(String cert, String key) throws SSLException {
        return SslContextBuilder.forServer(new File(cert), new File(key))
                .sslProvider(SslProvider.JDK)
                .protocols("TLSv1.3", "TLSv1.2")
                .applicationProtocolConfig(new ApplicationProtocolConfig(
                        ApplicationProtocolConfig.Protocol.ALPN,
                        ApplicationProtocolConfig.SelectorFailureBehavior.NO_ADVERTISE,
                        ApplicationProtocolConfig.SelectedListenerFailureBehavior.ACCEPT,
                        ApplicationProtocolNames.HTTP_1_1))
                .build();
    }

    // Without this a failed bind leaves the event-loop threads running and the JVM alive.
    static void exitUnlessBound(Channel server, String host, int port, EventLoopGroup... groups) {
        if (!server.isActive()) {
            System.err.println("error: cannot listen on " + host + " port " + port + " (is the port already in use?)");
            shutdown(groups);
            System.exit(1);
        }
    }

    // A short quiet period: the orchestrator stops us between measurements and waits for the exit.
    static void shutdown(EventLoopGroup... groups) {
        for (EventLoopGroup g : groups) {
            g.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        }
        for (EventLoopGroup g : groups) {
            g.terminationFuture().awaitUninterruptibly(2, TimeUnit.SECONDS);
        }
    }
}
