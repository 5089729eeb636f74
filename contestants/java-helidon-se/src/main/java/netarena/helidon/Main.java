package netarena.helidon;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import io.helidon.common.configurable.Resource;
import io.helidon.common.pki.Keys;
import io.helidon.config.Config;
import io.helidon.http.HeaderValues;
import io.helidon.http.Status;
import io.helidon.webserver.WebServer;
import io.helidon.webserver.WebServerConfig;
import io.helidon.webserver.http.HttpRouting;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import io.helidon.webserver.http1.Http1Config;
import io.helidon.webserver.http2.Http2Config;
import io.helidon.webserver.spi.ProtocolConfig;
import io.helidon.webserver.staticcontent.StaticContentFeature;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.bson.Document;

/**
 * Helidon SE WebServer: every connection is served on its own virtual thread, so a handler blocks as plain
 * Java code does (Thread.sleep, the synchronous MongoDB driver) and the carrier thread serves others meanwhile.
 */
public final class Main {
    static final int MAX_BYTES = 16 * 1024 * 1024;
    static final int MAX_SLEEP_MS = 60_000;
    static final byte[] HELLO = "Hello, World!".getBytes(StandardCharsets.US_ASCII);

    record Message(String message) {}

    /** The body of /bytes/{n}, built once per n and shared afterwards. */
    private static final Map<Integer, byte[]> BYTES = new ConcurrentHashMap<>();

    public static void main(String[] argv) {
        // application.yaml, overridden by system properties (the start command's -D options) and the environment.
        Config config = Config.create();
        Path staticDir = Path.of(config.get("app.static-dir").asString()
                .orElseGet(() -> fail("give -Dapp.static-dir=DIR, the folder holding the static file set")))
                .toAbsolutePath().normalize();
        if (!Files.isDirectory(staticDir)) {
            fail("app.static-dir " + staticDir + " is not a directory; pass the folder holding the static file set");
        }
        // Empty (netarena's {mongo_url} outside mongo measurements): no database, /mongo answers 404.
        String mongoUrl = config.get("app.mongo-url").asString().orElse("");
        MongoCollection<Document> docs = mongoUrl.isEmpty() ? null : openDocs(mongoUrl);
        // Empty (netarena's {postgresql_url} outside the database scenarios): no pool, no database routes.
        String pgUrl = config.get("app.pg-url").asString().orElse("");
        int pgPool = config.get("app.pg-pool").asInt().orElse(10);
        Postgres postgres = pgUrl.isEmpty() ? null : openPostgres(pgUrl, pgPool);
        for (int n : new int[] {40, 10_000, 524_288}) {
            bytes(n);
        }

        WebServerConfig.Builder server = WebServer.builder()
                .config(config.get("server"))
                .addFeature(StaticContentFeature.create(s -> s.addPath(p -> p.location(staticDir).context("/static"))))
                .routing(routing -> {
                    routes(routing, docs);
                    if (postgres != null) {
                        postgres.routes(routing);
                    }
                });
        serveProtocol(server);
        server.build().start();
    }

    /**
     * The protocol netarena started the server for (NETARENA_PROTOCOL; unset, as when started by hand, is h1), that
     * one alone: the listener's connection providers are named here instead of discovered (both HTTP/1.1's and
     * HTTP/2's are on the class path), so a start for one protocol never serves another.
     * <ul>
     *   <li>h1: HTTP/1.1 in cleartext. No HTTP/2 provider, hence no upgrade to h2c either (HTTP/1.1's upgraders
     *       are made only for the protocols the listener lists).
     *   <li>h1-tls: the same over Helidon's Tls (see {@link #tls}). Helidon's ALPN selector picks the first
     *       protocol the client offers that a listed provider serves: http/1.1 here, even for a client offering h2.
     *   <li>h2: HTTP/2 alone over the same Tls on the JDK's SSLSocket; its provider's one ALPN protocol is h2, and a
     *       client offering none Helidon serves gets TLS's no_application_protocol alert.
     *   <li>h2c: HTTP/2 alone in cleartext: Helidon's HTTP/2 selector takes a connection whose first bytes are the
     *       client's preface (prior knowledge).
     * </ul>
     * Both HTTP/2 starts run Helidon's HTTP/2 at its defaults (settings, windows, stream limits). Any other
     * protocol exits 2.
     */
    static void serveProtocol(WebServerConfig.Builder server) {
        String protocol = System.getenv().getOrDefault("NETARENA_PROTOCOL", "h1");
        ProtocolConfig served = switch (protocol) {
            case "h1", "h1-tls" -> Http1Config.create();
            case "h2", "h2c" -> Http2Config.create();
            default -> fail("NETARENA_PROTOCOL must be h1, h1-tls, h2 or h2c (this contestant serves no other), got '"
                    + protocol + "'");
        };
        server.protocolsDiscoverServices(false).protocols(List.of(served));
        if (protocol.equals("h1-tls") || protocol.equals("h2")) {
            tls(server, protocol);
        }
        if (protocol.equals("h2")) {
            // The JDK's SSLSocket instead of Helidon's own TLS over a SocketChannel (use-nio, its default): that
            // one loses the server's first HTTP/2 frame, its SETTINGS, written right after the handshake while the
            // JDK's TLS 1.3 engine still has a post-handshake message to wrap (TlsNioSocket.doHandshake clears the
            // buffer holding the frame), so the client's first frame is a WINDOW_UPDATE and it gives up.
            server.useNio(false);
        }
    }

    /**
     * HTTPS on the same listener: Helidon's Tls from the PEM certificate and key netarena names in
     * NETARENA_TLS_CERT and NETARENA_TLS_KEY (Keys.builder().pem(...), as Helidon's docs configure a PEM key), over
     * the JDK's own TLS (JSSE) at Helidon's Tls defaults.
     */
    static void tls(WebServerConfig.Builder server, String protocol) {
        Path cert = pemFile("NETARENA_TLS_CERT", protocol);
        Path key = pemFile("NETARENA_TLS_KEY", protocol);
        Keys keys;
        try {
            keys = Keys.builder()
                    .pem(pem -> pem.key(Resource.create(key)).certChain(Resource.create(cert)))
                    .build();
        } catch (RuntimeException e) {
            keys = fail("NETARENA_TLS_CERT " + cert + " with NETARENA_TLS_KEY " + key + ": " + e.getMessage());
        }
        if (keys.privateKey().isEmpty() || keys.certChain().isEmpty()) {
            fail("NETARENA_TLS_CERT " + cert + " with NETARENA_TLS_KEY " + key
                    + ": no PEM certificate chain and PKCS#8 private key found in them");
        }
        Keys pemKeys = keys;
        server.tls(tls -> tls.privateKey(pemKeys).privateKeyCertChain(pemKeys));
    }

    /** The readable file the environment variable names, or exit 2 saying which is missing. */
    static Path pemFile(String variable, String protocol) {
        String file = System.getenv(variable);
        if (file == null || file.isEmpty()) {
            fail("NETARENA_PROTOCOL=" + protocol + " without " + variable + ": set it to the PEM file to serve TLS"
                    + " with (netarena does for its h1-tls and h2 levels)");
        }
        Path path = Path.of(file);
        if (!Files.isReadable(path)) {
            fail(variable + "=" + file + " cannot be read; it must name a PEM file");
        }
        return path;
    }

    static void routes(HttpRouting.Builder routing, MongoCollection<Document> docs) {
        routing.get("/hello", (req, res) -> {
                    res.header(HeaderValues.CONTENT_TYPE_TEXT_PLAIN);
                    res.send(HELLO);
                })
                .get("/json", (req, res) -> res.send(new Message("Hello, World!")))
                .get("/bytes/{n}", (req, res) -> {
                    int n = bounded(req, "n", MAX_BYTES);
                    if (n < 0) {
                        badRequest(res, "/bytes/{n} needs 0 <= n <= " + MAX_BYTES);
                        return;
                    }
                    res.header(HeaderValues.CONTENT_TYPE_OCTET_STREAM);
                    res.send(bytes(n));
                })
                // Blocks this request's virtual thread only: the JDK unmounts it from its carrier while it sleeps.
                .get("/sleep/{ms}", (req, res) -> {
                    int ms = bounded(req, "ms", MAX_SLEEP_MS);
                    if (ms < 0) {
                        badRequest(res, "/sleep/{ms} needs 0 <= ms <= " + MAX_SLEEP_MS);
                        return;
                    }
                    Thread.sleep(ms);
                    res.header(HeaderValues.CONTENT_TYPE_TEXT_PLAIN);
                    res.send("slept " + ms);
                })
                .get("/mongo/{doc}", (req, res) -> {
                    if (docs == null) {
                        res.status(Status.NOT_FOUND_404).send("mongo is not configured: start with -Dapp.mongo-url=URL\n");
                        return;
                    }
                    String id = req.path().pathParameters().get("doc");
                    // One find by _id on the driver's connection pool; the virtual thread waits for the reply.
                    Document doc = docs.find(Filters.eq("_id", id)).first();
                    if (doc == null) {
                        res.status(Status.NOT_FOUND_404).send("no document " + id + "\n");
                    } else {
                        res.send(doc);  // Helidon's JSON media support (Jackson), as /json
                    }
                });
    }

    static byte[] bytes(int n) {
        return BYTES.computeIfAbsent(n, k -> {
            byte[] body = new byte[k];
            Arrays.fill(body, (byte) '*');
            return body;
        });
    }

    /** The path parameter as an int in 0..max, or -1 when it is not one. */
    static int bounded(ServerRequest req, String name, int max) {
        try {
            int value = Integer.parseInt(req.path().pathParameters().get(name));
            return value >= 0 && value <= max ? value : -1;
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    static void badRequest(ServerResponse res, String message) {
        res.status(Status.BAD_REQUEST_400).send(message + "\n");
    }

    /** One MongoClient (the driver's pool, default 100 connections) for the process; it connects lazily. */
    static MongoCollection<Document> openDocs(String url) {
        try {
            com.mongodb.ConnectionString cs = new com.mongodb.ConnectionString(url);
            if (cs.getDatabase() == null || cs.getDatabase().isEmpty()) {
                fail("app.mongo-url '" + url + "' names no database (mongodb://host:port/DATABASE)");
            }
            MongoClient client = MongoClients.create(cs);
            Runtime.getRuntime().addShutdownHook(new Thread(client::close));
            return client.getDatabase(cs.getDatabase()).getCollection("docs");
        } catch (IllegalArgumentException e) {
            return fail("app.mongo-url '" + url + "': " + e.getMessage());
        }
    }

    static Postgres openPostgres(String url, int poolSize) {
        if (poolSize < 1) {
            return fail("app.pg-pool must be at least 1, got " + poolSize);
        }
        try {
            return new Postgres(url, poolSize);
        } catch (IllegalArgumentException e) {
            return fail(e.getMessage());
        } catch (Exception e) {
            return fail("app.pg-url " + url + ": cannot read table world for the cache: " + e);
        }
    }

    static <T> T fail(String message) {
        System.err.println("error: " + message);
        System.exit(2);
        return null;
    }
}
