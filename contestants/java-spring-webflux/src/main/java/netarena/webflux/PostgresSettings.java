package netarena.webflux;

import java.util.LinkedHashMap;
import java.util.Map;
import netarena.shared.TechEmpowerRows.DatabaseUrl;

/**
 * Spring Boot's R2DBC properties for --netarena.pg-url and --netarena.pg-pool, which the application adds to
 * Spring's environment before any bean exists, so that Boot's R2DBC auto-configuration builds the driver's
 * ConnectionFactory and its r2dbc-pool ConnectionPool from them.
 * <ul>
 *   <li>A URL (libpq's postgres://USER[:PASSWORD]@HOST:PORT/DATABASE, the form netarena gives): spring.r2dbc.url
 *       as R2DBC's r2dbc:postgresql://HOST:PORT/DATABASE, the user and password as their own properties (so no
 *       character of theirs needs escaping again), and the pool at exactly netarena.pg-pool connections.
 *   <li>No URL (netarena's {postgresql_url} is empty when the measured scenario has no database): Boot's R2DBC
 *       auto-configuration is excluded, so no ConnectionFactory exists and nothing connects; the database
 *       routes answer 404.
 * </ul>
 */
final class PostgresSettings {
    static final String R2DBC_AUTO_CONFIGURATION = "org.springframework.boot.r2dbc.autoconfigure.R2dbcAutoConfiguration";

    private PostgresSettings() {}

    /** The properties for `url` (empty: none configured) and a pool of `pool` connections. */
    static Map<String, Object> springProperties(String url, String pool) {
        if (url.isEmpty()) {
            // The other R2DBC and Spring Data R2DBC auto-configurations need the ConnectionFactory this one makes.
            return Map.of("spring.autoconfigure.exclude", R2DBC_AUTO_CONFIGURATION);
        }
        int size = poolSize(pool);
        DatabaseUrl database = DatabaseUrl.parse(url, "--netarena.pg-url");
        Map<String, Object> properties = new LinkedHashMap<>();
        properties.put("spring.r2dbc.url", "r2dbc:postgresql://" + database.hostPortDatabase());
        if (database.user() != null) {
            properties.put("spring.r2dbc.username", database.user());
        }
        if (database.password() != null) {
            properties.put("spring.r2dbc.password", database.password());
        }
        // A fixed pool, as java-spring-mvc-vt's HikariCP (whose minimumIdle defaults to its maximum): Boot's
        // initial size (10) would otherwise exceed a smaller maximum.
        properties.put("spring.r2dbc.pool.max-size", size);
        properties.put("spring.r2dbc.pool.initial-size", size);
        return properties;
    }

    private static int poolSize(String pool) {
        int size;
        try {
            size = Integer.parseInt(pool);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--netarena.pg-pool '" + pool + "' is not a whole number");
        }
        if (size < 1) {
            throw new IllegalArgumentException("--netarena.pg-pool must be at least 1, got " + size);
        }
        return size;
    }
}
