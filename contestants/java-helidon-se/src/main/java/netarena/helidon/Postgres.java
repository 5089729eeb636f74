package netarena.helidon;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.helidon.http.Header;
import io.helidon.http.HeaderNames;
import io.helidon.http.HeaderValues;
import io.helidon.http.Status;
import io.helidon.webserver.http.HttpRouting;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import java.net.URI;
import java.net.URISyntaxException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.ThreadLocalRandom;

/**
 * TechEmpower's database scenarios (/db, /queries, /fortunes, /updates, /cached-queries) on PostgreSQL through
 * plain JDBC: PostgreSQL's driver (pgjdbc) under a HikariCP pool of app.pg-pool connections for the process.
 * Each connection is served on its own virtual thread, which blocks on a JDBC connection while PostgreSQL
 * answers; pgjdbc sends one query at a time per connection (no pipelining).
 */
final class Postgres {
    static final int WORLD_ROWS = 10_000;
    static final int MAX_QUERIES = 500;
    // TechEmpower requires Server and Date on these answers; Helidon adds Date, not Server.
    private static final String SERVER = "java-helidon-se";
    private static final String WORLD_QUERY = "SELECT id, randomnumber FROM world WHERE id = ?";
    // One batched UPDATE (allowed by TechEmpower's rules): the ids and their new numbers as two arrays.
    private static final String WORLD_UPDATE =
            "UPDATE world SET randomnumber = v.n FROM unnest(?::int[], ?::int[]) AS v(id, n) WHERE world.id = v.id";

    private static final Header HTML_UTF_8 = HeaderValues.create(HeaderNames.CONTENT_TYPE, "text/html; charset=utf-8");

    record World(int id, int randomNumber) {}

    record Fortune(int id, String message) {}

    private final HikariDataSource pool;
    /** /cached-queries answers from this copy of World, read once at start (index = id). */
    private final int[] cache = new int[WORLD_ROWS + 1];

    /**
     * Opens the pool and reads World into the cache before the server listens: netarena starts the server once
     * the database holds its fixture, so the cache holds the fixture's rows.
     */
    Postgres(String url, int poolSize) throws SQLException {
        HikariConfig config = jdbcConfig(url);
        config.setMaximumPoolSize(poolSize);
        config.setPoolName("netarena-postgresql");
        pool = new HikariDataSource(config);
        Runtime.getRuntime().addShutdownHook(new Thread(pool::close));
        try (Connection connection = pool.getConnection();
                ResultSet rows = connection.createStatement().executeQuery("SELECT id, randomnumber FROM world")) {
            while (rows.next()) {
                int id = rows.getInt(1);
                if (id < 1 || id > WORLD_ROWS) {
                    throw new SQLException("world has id " + id + " outside 1.." + WORLD_ROWS);
                }
                cache[id] = rows.getInt(2);
            }
        }
    }

    /** postgres://USER[:PASSWORD]@HOST:PORT/DATABASE (libpq's form, which netarena gives) as JDBC's settings. */
    static HikariConfig jdbcConfig(String url) {
        URI uri;
        try {
            uri = new URI(url);
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("app.pg-url '" + url + "': " + e.getMessage());
        }
        String scheme = uri.getScheme();
        if (!("postgres".equals(scheme) || "postgresql".equals(scheme)) || uri.getHost() == null
                || uri.getPath() == null || uri.getPath().length() < 2) {
            throw new IllegalArgumentException("app.pg-url '" + url + "' is not postgres://USER@HOST:PORT/DATABASE");
        }
        HikariConfig config = new HikariConfig();
        int port = uri.getPort() < 0 ? 5432 : uri.getPort();
        config.setJdbcUrl("jdbc:postgresql://" + uri.getHost() + ":" + port + uri.getPath());
        if (uri.getUserInfo() != null) {
            String[] user = uri.getUserInfo().split(":", 2);
            config.setUsername(user[0]);
            if (user.length == 2) {
                config.setPassword(user[1]);
            }
        }
        return config;
    }

    void routes(HttpRouting.Builder routing) {
        routing.get("/db", (req, res) -> json(res, readWorlds(1).get(0)))
                .get("/queries", (req, res) -> json(res, readWorlds(count(req, "queries"))))
                .get("/updates", (req, res) -> json(res, updates(count(req, "queries"))))
                .get("/cached-queries", (req, res) -> {
                    int n = count(req, "count");
                    List<World> worlds = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        int id = randomId();
                        worlds.add(new World(id, cache[id]));
                    }
                    json(res, worlds);
                })
                .get("/fortunes", (req, res) -> {
                    res.header(HeaderNames.SERVER, SERVER);
                    res.header(HTML_UTF_8);
                    res.send(fortunesPage());
                })
                .error(SQLException.class, (req, res, error) -> {
                    res.header(HeaderNames.SERVER, SERVER);
                    res.status(Status.INTERNAL_SERVER_ERROR_500).send("database error: " + error.getMessage() + "\n");
                });
    }

    /** n random rows, each read by its own query (TechEmpower forbids one IN (...) query). */
    private List<World> readWorlds(int n) throws SQLException {
        List<World> worlds = new ArrayList<>(n);
        try (Connection connection = pool.getConnection();
                PreparedStatement select = connection.prepareStatement(WORLD_QUERY)) {
            for (int i = 0; i < n; i++) {
                select.setInt(1, randomId());
                try (ResultSet row = select.executeQuery()) {
                    row.next();
                    worlds.add(new World(row.getInt(1), row.getInt(2)));
                }
            }
        }
        return worlds;
    }

    private List<World> updates(int n) throws SQLException {
        List<World> worlds = readWorlds(n);
        // An id drawn twice keeps its last number, in the answer too. The map is sorted by id so that
        // concurrent requests lock the rows in the same order and cannot deadlock.
        TreeMap<Integer, Integer> last = new TreeMap<>();
        for (World world : worlds) {
            last.put(world.id(), randomId());
        }
        List<World> updated = new ArrayList<>(n);
        for (World world : worlds) {
            updated.add(new World(world.id(), last.get(world.id())));
        }
        try (Connection connection = pool.getConnection();
                PreparedStatement update = connection.prepareStatement(WORLD_UPDATE)) {
            update.setArray(1, connection.createArrayOf("int4", last.keySet().toArray()));
            update.setArray(2, connection.createArrayOf("int4", last.values().toArray()));
            update.executeUpdate();
        }
        return updated;
    }

    private String fortunesPage() throws SQLException {
        List<Fortune> fortunes = new ArrayList<>();
        try (Connection connection = pool.getConnection();
                ResultSet rows = connection.createStatement().executeQuery("SELECT id, message FROM fortune")) {
            while (rows.next()) {
                fortunes.add(new Fortune(rows.getInt(1), rows.getString(2)));
            }
        }
        fortunes.add(new Fortune(0, "Additional fortune added at request time."));
        fortunes.sort((a, b) -> a.message().compareTo(b.message()));
        // Helidon SE has no template engine of its own: the page is built as a string, each message escaped.
        StringBuilder page = new StringBuilder(2048).append("<!DOCTYPE html><html><head><title>Fortunes</title>"
                + "</head><body><table><tr><th>id</th><th>message</th></tr>");
        for (Fortune fortune : fortunes) {
            page.append("<tr><td>").append(fortune.id()).append("</td><td>");
            escape(page, fortune.message());
            page.append("</td></tr>");
        }
        return page.append("</table></body></html>").toString();
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
    static int count(ServerRequest req, String name) {
        try {
            return Math.max(1, Math.min(Integer.parseInt(req.query().first(name).orElse("")), MAX_QUERIES));
        } catch (NumberFormatException e) {
            return 1;
        }
    }

    private static int randomId() {
        return ThreadLocalRandom.current().nextInt(WORLD_ROWS) + 1;
    }

    // Helidon's JSON media support (Jackson), as /json: Content-Type application/json.
    private static void json(ServerResponse res, Object body) {
        res.header(HeaderNames.SERVER, SERVER);
        res.send(body);
    }
}
