package netarena.spring;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import jakarta.annotation.PreDestroy;
import java.nio.charset.StandardCharsets;
import java.sql.Array;
import java.util.ArrayList;
import java.util.List;
import netarena.shared.TechEmpowerRows.DatabaseUrl;
import netarena.shared.TechEmpowerRows.Fortune;
import netarena.shared.TechEmpowerRows.NewNumbers;
import netarena.shared.TechEmpowerRows.World;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

import static netarena.shared.TechEmpowerRows.WORLD_ROWS;
import static netarena.shared.TechEmpowerRows.cachedWorlds;
import static netarena.shared.TechEmpowerRows.count;
import static netarena.shared.TechEmpowerRows.fortunesPage;
import static netarena.shared.TechEmpowerRows.randomId;

/**
 * TechEmpower's database scenarios (/db, /queries, /fortunes, /updates, /cached-queries) on PostgreSQL through
 * JDBC: PostgreSQL's driver (pgjdbc) under a HikariCP pool of netarena.pg-pool connections for the process,
 * queried with Spring's JdbcTemplate. Each request runs on its own virtual thread, which blocks on the
 * connection while PostgreSQL answers; pgjdbc sends one query at a time per connection (no pipelining).
 */
@RestController
public class TechEmpower {
    // TechEmpower requires a Server header on these answers; Tomcat adds Date but no Server by default.
    private static final String SERVER = "java-spring-mvc-vt";
    // One batched UPDATE (allowed by TechEmpower's rules): the ids and their new numbers as two arrays.
    private static final String WORLD_UPDATE =
            "UPDATE world SET randomnumber = v.n FROM unnest(?::int[], ?::int[]) AS v(id, n) WHERE world.id = v.id";

    /** Null when netarena.pg-url is empty (its {postgresql_url} outside these scenarios): the routes answer 404. */
    private final HikariDataSource pool;
    private final JdbcTemplate jdbc;
    /** /cached-queries answers from this copy of World, read once at start (index = id). */
    private final int[] cache = new int[WORLD_ROWS + 1];

    TechEmpower(@Value("${netarena.pg-url:}") String url, @Value("${netarena.pg-pool:10}") int poolSize) {
        if (url.isEmpty()) {
            pool = null;
            jdbc = null;
            return;
        }
        if (poolSize < 1) {
            throw new IllegalArgumentException("netarena.pg-pool must be at least 1, got " + poolSize);
        }
        HikariConfig config = jdbcConfig(url);
        config.setMaximumPoolSize(poolSize);
        config.setPoolName("netarena-postgresql");
        pool = new HikariDataSource(config);
        jdbc = new JdbcTemplate(pool);
        // netarena starts the server once the database holds its fixture, so the cache holds the fixture's rows.
        jdbc.query("SELECT id, randomnumber FROM world", row -> {
            int id = row.getInt(1);
            if (id < 1 || id > WORLD_ROWS) {
                throw new IllegalStateException("world has id " + id + " outside 1.." + WORLD_ROWS);
            }
            cache[id] = row.getInt(2);
        });
    }

    /** postgres://USER[:PASSWORD]@HOST:PORT/DATABASE (libpq's form, which netarena gives) as JDBC's settings. */
    static HikariConfig jdbcConfig(String url) {
        DatabaseUrl database = DatabaseUrl.parse(url, "netarena.pg-url");
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl("jdbc:postgresql://" + database.hostPortDatabase());
        if (database.user() != null) {
            config.setUsername(database.user());
        }
        if (database.password() != null) {
            config.setPassword(database.password());
        }
        return config;
    }

    @PreDestroy
    void close() {
        if (pool != null) {
            pool.close();
        }
    }

    @GetMapping("/db")
    ResponseEntity<?> db() {
        return pool == null ? notConfigured() : json(readWorlds(1).get(0));
    }

    @GetMapping("/queries")
    ResponseEntity<?> queries(@RequestParam(required = false) String queries) {
        return pool == null ? notConfigured() : json(readWorlds(count(queries)));
    }

    @GetMapping("/updates")
    ResponseEntity<?> updates(@RequestParam(required = false) String queries) {
        if (pool == null) {
            return notConfigured();
        }
        List<World> worlds = readWorlds(count(queries));
        NewNumbers drawn = NewNumbers.draw(worlds);
        jdbc.update(WORLD_UPDATE, statement -> {
            Array ids = statement.getConnection().createArrayOf("int4", drawn.byId().keySet().toArray());
            Array numbers = statement.getConnection().createArrayOf("int4", drawn.byId().values().toArray());
            statement.setArray(1, ids);
            statement.setArray(2, numbers);
        });
        return json(drawn.answer());
    }

    @GetMapping("/cached-queries")
    ResponseEntity<?> cachedQueries(@RequestParam(required = false) String count) {
        if (pool == null) {
            return notConfigured();
        }
        return json(cachedWorlds(cache, count));
    }

    @GetMapping("/fortunes")
    ResponseEntity<?> fortunes() {
        if (pool == null) {
            return notConfigured();
        }
        List<Fortune> fortunes = jdbc.query("SELECT id, message FROM fortune",
                (row, index) -> new Fortune(row.getInt(1), row.getString(2)));
        return ResponseEntity.ok().header("Server", SERVER)
                .contentType(new MediaType(MediaType.TEXT_HTML, StandardCharsets.UTF_8))
                .body(fortunesPage(fortunes));
    }

    /** n random rows, each read by its own query (TechEmpower forbids one IN (...) query). */
    private List<World> readWorlds(int n) {
        List<World> worlds = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            worlds.add(jdbc.queryForObject("SELECT id, randomnumber FROM world WHERE id = ?",
                    (row, index) -> new World(row.getInt(1), row.getInt(2)), randomId()));
        }
        return worlds;
    }

    private static ResponseEntity<?> json(Object body) {
        return ResponseEntity.ok().header("Server", SERVER).contentType(MediaType.APPLICATION_JSON).body(body);
    }

    private static ResponseEntity<?> notConfigured() {
        return Application.text(HttpStatus.NOT_FOUND, "postgresql is not configured: start with --netarena.pg-url=URL");
    }
}
