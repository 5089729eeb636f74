package netarena.shared;

import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.ThreadLocalRandom;
import org.springframework.web.util.HtmlUtils;

/**
 * What TechEmpower's database scenarios mean, shared by the two Spring contestants (MVC on JDBC, WebFlux on
 * R2DBC): World and Fortune rows, the clamp of ?queries= and ?count=, a random row id, the fortunes page (the
 * extra fortune added at request time, sorted by message, escaped by Spring's HtmlUtils), and the database URL
 * netarena gives. How each reads and writes the rows stays with its driver.
 */
public final class TechEmpowerRows {
    public static final int WORLD_ROWS = 10_000;
    public static final int MAX_QUERIES = 500;

    public record World(int id, int randomNumber) {}

    public record Fortune(int id, String message) {}

    private TechEmpowerRows() {}

    /** TechEmpower's clamp of queries/count: missing or not a number is 1, then 1..500. */
    public static int count(String value) {
        try {
            return Math.max(1, Math.min(Integer.parseInt(value), MAX_QUERIES));
        } catch (NumberFormatException e) {
            return 1;
        }
    }

    public static int randomId() {
        return ThreadLocalRandom.current().nextInt(WORLD_ROWS) + 1;
    }

    /**
     * /updates' new numbers for rows read: `byId` the number each id gets, sorted by id so that concurrent requests
     * lock the rows in the same order and cannot deadlock (an id drawn twice keeps its last number); `answer` the
     * rows as the request answers them, in the order read.
     */
    public record NewNumbers(TreeMap<Integer, Integer> byId, List<World> answer) {
        public static NewNumbers draw(List<World> worlds) {
            TreeMap<Integer, Integer> byId = new TreeMap<>();
            for (World world : worlds) {
                byId.put(world.id(), randomId());
            }
            List<World> answer = new ArrayList<>(worlds.size());
            for (World world : worlds) {
                answer.add(new World(world.id(), byId.get(world.id())));
            }
            return new NewNumbers(byId, answer);
        }
    }

    /** cached-queries' rows: ?count= random ids (clamped), each row from `cache` (World's copy, index = id). */
    public static List<World> cachedWorlds(int[] cache, String rawCount) {
        int n = count(rawCount);
        List<World> worlds = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            int id = randomId();
            worlds.add(new World(id, cache[id]));
        }
        return worlds;
    }

    /**
     * The fortunes page of the table's rows: the one added at request time, sorted by message, each message
     * escaped with Spring's HtmlUtils.htmlEscape. Plain string building: a template engine (JTE, Mustache,
     * Thymeleaf) would be one more dependency with its own start-up; the escaping is Spring's.
     */
    public static String fortunesPage(List<Fortune> rows) {
        List<Fortune> fortunes = new ArrayList<>(rows);
        fortunes.add(new Fortune(0, "Additional fortune added at request time."));
        fortunes.sort((a, b) -> a.message().compareTo(b.message()));
        StringBuilder page = new StringBuilder(2048).append("<!DOCTYPE html><html><head><title>Fortunes</title>"
                + "</head><body><table><tr><th>id</th><th>message</th></tr>");
        for (Fortune fortune : fortunes) {
            page.append("<tr><td>").append(fortune.id()).append("</td><td>")
                    .append(HtmlUtils.htmlEscape(fortune.message(), "UTF-8")).append("</td></tr>");
        }
        return page.append("</table></body></html>").toString();
    }

    /** The parts of a database URL in libpq's form, postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE. */
    public record DatabaseUrl(String host, int port, String database, String user, String password) {
        /** `url` parsed; `option` (the command-line option that gave it) names it in the error. */
        public static DatabaseUrl parse(String url, String option) {
            URI uri;
            try {
                uri = new URI(url);
            } catch (URISyntaxException e) {
                throw new IllegalArgumentException(option + " '" + url + "': " + e.getMessage());
            }
            String scheme = uri.getScheme();
            if (!("postgres".equals(scheme) || "postgresql".equals(scheme)) || uri.getHost() == null
                    || uri.getPath() == null || uri.getPath().length() < 2) {
                throw new IllegalArgumentException(option + " '" + url + "' is not postgres://USER@HOST:PORT/DATABASE");
            }
            String user = null;
            String password = null;
            if (uri.getUserInfo() != null) {
                String[] parts = uri.getUserInfo().split(":", 2);
                user = parts[0];
                password = parts.length == 2 ? parts[1] : null;
            }
            return new DatabaseUrl(uri.getHost(), uri.getPort() < 0 ? 5432 : uri.getPort(), uri.getPath().substring(1),
                    user, password);
        }

        /** HOST:PORT/DATABASE, the tail of a JDBC or R2DBC URL. */
        public String hostPortDatabase() {
            return host + ":" + port + "/" + database;
        }
    }
}
