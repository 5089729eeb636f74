package netarena.netty;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
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
import io.netty.handler.codec.http2.Http2FrameCodecBuilder;
import io.netty.handler.codec.http2.Http2MultiplexHandler;
import io.netty.handler.codec.http2.Http2StreamChannel;
import io.netty.handler.codec.http2.Http2StreamFrameToHttpObjectCodec;
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
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * HTTP server: one boss thread accepts, {workers} event-loop threads serve the connections, over the protocol
 * netarena started it for (NETARENA_PROTOCOL), that one alone:
 * <ul>
 *   <li>h1: HTTP/1.1 in cleartext;
 *   <li>h1-tls: HTTP/1.1 over TLS, an SslHandler first in each connection's pipeline (the JDK's own TLS,
 *       SslProvider.JDK) with the PEM files of NETARENA_TLS_CERT / NETARENA_TLS_KEY, ALPN http/1.1 alone;
 *   <li>h2: HTTP/2 over the same TLS, ALPN h2 alone;
 *   <li>h2c: HTTP/2 in cleartext with prior knowledge (the client's first bytes are the connection preface).
 * </ul>
 * Both HTTP/2 protocols serve every stream with the one HttpHandler: Http2StreamFrameToHttpObjectCodec turns a
 * stream's frames into the HttpRequest the HTTP/1.1 codec would make, and the response back into frames.
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
        String tlsCert = System.getenv("NETARENA_TLS_CERT");
        boolean certGiven = tlsCert != null && !tlsCert.isEmpty();
        // Unset when started by hand: HTTPS when given a certificate, as before netarena said the protocol.
        String protocol = System.getenv().getOrDefault("NETARENA_PROTOCOL", certGiven ? "h1-tls" : "h1");
        if (!List.of("h1", "h1-tls", "h2", "h2c").contains(protocol)) {
            args.fail("NETARENA_PROTOCOL must be h1, h1-tls, h2 or h2c, got '" + protocol + "'");
        }
        boolean http2 = protocol.equals("h2") || protocol.equals("h2c");
        SslContext tls = null;
        if (protocol.equals("h1-tls") || protocol.equals("h2")) {
            if (!certGiven) {
                args.fail("NETARENA_PROTOCOL=" + protocol
                        + " is served over TLS: NETARENA_TLS_CERT and NETARENA_TLS_KEY (PEM files) are needed");
            }
            try {
                tls = tlsContext(tlsCert, System.getenv("NETARENA_TLS_KEY"),
                        http2 ? ApplicationProtocolNames.HTTP_2 : ApplicationProtocolNames.HTTP_1_1);
            } catch (SSLException | IllegalArgumentException e) {
                args.fail("NETARENA_TLS_CERT / NETARENA_TLS_KEY: " + e.getMessage());
            }
        }
        SslContext sslContext = tls;
        // One HTTP/2 stream's pipeline (a child channel of the connection's). No sendfile: a stream's bytes are
        // DATA frames the HTTP/2 codec writes, so static files go in chunks (ChunkedWriteHandler), which also
        // wait for the stream's flow-control window (the child channel is unwritable while it is closed).
        ChannelInitializer<Http2StreamChannel> http2Stream = new ChannelInitializer<>() {
            @Override
            protected void initChannel(Http2StreamChannel stream) {
                stream.pipeline()
                        .addLast(new Http2StreamFrameToHttpObjectCodec(true))
                        .addLast(new HttpObjectAggregator(64 * 1024))
                        .addLast(new ChunkedWriteHandler())
                        .addLast(new HttpHandler(routes, false));
            }
        };
        Channel server = new ServerBootstrap()
                .group(boss, group)
                .channel(NioServerSocketChannel.class)
                .option(ChannelOption.SO_BACKLOG, 1024)
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        if (sslContext != null) {
                            // TLS below HTTP, as Netty's HttpStaticFileServer example sets it up.
                            ch.pipeline().addLast(sslContext.newHandler(ch.alloc()));
                        }
                        if (http2) {
                            // The connection's frames (Netty's HTTP/2 defaults: settings, windows, stream
                            // limits), each stream handed to a child channel set up by http2Stream. Over h2c the
                            // codec expects the preface at once: prior knowledge, no HTTP/1.1 Upgrade.
                            ch.pipeline()
                                    .addLast(Http2FrameCodecBuilder.forServer().build())
                                    .addLast(new Http2MultiplexHandler(http2Stream))
                                    .addLast(CLOSE_ON_ERROR);
                            return;
                        }
                        ch.pipeline()
                                .addLast(new HttpServerCodec())
                                // Sets Connection headers and closes after the last response when the
                                // client did not ask for keep-alive (HTTP/1.0 or "Connection: close").
                                .addLast(new HttpServerKeepAliveHandler())
                                .addLast(new HttpObjectAggregator(64 * 1024));
                        if (sslContext != null) {
                            // Files are then written in chunks: sendfile cannot pass through the encryption.
                            ch.pipeline().addLast(new ChunkedWriteHandler());
                        }
                        ch.pipeline().addLast(new HttpHandler(routes, sslContext == null));
                    }
                })
                .bind(host, port).awaitUninterruptibly().channel();
        HttpServer.exitUnlessBound(server, host, port, boss, group);
        server.closeFuture().sync();
    }

    /**
     * Last in an HTTP/2 connection's pipeline, where the HttpHandler of HTTP/1.1 would be: an error the codecs pass
     * on (a failed TLS handshake, a client that is not speaking HTTP/2, which the codec has already answered with
     * GOAWAY) closes the connection, as HttpHandler does, instead of reaching the pipeline's end as a warning.
     */
    private static final ChannelHandler CLOSE_ON_ERROR = new CloseOnError();

    @ChannelHandler.Sharable
    private static final class CloseOnError extends ChannelInboundHandlerAdapter {
        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }

    // The JDK's TLS (1.2 and 1.3, its default ciphers) with the PEM certificate and PKCS#8 key netarena gives,
    // offering one protocol by ALPN: http/1.1 for h1-tls (never h2, which would change what is measured), h2 for h2.
    private static SslContext tlsContext(String cert, String key, String alpn) throws SSLException {
        return SslContextBuilder.forServer(new File(cert), new File(key))
                .sslProvider(SslProvider.JDK)
                .protocols("TLSv1.3", "TLSv1.2")
                .applicationProtocolConfig(new ApplicationProtocolConfig(
                        ApplicationProtocolConfig.Protocol.ALPN,
                        ApplicationProtocolConfig.SelectorFailureBehavior.NO_ADVERTISE,
                        ApplicationProtocolConfig.SelectedListenerFailureBehavior.ACCEPT,
                        alpn))
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
