// A netarena contestant written by `netarena new`: the JDK only (com.sun.net.httpserver), compiled with javac.
//
// Every route of the scenario catalog (docs/scenarios.md) but static is here; the manifest lists the ones it
// claims. What verification holds every server to: HTTP/1.1 keep-alive, 127.0.0.1 only, a listen backlog of
// at least 1024, TCP_NODELAY, and the exact bodies below. Replace it with your framework's and keep those.
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;

public class Server {
    static final int BACKLOG = 4096;
    static final Map<Integer, byte[]> BYTES = new ConcurrentHashMap<>(); // built once per size (the catalog's rule)

    static void reply(HttpExchange ex, int status, String type, byte[] body) throws IOException {
        ex.getResponseHeaders().set("Content-Type", type);
        ex.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(body);
        }
    }

    static Integer number(String path, String prefix) {
        try {
            return Integer.valueOf(path.substring(prefix.length()));
        } catch (NumberFormatException e) {
            return null;
        }
    }

    static void handle(HttpExchange ex) throws IOException {
        try (InputStream in = ex.getRequestBody()) {
            in.readAllBytes(); // a request body is read and ignored
        }
        String path = ex.getRequestURI().getPath();
        if (path.equals("/hello")) {
            reply(ex, 200, "text/plain", "Hello, World!".getBytes(StandardCharsets.UTF_8));
        } else if (path.equals("/json")) {
            reply(ex, 200, "application/json", "{\"message\":\"Hello, World!\"}".getBytes(StandardCharsets.UTF_8));
        } else if (path.startsWith("/bytes/") && number(path, "/bytes/") != null) {
            byte[] body = BYTES.computeIfAbsent(number(path, "/bytes/"), n -> {
                byte[] b = new byte[n];
                Arrays.fill(b, (byte) '*');
                return b;
            });
            reply(ex, 200, "application/octet-stream", body);
        } else if (path.startsWith("/sleep/") && number(path, "/sleep/") != null) {
            int ms = number(path, "/sleep/");
            try {
                Thread.sleep(ms); // blocks this request's pool thread only
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            reply(ex, 200, "text/plain", ("slept " + ms).getBytes(StandardCharsets.UTF_8));
        } else {
            reply(ex, 404, "text/plain", new byte[0]);
        }
    }

    static void echo(int port) throws IOException {
        try (ServerSocket listener = new ServerSocket(port, BACKLOG, InetAddress.getByName("127.0.0.1"))) {
            while (true) {
                Socket socket = listener.accept();
                socket.setTcpNoDelay(true);
                new Thread(() -> {
                    try (socket) {
                        socket.getInputStream().transferTo(socket.getOutputStream());
                    } catch (IOException e) {
                        // the client went away: nothing to answer
                    }
                }).start();
            }
        }
    }

    public static void main(String[] args) throws IOException {
        int port = Integer.parseInt(args[Arrays.asList(args).indexOf("--port") + 1]);
        if (Arrays.asList(args).contains("--echo")) {
            echo(port);
            return;
        }
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), BACKLOG);
        server.createContext("/", ex -> {
            try {
                handle(ex);
            } finally {
                ex.close();
            }
        });
        server.setExecutor(Executors.newCachedThreadPool());
        server.start();
    }
}
