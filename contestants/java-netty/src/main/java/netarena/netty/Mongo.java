package netarena.netty;

import com.mongodb.ConnectionString;
import com.mongodb.client.model.Filters;
import com.mongodb.reactivestreams.client.MongoClient;
import com.mongodb.reactivestreams.client.MongoClients;
import com.mongodb.reactivestreams.client.MongoCollection;
import java.util.concurrent.Executor;
import org.bson.Document;
import org.bson.json.JsonMode;
import org.bson.json.JsonWriterSettings;
import org.reactivestreams.Subscriber;
import org.reactivestreams.Subscription;

/**
 * /mongo/{name}: MongoDB's official reactive-streams driver, one MongoClient (its connection pool at the
 * driver's default of 100) for the process. The driver connects lazily, on the first query.
 */
final class Mongo implements AutoCloseable {
    // The driver's own JSON writer, relaxed extended JSON: plain numbers, strings, booleans, field order kept.
    private static final JsonWriterSettings JSON =
            JsonWriterSettings.builder().outputMode(JsonMode.RELAXED).build();

    /** How a find ends; every call is made on the executor given to {@link #find}. */
    interface Reply {
        void found(String json);

        void missing();

        void failed(Throwable error);
    }

    private final MongoClient client;
    private final MongoCollection<Document> docs;

    private Mongo(MongoClient client, MongoCollection<Document> docs) {
        this.client = client;
        this.docs = docs;
    }

    /** The URL names the database (mongodb://host:port/netarena), as for every contestant; collection "docs". */
    static Mongo open(String url) {
        ConnectionString cs = new ConnectionString(url);
        String database = cs.getDatabase();
        if (database == null || database.isEmpty()) {
            throw new IllegalArgumentException("the mongo URL names no database (mongodb://host:port/DATABASE)");
        }
        MongoClient client = MongoClients.create(cs);
        return new Mongo(client, client.getDatabase(database).getCollection("docs"));
    }

    /**
     * One find by _id. Nothing waits: the driver signals the subscriber from its own threads, and the outcome
     * (JSON rendering included) is handed to {@code loop}, the connection's event loop.
     */
    void find(String id, Executor loop, Reply reply) {
        docs.find(Filters.eq("_id", id)).first().subscribe(new Subscriber<Document>() {
            // Reactive Streams signals are serial with happens-before, so a plain field is enough.
            private Document doc;

            @Override
            public void onSubscribe(Subscription s) {
                s.request(1);
            }

            @Override
            public void onNext(Document d) {
                doc = d;
            }

            @Override
            public void onError(Throwable error) {
                loop.execute(() -> reply.failed(error));
            }

            @Override
            public void onComplete() {
                Document found = doc;
                if (found == null) {
                    loop.execute(reply::missing);
                } else {
                    loop.execute(() -> {
                        String json;
                        try {
                            json = found.toJson(JSON);
                        } catch (RuntimeException e) {
                            reply.failed(e);
                            return;
                        }
                        reply.found(json);
                    });
                }
            }
        });
    }

    @Override
    public void close() {
        client.close();
    }
}
