package netarena.vertx;

import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetServerOptions;

/** Raw TCP echo on Vert.x's NetServer: each socket piped into itself, as Vert.x's echo example does. */
public final class EchoServer extends VerticleBase {
    private final String host;
    private final int port;

    EchoServer(String host, int port) {
        this.host = host;
        this.port = port;
    }

    @Override
    public Future<?> start() {
        // Vert.x's defaults: TCP_NODELAY on; the listen backlog is Netty's, the kernel's net.core.somaxconn.
        NetServer server = vertx.createNetServer(new NetServerOptions());
        // pipeTo pauses reading while the socket's write queue is full (a client that sends faster than it
        // reads cannot grow our buffers without bound) and closes the socket once the client has closed.
        server.connectHandler(socket -> socket.pipeTo(socket));
        return server.listen(port, host);
    }

    public static void main(String[] argv) {
        Args args = new Args(argv, "java -cp netarena-vertx.jar netarena.vertx.EchoServer [--host ADDR] --port PORT [--workers N]");
        String host = args.string("host", "127.0.0.1");
        int port = args.positiveInt("port", null);
        int workers = args.positiveInt("workers", 1);
        Deploy.start(workers, host, port, () -> new EchoServer(host, port));
    }
}
