package netarena.webflux;

import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.ConcurrentHashMap;
import org.bson.Document;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.server.ResponseStatusException;
import reactor.core.publisher.Mono;

/**
 * The catalog's HTTP scenarios as annotated WebFlux endpoints, the programming model Spring's reference shows
 * first. Handlers run on Reactor Netty's event loops and never block them. /static/** is not here: Spring's
 * static resource handling serves it (application.properties).
 */
@RestController
public class Routes {
    static final int MAX_BYTES = 16 * 1024 * 1024;
    static final int MAX_SLEEP_MS = 60_000;

    record Message(String message) {}

    // /bytes/{n} bodies, built once per n; the byte[] encoder wraps the array without copying it.
    private final ConcurrentHashMap<Integer, byte[]> bodies = new ConcurrentHashMap<>();
    private final MongoDocs mongo;

    public Routes(MongoDocs mongo) {
        this.mongo = mongo;
        for (int n : new int[] {40, 10_000, 524_288}) {
            body(n);
        }
    }

    @GetMapping(value = "/hello", produces = MediaType.TEXT_PLAIN_VALUE)
    public String hello() {
        return "Hello, World!";
    }

    // Serialized on every request by Spring's JSON codec (Jackson, as Boot configures it).
    @GetMapping(value = "/json", produces = MediaType.APPLICATION_JSON_VALUE)
    public Message json() {
        return new Message("Hello, World!");
    }

    @GetMapping(value = "/bytes/{n}", produces = MediaType.APPLICATION_OCTET_STREAM_VALUE)
    public byte[] bytes(@PathVariable int n) {
        if (n < 0 || n > MAX_BYTES) {
            throw new ResponseStatusException(HttpStatus.BAD_REQUEST, "/bytes/{n} needs 0 <= n <= " + MAX_BYTES);
        }
        return body(n);
    }

    private byte[] body(int n) {
        return bodies.computeIfAbsent(n, k -> {
            byte[] stars = new byte[k];
            Arrays.fill(stars, (byte) '*');
            return stars;
        });
    }

    // Mono.delay: a timer on Reactor's parallel scheduler, so no event loop waits.
    @GetMapping(value = "/sleep/{ms}", produces = MediaType.TEXT_PLAIN_VALUE)
    public Mono<String> sleep(@PathVariable int ms) {
        if (ms < 0 || ms > MAX_SLEEP_MS) {
            throw new ResponseStatusException(HttpStatus.BAD_REQUEST, "/sleep/{ms} needs 0 <= ms <= " + MAX_SLEEP_MS);
        }
        return Mono.delay(Duration.ofMillis(ms)).thenReturn("slept " + ms);
    }

    // The document as the driver returns it (org.bson.Document, a Map), serialized by Spring's JSON codec.
    @GetMapping("/mongo/{doc}")
    public Mono<ResponseEntity<Document>> mongo(@PathVariable String doc) {
        if (!mongo.configured()) {
            throw new ResponseStatusException(HttpStatus.NOT_FOUND, "mongo is not configured: start with --netarena.mongo-url");
        }
        return mongo.find(doc)
                .map(found -> ResponseEntity.ok().contentType(MediaType.APPLICATION_JSON).body(found))
                .defaultIfEmpty(ResponseEntity.notFound().build());
    }
}
