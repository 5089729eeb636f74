package netarena.webflux;

import io.r2dbc.postgresql.PostgresqlConnectionFactoryProvider;
import io.r2dbc.spi.Readable;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import netarena.shared.TechEmpowerRows.Fortune;
import netarena.shared.TechEmpowerRows.NewNumbers;
import netarena.shared.TechEmpowerRows.World;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.r2dbc.autoconfigure.ConnectionFactoryOptionsBuilderCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.http.client.ReactorResourceFactory;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.server.ResponseStatusException;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

import static netarena.shared.TechEmpowerRows.WORLD_ROWS;
import static netarena.shared.TechEmpowerRows.cachedWorlds;
import static netarena.shared.TechEmpowerRows.count;
import static netarena.shared.TechEmpowerRows.fortunesPage;
import static netarena.shared.TechEmpowerRows.randomId;

/**
 * TechEmpower's database scenarios (/db, /queries, /fortunes, /updates, /cached-queries) on PostgreSQL through
 * R2DBC: PostgreSQL's R2DBC driver (r2dbc-postgresql) under the r2dbc-pool ConnectionPool that Spring Boot
 * configures (PostgresSettings gives it the URL and netarena.pg-pool connections), queried with Spring's
 * DatabaseClient. Nothing blocks an event loop: each query borrows a connection from the pool when it is
 * subscribed to and gives it back when its rows are read; the driver sends one query at a time per connection
 * (no pipelining).
 */
@RestController
public class TechEmpower {
    // TechEmpower requires Server and Date headers on these answers; Reactor Netty adds neither.
    private static final String SERVER = "java-spring-webflux";
    private static final String WORLD_SELECT = "SELECT id, randomnumber FROM world WHERE id = $1";
    // One batched UPDATE (allowed by TechEmpower's rules): the ids and their new numbers as two arrays.
    private static final String WORLD_UPDATE =
            "UPDATE world SET randomnumber = v.n FROM unnest($1::int[], $2::int[]) AS v(id, n) WHERE world.id = v.id";
    // Read before the server listens: its start-up fails rather than hang when the database does not answer.
    private static final Duration CACHE_READ_TIMEOUT = Duration.ofSeconds(60);

    /** Null without --netarena.pg-url (Boot's R2DBC auto-configuration is then excluded): the routes answer 404. */
    private final DatabaseClient db;
    /** /cached-queries answers from this copy of World, read once at start (index = id). */
    private final int[] cache = new int[WORLD_ROWS + 1];

    public TechEmpower(ObjectProvider<DatabaseClient> client) {
        db = client.getIfAvailable();
        if (db == null) {
            return;
        }
        // netarena starts the server once the database holds its fixture, so the cache holds the fixture's rows.
        // This runs on the main thread while Spring builds its beans, before Reactor Netty opens the port, so
        // waiting here blocks no event loop and no request can find the cache empty.
        db.sql("SELECT id, randomnumber FROM world").map(TechEmpower::world).all()
                .doOnNext(world -> {
                    if (world.id() < 1 || world.id() > WORLD_ROWS) {
                        throw new IllegalStateException("world has id " + world.id() + " outside 1.." + WORLD_ROWS);
                    }
                    cache[world.id()] = world.randomNumber();
                })
                .then().block(CACHE_READ_TIMEOUT);
    }

    /**
     * The driver's connections on the event loops Reactor Netty's HTTP server runs on (the {workers} threads of
     * reactor.netty.ioWorkerCount) instead of Reactor Netty's separate TCP client loops, which would be as many
     * threads again: the process keeps {workers} event loops for everything.
     */
    @Bean
    static ConnectionFactoryOptionsBuilderCustomizer serverEventLoops(ReactorResourceFactory reactorResources) {
        return options -> options.option(PostgresqlConnectionFactoryProvider.LOOP_RESOURCES, reactorResources.getLoopResources());
    }

    @GetMapping("/db")
    public Mono<ResponseEntity<Object>> db() {
        return database().sql(WORLD_SELECT).bind(0, randomId()).map(TechEmpower::world).one().map(TechEmpower::json);
    }

    @GetMapping("/queries")
    public Mono<ResponseEntity<Object>> queries(@RequestParam(required = false) String queries) {
        return readWorlds(count(queries)).map(TechEmpower::json);
    }

    @GetMapping("/updates")
    public Mono<ResponseEntity<Object>> updates(@RequestParam(required = false) String queries) {
        return readWorlds(count(queries)).flatMap(worlds -> {
            NewNumbers drawn = NewNumbers.draw(worlds);
            return database().sql(WORLD_UPDATE)
                    .bind(0, drawn.byId().keySet().toArray(new Integer[0]))
                    .bind(1, drawn.byId().values().toArray(new Integer[0]))
                    .fetch().rowsUpdated()
                    .thenReturn(json(drawn.answer()));
        });
    }

    @GetMapping("/cached-queries")
    public ResponseEntity<Object> cachedQueries(@RequestParam(required = false) String count) {
        database(); // 404 without --netarena.pg-url: the cache was never filled
        return json(cachedWorlds(cache, count));
    }

    @GetMapping("/fortunes")
    public Mono<ResponseEntity<String>> fortunes() {
        return database().sql("SELECT id, message FROM fortune")
                .map(row -> new Fortune(row.get(0, Integer.class), row.get(1, String.class)))
                .all().collectList()
                .map(fortunes -> ResponseEntity.ok().header("Server", SERVER).header("Date", HttpDate.now())
                        .contentType(new MediaType(MediaType.TEXT_HTML, StandardCharsets.UTF_8))
                        .body(fortunesPage(fortunes)));
    }

    /**
     * n random rows, each read by its own query (TechEmpower forbids one IN (...) query). The n queries are
     * subscribed to together: each waits for a connection of the pool, so one request's reads spread over it.
     */
    private Mono<List<World>> readWorlds(int n) {
        DatabaseClient client = database();
        return Flux.range(0, n)
                .flatMap(i -> client.sql(WORLD_SELECT).bind(0, randomId()).map(TechEmpower::world).one())
                .collectList();
    }

    private DatabaseClient database() {
        if (db == null) {
            throw new ResponseStatusException(HttpStatus.NOT_FOUND, "postgresql is not configured: start with --netarena.pg-url");
        }
        return db;
    }

    private static World world(Readable row) {
        return new World(row.get(0, Integer.class), row.get(1, Integer.class));
    }

    private static ResponseEntity<Object> json(Object body) {
        return ResponseEntity.ok().header("Server", SERVER).header("Date", HttpDate.now())
                .contentType(MediaType.APPLICATION_JSON).body(body);
    }
}
