package netarena.netty;

import static io.netty.handler.codec.http.HttpResponseStatus.BAD_REQUEST;
import static io.netty.handler.codec.http.HttpResponseStatus.FORBIDDEN;
import static io.netty.handler.codec.http.HttpResponseStatus.INTERNAL_SERVER_ERROR;
import static io.netty.handler.codec.http.HttpResponseStatus.METHOD_NOT_ALLOWED;
import static io.netty.handler.codec.http.HttpResponseStatus.NOT_FOUND;
import static io.netty.handler.codec.http.HttpResponseStatus.OK;
import static io.netty.handler.codec.http.HttpVersion.HTTP_1_1;

import com.fasterxml.jackson.core.JsonProcessingException;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.netty.handler.codec.http.HttpChunkedInput;
import io.netty.handler.stream.ChunkedFile;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.net.URLConnection;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

final class HttpHandler extends SimpleChannelInboundHandler<FullHttpRequest> {
    private final Routes routes;
    /** Static files by sendfile (DefaultFileRegion): only on an HTTP/1.1 connection in cleartext. */
    private final boolean sendfile;

    HttpHandler(Routes routes, boolean sendfile) {
        this.routes = routes;
        this.sendfile = sendfile;
    }

    @Override
    protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
        if (!req.decoderResult().isSuccess()) {
            sendText(ctx, BAD_REQUEST, "malformed request\n");
            return;
        }
        if (req.method() != HttpMethod.GET) {
            sendText(ctx, METHOD_NOT_ALLOWED, "only GET is served\n");
            return;
        }
        String path = new QueryStringDecoder(req.uri()).path();
        if (path.equals("/hello")) {
            send(ctx, OK, "text/plain", routes.hello.duplicate());
        } else if (path.equals("/json")) {
            json(ctx);
        } else if (path.startsWith("/bytes/")) {
            int n = parseBounded(path.substring("/bytes/".length()), Routes.MAX_BYTES);
            if (n < 0) {
                sendText(ctx, BAD_REQUEST, "/bytes/{n} needs 0 <= n <= " + Routes.MAX_BYTES + "\n");
            } else {
                send(ctx, OK, "application/octet-stream", routes.bytes(n).duplicate());
            }
        } else if (path.startsWith("/sleep/")) {
            int ms = parseBounded(path.substring("/sleep/".length()), Routes.MAX_SLEEP_MS);
            if (ms < 0) {
                sendText(ctx, BAD_REQUEST, "/sleep/{ms} needs 0 <= ms <= " + Routes.MAX_SLEEP_MS + "\n");
            } else {
                // A timer on this connection's event loop: the thread stays free for other connections.
                ctx.executor().schedule(() -> sendText(ctx, OK, "slept " + ms), ms, TimeUnit.MILLISECONDS);
            }
        } else if (path.startsWith("/static/")) {
            staticFile(ctx, path.substring("/static/".length()));
        } else if (path.startsWith("/mongo/")) {
            mongo(ctx, path.substring("/mongo/".length()));
        } else {
            sendText(ctx, NOT_FOUND, "not found\n");
        }
    }

    private void json(ChannelHandlerContext ctx) {
        byte[] body;
        try {
            body = routes.json.writeValueAsBytes(new Routes.Message("Hello, World!"));
        } catch (JsonProcessingException e) {
            sendText(ctx, INTERNAL_SERVER_ERROR, "json: " + e.getMessage() + "\n");
            return;
        }
        send(ctx, OK, "application/json", Unpooled.wrappedBuffer(body));
    }

    /**
     * One find by _id. The event loop does not wait: the driver completes the query on its own threads and
     * the reply (the document rendered by the driver's relaxed-JSON writer) is written from this
     * connection's event loop, like /sleep's timer.
     */
    private void mongo(ChannelHandlerContext ctx, String name) {
        if (routes.mongo == null) {
            sendText(ctx, NOT_FOUND, "mongo is not configured: start with --mongo-url\n");
            return;
        }
        if (name.isEmpty() || name.indexOf('/') >= 0) {
            sendText(ctx, NOT_FOUND, "not found\n");
            return;
        }
        routes.mongo.find(name, ctx.executor(), new Mongo.Reply() {
            @Override
            public void found(String json) {
                send(ctx, OK, "application/json", Unpooled.copiedBuffer(json, StandardCharsets.UTF_8));
            }

            @Override
            public void missing() {
                sendText(ctx, NOT_FOUND, "not found\n");
            }

            @Override
            public void failed(Throwable error) {
                sendText(ctx, INTERNAL_SERVER_ERROR, "mongo: " + error.getMessage() + "\n");
            }
        });
    }

    // Without sendfile, a static file is read (and encrypted, or framed) this many bytes at a time (Netty's
    // ChunkedFile default).
    private static final int STATIC_CHUNK_BYTES = 8192;

    /**
     * Netty's HttpStaticFileServer approach: headers first, then the file as a DefaultFileRegion
     * (sendfile(2), zero-copy) and an empty last chunk; over TLS or HTTP/2 the file in chunks instead.
     */
    private void staticFile(ChannelHandlerContext ctx, String relative) {
        Path file = routes.staticDir.resolve(relative).normalize();
        if (!file.startsWith(routes.staticDir) || relative.isEmpty()) {
            sendText(ctx, FORBIDDEN, "path escapes the static folder\n");
            return;
        }
        if (!Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS)) {
            sendText(ctx, NOT_FOUND, "not found\n");
            return;
        }
        RandomAccessFile raf;
        long length;
        try {
            raf = new RandomAccessFile(file.toFile(), "r");
            length = raf.length();
        } catch (IOException e) {
            sendText(ctx, NOT_FOUND, "not found\n");
            return;
        }
        HttpResponse response = new DefaultHttpResponse(HTTP_1_1, OK);
        HttpUtil.setContentLength(response, length);
        String type = URLConnection.getFileNameMap().getContentTypeFor(file.getFileName().toString());
        response.headers().set(HttpHeaderNames.CONTENT_TYPE,
                type != null ? type : HttpHeaderValues.APPLICATION_OCTET_STREAM);
        ctx.write(response);
        if (!sendfile) {
            // Over TLS the bytes must pass through the SslHandler, over HTTP/2 through the codec's DATA frames:
            // chunks read from the file (as the example does), the last chunk written by HttpChunkedInput itself.
            try {
                ctx.writeAndFlush(new HttpChunkedInput(new ChunkedFile(raf, 0, length, STATIC_CHUNK_BYTES)));
            } catch (IOException e) {
                ctx.close();
            }
            return;
        }
        // The region owns the file channel and closes it once sent (or when the connection dies).
        ctx.write(new DefaultFileRegion(raf.getChannel(), 0, length));
        ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
    }

    private static int parseBounded(String digits, int max) {
        if (digits.isEmpty() || digits.length() > 9 || !digits.chars().allMatch(Character::isDigit)) {
            return -1;
        }
        int n = Integer.parseInt(digits);
        return n <= max ? n : -1;
    }

    private static void sendText(ChannelHandlerContext ctx, HttpResponseStatus status, String text) {
        send(ctx, status, "text/plain; charset=utf-8", Unpooled.copiedBuffer(text, StandardCharsets.UTF_8));
    }

    private static void send(ChannelHandlerContext ctx, HttpResponseStatus status, String type, ByteBuf body) {
        FullHttpResponse response = new DefaultFullHttpResponse(HTTP_1_1, status, body);
        response.headers()
                .set(HttpHeaderNames.CONTENT_TYPE, type)
                .setInt(HttpHeaderNames.CONTENT_LENGTH, body.readableBytes());
        ctx.writeAndFlush(response);
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        ctx.close();
    }
}
