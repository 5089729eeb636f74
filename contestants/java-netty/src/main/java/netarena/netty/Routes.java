package netarena.netty;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.ConcurrentHashMap;

/** State shared by every connection: immutable bodies, the JSON mapper, the static root, the mongo client. */
final class Routes {
    static final int MAX_BYTES = 16 * 1024 * 1024;
    static final int MAX_SLEEP_MS = 60_000;

    final Path staticDir;
    /** Null unless --mongo-url was given (non-empty): then /mongo/{name} is served. */
    final Mongo mongo;
    final ObjectMapper json = new ObjectMapper();
    final ByteBuf hello = constant("Hello, World!".getBytes(StandardCharsets.US_ASCII));
    private final ConcurrentHashMap<Integer, ByteBuf> bytesBodies = new ConcurrentHashMap<>();

    record Message(String message) {}

    Routes(Path staticDir, Mongo mongo) {
        this.staticDir = staticDir;
        this.mongo = mongo;
        for (int n : new int[] {40, 10_000, 524_288}) {
            bytes(n);
        }
    }

    /** The body of /bytes/{n}, built on first use and shared afterwards (callers send a duplicate). */
    ByteBuf bytes(int n) {
        return bytesBodies.computeIfAbsent(n, k -> {
            byte[] body = new byte[k];
            java.util.Arrays.fill(body, (byte) '*');
            return constant(body);
        });
    }

    // Unreleasable, so handing out duplicate()s never frees the shared bytes.
    private static ByteBuf constant(byte[] body) {
        return Unpooled.unreleasableBuffer(Unpooled.directBuffer(body.length).writeBytes(body));
    }
}
