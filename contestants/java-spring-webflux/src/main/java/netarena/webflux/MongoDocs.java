package netarena.webflux;

import com.mongodb.ConnectionString;
import com.mongodb.client.model.Filters;
import com.mongodb.reactivestreams.client.MongoClient;
import com.mongodb.reactivestreams.client.MongoClients;
import com.mongodb.reactivestreams.client.MongoCollection;
import org.bson.Document;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.stereotype.Component;
import reactor.core.publisher.Mono;

/**
 * /mongo/{name}: MongoDB's official reactive-streams driver, one MongoClient (the driver's default pool of
 * 100 connections) for the process, made only when --netarena.mongo-url is set (netarena leaves it empty
 * outside mongo measurements). The driver connects lazily, on the first query.
 */
@Component
public class MongoDocs implements DisposableBean {
    private final MongoClient client;
    private final MongoCollection<Document> docs;

    public MongoDocs(@Value("${netarena.mongo-url:}") String url) {
        if (url.isEmpty()) {
            client = null;
            docs = null;
        } else {
            ConnectionString cs = new ConnectionString(url);
            client = MongoClients.create(cs);
            docs = client.getDatabase(cs.getDatabase()).getCollection("docs");
        }
    }

    /** Why `url` cannot be used (it must name the database: mongodb://host:port/netarena), or null. */
    static String problemWith(String url) {
        try {
            String database = new ConnectionString(url).getDatabase();
            return database == null || database.isEmpty() ? "names no database (mongodb://host:port/DATABASE)" : null;
        } catch (IllegalArgumentException e) {
            return e.getMessage();
        }
    }

    boolean configured() {
        return docs != null;
    }

    /** One find by _id; empty when no document has it. The driver signals on its own threads, nothing blocks. */
    Mono<Document> find(String id) {
        return Mono.from(docs.find(Filters.eq("_id", id)).first());
    }

    @Override
    public void destroy() {
        if (client != null) {
            client.close();
        }
    }
}
