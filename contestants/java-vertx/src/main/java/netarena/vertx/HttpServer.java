package netarena.vertx;

import com.mongodb.ConnectionString;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.json.JsonObject;
import io.vertx.core.net.JdkSSLEngineOptions;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.ext.mongo.MongoClient;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import io.vertx.ext.web.handler.FileSystemAccess;
import io.vertx.ext.web.handler.StaticHandler;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

/** The HTTP verticle: Vert.x Web's Router on an HttpServer; {workers} instances of it share the port. */
public final class HttpServer extends VerticleBase {
    static final int MAX_BYTES = 16 * 1024 * 1024;
    static final int MAX_SLEEP_MS = 60_000;
    // One shared pool for every verticle instance (MongoClient.createShared by this name), as Vert.x's docs
    // advise: the instances are one application.
    private static final String MONGO_POOL = "netarena";

    private static final Buffer HELLO = Buffer.buffer("Hello, World!");
    // /bytes/{n} bodies, built once per n and shared: writing a Buffer sends a slice of it, never the original.
    private static final ConcurrentHashMap<Integer, Buffer> BYTES = new ConcurrentHashMap<>();

    private final String host;
    private final int port;
    /** For the protocol started for: {@link #serverOptions}. */
    private final HttpServerOptions options;
    private final String staticDir;
    /** Null without --mongo-url: /mongo answers 404 then. */
    private final JsonObject mongoConfig;
    private MongoClient mongo;
    /** Null without --pg-url: TechEmpower's database routes answer 404 then. */
    private final Postgres postgres;

    HttpServer(String host, int port, HttpServerOptions options, String staticDir, JsonObject mongoConfig,
               Postgres postgres) {
        this.host = host;
        this.port = port;
        this.options = options;
        this.staticDir = staticDir;
        this.mongoConfig = mongoConfig;
        this.postgres = postgres;
    }

    @Override
    public Future<?> start() {
        if (mongoConfig != null) {
            mongo = MongoClient.createShared(vertx, mongoConfig, MONGO_POOL);
        }
        Router router = Router.router(vertx);
        router.get("/hello").handler(ctx -> ctx.response()
                .putHeader(HttpHeaders.CONTENT_TYPE, "text/plain")
                .end(HELLO));
        // RoutingContext.json: Vert.x's JSON codec encodes the object and sets Content-Type application/json.
        router.get("/json").handler(ctx -> ctx.json(new JsonObject().put("message", "Hello, World!")));
        router.get("/bytes/:n").handler(this::bytes);
        router.get("/sleep/:ms").handler(this::sleep);
        router.get("/mongo/:doc").handler(this::mongo);
        if (postgres != null) {
            postgres.routes(router);
        }
        // Vert.x Web's StaticHandler with its production defaults (cache headers, cached file properties,
        // sendfile); FileSystemAccess.ROOT because the static set lives outside the working directory. Over TLS
        // Vert.x sends the file in 8 KiB chunks through the encryption instead (sendfile cannot pass through it).
        router.get("/static/*").handler(StaticHandler.create(FileSystemAccess.ROOT, staticDir));
        // A copy per instance: Vert.x keeps the object it is given, so no two servers share one.
        return vertx.createHttpServer(new HttpServerOptions(options))
                .requestHandler(router)
                .listen(port, host);
    }

    private void bytes(RoutingContext ctx) {
        int n = parseBounded(ctx.pathParam("n"), MAX_BYTES);
        if (n < 0) {
            text(ctx, 400, "/bytes/{n} needs 0 <= n <= " + MAX_BYTES + "\n");
            return;
        }
        ctx.response()
                .putHeader(HttpHeaders.CONTENT_TYPE, "application/octet-stream")
                .end(body(n));
    }

    static Buffer body(int n) {
        return BYTES.computeIfAbsent(n, k -> {
            byte[] stars = new byte[k];
            Arrays.fill(stars, (byte) '*');
            return Buffer.buffer(stars);
        });
    }

    // A timer on this verticle's event loop: the loop serves other connections meanwhile.
    private void sleep(RoutingContext ctx) {
        int ms = parseBounded(ctx.pathParam("ms"), MAX_SLEEP_MS);
        if (ms < 0) {
            text(ctx, 400, "/sleep/{ms} needs 0 <= ms <= " + MAX_SLEEP_MS + "\n");
            return;
        }
        if (ms == 0) {
            text(ctx, 200, "slept 0");  // setTimer refuses a delay below 1 ms
            return;
        }
        vertx.setTimer(ms, id -> text(ctx, 200, "slept " + ms));
    }

    // One find by _id through Vert.x's MongoDB client (the official reactive-streams driver underneath); its
    // future completes on this verticle's event loop, and the document goes out through RoutingContext.json.
    private void mongo(RoutingContext ctx) {
        if (mongo == null) {
            text(ctx, 404, "mongo is not configured: start with --mongo-url\n");
            return;
        }
        mongo.findOne("docs", new JsonObject().put("_id", ctx.pathParam("doc")), null)
                .onSuccess(doc -> {
                    if (doc == null) {
                        text(ctx, 404, "not found\n");
                    } else {
                        ctx.json(doc);
                    }
                })
                .onFailure(error -> text(ctx, 500, "mongo: " + error.getMessage() + "\n"));
    }

    private static void text(RoutingContext ctx, int status, String body) {
        ctx.response()
                .setStatusCode(status)
                .putHeader(HttpHeaders.CONTENT_TYPE, "text/plain; charset=utf-8")
                .end(body);
    }

    private static int parseBounded(String digits, int max) {
        if (digits == null || digits.isEmpty() || digits.length() > 9 || !digits.chars().allMatch(Character::isDigit)) {
            return -1;
        }
        int n = Integer.parseInt(digits);
        return n <= max ? n : -1;
    }

    /**
     * The server's options for the protocol netarena started it for (NETARENA_PROTOCOL; unset, as when started
     * by hand, is h1), each served alone. h1: Vert.x's defaults, which meet the catalog (TCP_NODELAY on; the listen
     * backlog is Netty's, the kernel's net.core.somaxconn, 4096 on current kernels, above the catalog's 1024), but
     * for its cleartext HTTP/2, on by default, turned off so that it speaks HTTP/1.1 alone. h2c: that cleartext
     * HTTP/2 on (Vert.x tells a client's HTTP/2 preface, prior knowledge, from an HTTP/1.1 request by its first
     * bytes). h1-tls and h2: HTTPS on the same port with the PEM certificate and key netarena names in
     * NETARENA_TLS_CERT and NETARENA_TLS_KEY, through the JDK's own TLS (JSSE, Vert.x's JdkSSLEngineOptions,
     * stated although it is Vert.x's default engine), ALPN offering the one protocol started for: http/1.1 alone
     * for h1-tls (a client offering h2 beside it still gets HTTP/1.1, which is what an h1-tls level measures), h2
     * alone for h2. Any other protocol exits 2.
     */
    static HttpServerOptions serverOptions(Args args) {
        HttpServerOptions options = new HttpServerOptions();
        String protocol = System.getenv().getOrDefault("NETARENA_PROTOCOL", "h1");
        switch (protocol) {
            case "h1":
                return options.setHttp2ClearTextEnabled(false);
            case "h2c":
                return options.setHttp2ClearTextEnabled(true);
            case "h1-tls":
                return overTls(options, args, protocol).setAlpnVersions(List.of(HttpVersion.HTTP_1_1));
            case "h2":
                return overTls(options, args, protocol).setAlpnVersions(List.of(HttpVersion.HTTP_2));
            default:
                args.fail("NETARENA_PROTOCOL must be h1, h1-tls, h2 or h2c (this contestant serves no other), got '"
                        + protocol + "'");
                return options;
        }
    }

    private static HttpServerOptions overTls(HttpServerOptions options, Args args, String protocol) {
        return options.setSsl(true)
                .setSslEngineOptions(new JdkSSLEngineOptions())
                .setKeyCertOptions(new PemKeyCertOptions()
                        .setCertPath(pemFile(args, protocol, "NETARENA_TLS_CERT"))
                        .setKeyPath(pemFile(args, protocol, "NETARENA_TLS_KEY")))
                .setUseAlpn(true);
    }

    /** The readable file the environment variable names, or exit 2 saying which is missing. */
    private static String pemFile(Args args, String protocol, String variable) {
        String file = System.getenv(variable);
        if (file == null || file.isEmpty()) {
            args.fail("NETARENA_PROTOCOL=" + protocol + " without " + variable + ": set it to the PEM file to serve"
                    + " TLS with (netarena does for its h1-tls and h2 levels)");
        }
        if (!Files.isReadable(Path.of(file))) {
            args.fail(variable + "=" + file + " cannot be read; it must name a PEM file");
        }
        return file;
    }

    public static void main(String[] argv) {
        Args args = new Args(argv,
                "java -jar netarena-vertx.jar [--host ADDR] --port PORT [--workers N] --static-dir DIR"
                        + " [--mongo-url mongodb://HOST:PORT/DATABASE]"
                        + " [--pg-url postgres://USER@HOST:PORT/DATABASE --pg-pool N]");
        String host = args.string("host", "127.0.0.1");
        int port = args.positiveInt("port", null);
        int workers = args.positiveInt("workers", 1);
        Path staticDir = Path.of(args.string("static-dir", null)).toAbsolutePath().normalize();
        if (!Files.isDirectory(staticDir)) {
            args.fail("--static-dir " + staticDir + " is not a directory; pass the folder holding the static file set");
        }
        // Empty (netarena's {mongo_url} outside mongo measurements): no database, /mongo answers 404.
        String mongoUrl = args.string("mongo-url", "");
        JsonObject mongoConfig = null;
        if (!mongoUrl.isEmpty()) {
            String database = null;
            try {
                database = new ConnectionString(mongoUrl).getDatabase();
            } catch (IllegalArgumentException e) {
                args.fail("--mongo-url '" + mongoUrl + "': " + e.getMessage());
            }
            if (database == null || database.isEmpty()) {
                args.fail("--mongo-url '" + mongoUrl + "' names no database (mongodb://host:port/DATABASE)");
            }
            // The client's defaults otherwise (the driver's pool of 100 connections).
            mongoConfig = new JsonObject().put("connection_string", mongoUrl).put("db_name", database);
        }
        // Empty (netarena's {postgresql_url} outside the database scenarios): no pool, no database routes.
        String pgUrl = args.string("pg-url", "");
        int pgPool = args.positiveInt("pg-pool", 8);
        JsonObject mongo = mongoConfig;
        HttpServerOptions options = serverOptions(args);
        for (int n : new int[] {40, 10_000, 524_288}) {
            body(n);
        }
        Vertx vertx = Deploy.create(workers);
        Postgres postgres = pgUrl.isEmpty() ? null : Postgres.connect(vertx, pgUrl, pgPool, workers, args);
        Deploy.start(vertx, workers, host, port,
                () -> new HttpServer(host, port, options, staticDir.toString(), mongo, postgres));
    }
}
