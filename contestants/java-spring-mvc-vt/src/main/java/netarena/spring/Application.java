package netarena.spring;

import com.mongodb.ConnectionString;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import netarena.shared.ServedProtocol;
import org.bson.Document;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.RestController;

/**
 * Spring MVC on Tomcat with virtual threads: each request runs on its own virtual thread, so the handlers block
 * as plain Java code does (Thread.sleep, the synchronous MongoDB driver) while the carrier thread serves others.
 */
@SpringBootApplication
@RestController
public class Application {
    static final int MAX_BYTES = 16 * 1024 * 1024;
    static final int MAX_SLEEP_MS = 60_000;

    record Message(String message) {}

    /** The body of /bytes/{n}, built once per n and shared afterwards. */
    private final Map<Integer, byte[]> bytesBodies = new ConcurrentHashMap<>();
    /** Null when netarena.mongo-url is empty (its {mongo_url} outside mongo measurements): /mongo answers 404. */
    private final MongoClient mongo;
    private final MongoCollection<Document> docs;

    Application(@Value("${netarena.mongo-url:}") String mongoUrl) {
        for (int n : new int[] {40, 10_000, 524_288}) {
            bytes(n);
        }
        if (mongoUrl.isEmpty()) {
            mongo = null;
            docs = null;
            return;
        }
        ConnectionString cs = new ConnectionString(mongoUrl);
        if (cs.getDatabase() == null || cs.getDatabase().isEmpty()) {
            throw new IllegalArgumentException("netarena.mongo-url '" + mongoUrl
                    + "' names no database (mongodb://host:port/DATABASE)");
        }
        // One MongoClient (the driver's pool, default 100 connections) for the process; it connects lazily.
        mongo = MongoClients.create(cs);
        docs = mongo.getDatabase(cs.getDatabase()).getCollection("docs");
    }

    public static void main(String[] args) {
        SpringApplication app = new SpringApplication(Application.class);
        // The server properties of the protocol started for (ServedProtocol): HTTPS for h1-tls and h2, HTTP/2 for h2
        // and h2c, nothing for h1.
        app.setDefaultProperties(ServedProtocol.serverProperties());
        app.run(args);
    }

    @GetMapping(value = "/hello", produces = MediaType.TEXT_PLAIN_VALUE)
    String hello() {
        return "Hello, World!";
    }

    @GetMapping("/json")
    Message json() {
        return new Message("Hello, World!");
    }

    @GetMapping(value = "/bytes/{n}", produces = MediaType.APPLICATION_OCTET_STREAM_VALUE)
    ResponseEntity<byte[]> bytesRoute(@PathVariable String n) {
        int size = bounded(n, MAX_BYTES);
        if (size < 0) {
            return badRequest("/bytes/{n} needs 0 <= n <= " + MAX_BYTES);
        }
        return ResponseEntity.ok(bytes(size));
    }

    // Blocks this request's virtual thread only: the JDK unmounts it from its carrier while it sleeps.
    @GetMapping(value = "/sleep/{ms}", produces = MediaType.TEXT_PLAIN_VALUE)
    ResponseEntity<?> sleep(@PathVariable String ms) throws InterruptedException {
        int millis = bounded(ms, MAX_SLEEP_MS);
        if (millis < 0) {
            return badRequest("/sleep/{ms} needs 0 <= ms <= " + MAX_SLEEP_MS);
        }
        Thread.sleep(millis);
        return ResponseEntity.ok("slept " + millis);
    }

    // One find by _id on the driver's connection pool; the virtual thread waits for the reply. The Document (a
    // Map) is written by Spring's JSON converter, as /json is.
    @GetMapping(value = "/mongo/{doc}", produces = MediaType.APPLICATION_JSON_VALUE)
    ResponseEntity<?> mongo(@PathVariable String doc) {
        if (docs == null) {
            return text(HttpStatus.NOT_FOUND, "mongo is not configured: start with --netarena.mongo-url=URL");
        }
        Document found = docs.find(Filters.eq("_id", doc)).first();
        return found == null ? text(HttpStatus.NOT_FOUND, "no document " + doc) : ResponseEntity.ok(found);
    }

    byte[] bytes(int n) {
        return bytesBodies.computeIfAbsent(n, k -> {
            byte[] body = new byte[k];
            Arrays.fill(body, (byte) '*');
            return body;
        });
    }

    /** The path variable as an int in 0..max, or -1 when it is not one. */
    static int bounded(String value, int max) {
        try {
            int n = Integer.parseInt(value);
            return n >= 0 && n <= max ? n : -1;
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    static <T> ResponseEntity<T> badRequest(String message) {
        return text(HttpStatus.BAD_REQUEST, message);
    }

    @SuppressWarnings("unchecked")
    static <T> ResponseEntity<T> text(HttpStatus status, String message) {
        return (ResponseEntity<T>) ResponseEntity.status(status).contentType(MediaType.TEXT_PLAIN).body(message + "\n");
    }
}
