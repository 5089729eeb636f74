package netarena.vertx;

import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpHeaders;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import io.vertx.pgclient.PgBuilder;
import io.vertx.pgclient.PgConnectOptions;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.PoolOptions;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.Tuple;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.TreeMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * TechEmpower's database scenarios (/db, /queries, /fortunes, /updates, /cached-queries) on PostgreSQL through
 * Vert.x's Reactive PostgreSQL client: one pool per process, shared by every verticle instance, of --pg-pool
 * connections. The client pipelines queries by default; here each connection runs one query at a time
 * (pipelining limit 1), so a request's queries go out on as many connections as the pool lends it.
 */
final class Postgres {
    static final int WORLD_ROWS = 10_000;
    static final int MAX_QUERIES = 500;
    // TechEmpower requires Server and Date on these answers; Vert.x adds neither by itself.
    private static final String SERVER = "java-vertx";
    private static final DateTimeFormatter HTTP_DATE =
            DateTimeFormatter.ofPattern("EEE, dd MMM yyyy HH:mm:ss 'GMT'", Locale.ENGLISH);
    private static final String WORLD_QUERY = "SELECT id, randomnumber FROM world WHERE id = $1";
    // One batched UPDATE (allowed by TechEmpower's rules): the ids and their new numbers as two arrays.
    private static final String WORLD_UPDATE =
            "UPDATE world SET randomnumber = v.n FROM unnest($1::int[], $2::int[]) AS v(id, n) WHERE world.id = v.id";

    private final Pool pool;
    /** /cached-queries answers from this copy of World, read once at start; index = id. */
    private final int[] cache;
    /** The Date header's value, refreshed every second by a timer (formatting it per answer would cost more). */
    private volatile String date = now();

    private Postgres(Pool pool, int[] cache) {
        this.pool = pool;
        this.cache = cache;
    }

    /**
     * Opens the pool and reads World into the cache, before any verticle serves: netarena starts the server
     * once the database and its fixture are ready, so the cache holds the fixture's rows. Exits with a message
     * when the database cannot be reached.
     */
    static Postgres connect(Vertx vertx, String url, int poolSize, int eventLoops, Args args) {
        PgConnectOptions connect = null;
        try {
            connect = PgConnectOptions.fromUri(url);
        } catch (RuntimeException e) {
            args.fail("--pg-url '" + url + "': " + e.getMessage() + " (postgres://USER@HOST:PORT/DATABASE)");
        }
        connect.setPipeliningLimit(1);
        // setEventLoopSize: the pool's connections are spread over the {workers} event loops, not all on the
        // loop of the thread that created the pool (main, here); answers still come back on the caller's loop.
        Pool pool = PgBuilder.pool()
                .with(new PoolOptions().setMaxSize(poolSize).setEventLoopSize(eventLoops))
                .connectingTo(connect)
                .using(vertx)
                .build();
        int[] cache = new int[WORLD_ROWS + 1];
        try {
            for (Row row : pool.query("SELECT id, randomnumber FROM world").execute()
                    .toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS)) {
                int id = row.getInteger(0);
                if (id < 1 || id > WORLD_ROWS) {
                    throw new IllegalStateException("world has id " + id + " outside 1.." + WORLD_ROWS);
                }
                cache[id] = row.getInteger(1);
            }
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            System.err.println("error: reading table world from --pg-url " + url + " for the cache: " + cause);
            Runtime.getRuntime().halt(1);
        }
        Postgres postgres = new Postgres(pool, cache);
        vertx.setPeriodic(1000, id -> postgres.date = now());
        return postgres;
    }

    /** Adds the five routes to a verticle's router. */
    void routes(Router router) {
        router.get("/db").handler(ctx -> readWorlds(1).onComplete(
                rows -> json(ctx, rows.get(0)), error -> failed(ctx, error)));
        router.get("/queries").handler(ctx -> readWorlds(count(ctx, "queries")).onComplete(
                rows -> json(ctx, new JsonArray(rows)), error -> failed(ctx, error)));
        router.get("/updates").handler(this::updates);
        router.get("/cached-queries").handler(this::cachedQueries);
        router.get("/fortunes").handler(this::fortunes);
    }

    /** n random rows, each read by its own query (TechEmpower forbids one IN (...) query); sent at once. */
    private Future<List<JsonObject>> readWorlds(int n) {
        List<Future<Row>> reads = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            reads.add(pool.preparedQuery(WORLD_QUERY).execute(Tuple.of(randomId()))
                    .map(rows -> rows.iterator().next()));
        }
        return Future.all(reads).map(done -> {
            List<JsonObject> worlds = new ArrayList<>(n);
            for (Future<Row> read : reads) {
                Row row = read.result();
                worlds.add(world(row.getInteger(0), row.getInteger(1)));
            }
            return worlds;
        });
    }

    private void updates(RoutingContext ctx) {
        readWorlds(count(ctx, "queries")).compose(worlds -> {
            // An id drawn twice keeps its last number, in the answer too. The map is sorted by id so that
            // concurrent requests lock the rows in the same order and cannot deadlock.
            TreeMap<Integer, Integer> last = new TreeMap<>();
            for (JsonObject world : worlds) {
                last.put(world.getInteger("id"), randomId());
            }
            for (JsonObject world : worlds) {
                world.put("randomNumber", last.get(world.getInteger("id")));
            }
            // addValue, not Tuple.of: Tuple.of(Object, Object...) would spread the second array into values.
            Tuple arrays = Tuple.tuple().addValue(last.keySet().toArray(new Integer[0]))
                    .addValue(last.values().toArray(new Integer[0]));
            return pool.preparedQuery(WORLD_UPDATE).execute(arrays).map(done -> worlds);
        }).onComplete(worlds -> json(ctx, new JsonArray(worlds)), error -> failed(ctx, error));
    }

    private void cachedQueries(RoutingContext ctx) {
        int n = count(ctx, "count");
        JsonArray worlds = new JsonArray(new ArrayList<>(n));
        for (int i = 0; i < n; i++) {
            int id = randomId();
            worlds.add(world(id, cache[id]));
        }
        json(ctx, worlds);
    }

    private record Fortune(int id, String message) {}

    private void fortunes(RoutingContext ctx) {
        pool.query("SELECT id, message FROM fortune").execute().onComplete(rows -> {
            List<Fortune> fortunes = new ArrayList<>(rows.size() + 1);
            for (Row row : rows) {
                fortunes.add(new Fortune(row.getInteger(0), row.getString(1)));
            }
            fortunes.add(new Fortune(0, "Additional fortune added at request time."));
            fortunes.sort((a, b) -> a.message.compareTo(b.message));
            // Plain string building with an escaping function, as TechEmpower's Vert.x entry renders it
            // (Vert.x has no template engine of its own; its template modules wrap third-party engines).
            StringBuilder page = new StringBuilder(2048).append("<!DOCTYPE html><html><head><title>Fortunes</title>"
                    + "</head><body><table><tr><th>id</th><th>message</th></tr>");
            for (Fortune fortune : fortunes) {
                page.append("<tr><td>").append(fortune.id).append("</td><td>");
                escape(page, fortune.message);
                page.append("</td></tr>");
            }
            page.append("</table></body></html>");
            headers(ctx).putHeader(HttpHeaders.CONTENT_TYPE, "text/html; charset=utf-8").end(page.toString());
        }, error -> failed(ctx, error));
    }

    /** HTML-escapes text for an element's content or a quoted attribute. */
    static void escape(StringBuilder out, String text) {
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '&' -> out.append("&amp;");
                case '<' -> out.append("&lt;");
                case '>' -> out.append("&gt;");
                case '"' -> out.append("&quot;");
                case '\'' -> out.append("&#39;");
                default -> out.append(c);
            }
        }
    }

    /** TechEmpower's clamp of queries/count: missing or not a number is 1, then 1..500. */
    static int count(RoutingContext ctx, String name) {
        List<String> values = ctx.queryParam(name);
        int n;
        try {
            n = values.isEmpty() ? 1 : Integer.parseInt(values.get(0));
        } catch (NumberFormatException e) {
            n = 1;
        }
        return Math.max(1, Math.min(n, MAX_QUERIES));
    }

    private static int randomId() {
        return ThreadLocalRandom.current().nextInt(WORLD_ROWS) + 1;
    }

    private static JsonObject world(int id, int randomNumber) {
        return new JsonObject().put("id", id).put("randomNumber", randomNumber);
    }

    private HttpServerResponse headers(RoutingContext ctx) {
        return ctx.response().putHeader(HttpHeaders.SERVER, SERVER).putHeader(HttpHeaders.DATE, date);
    }

    // RoutingContext.json: Vert.x's JSON codec, Content-Type application/json.
    private void json(RoutingContext ctx, Object body) {
        headers(ctx);
        ctx.json(body);
    }

    private void failed(RoutingContext ctx, Throwable error) {
        headers(ctx).setStatusCode(500).putHeader(HttpHeaders.CONTENT_TYPE, "text/plain; charset=utf-8")
                .end("database error: " + error.getMessage() + "\n");
    }

    private static String now() {
        return HTTP_DATE.format(ZonedDateTime.now(ZoneOffset.UTC));
    }
}
