package netarena.vertx;

import io.vertx.core.Deployable;
import io.vertx.core.DeploymentOptions;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * How both servers run: one Vert.x instance with {workers} event loops and {workers} instances of the
 * verticle, Vert.x's documented way to use several cores. Every instance listens on the same port; Vert.x
 * binds it once and hands the accepted connections to the instances' event loops in turn.
 */
final class Deploy {
    private Deploy() {}

    static Vertx start(int workers, String host, int port, Supplier<? extends Deployable> verticle) {
        Vertx vertx = create(workers);
        start(vertx, workers, host, port, verticle);
        return vertx;
    }

    /** The Vert.x instance with {workers} event loops, closed when netarena stops us with SIGTERM. */
    static Vertx create(int workers) {
        Vertx vertx = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(workers));
        // Close the servers (and the database clients) before the JVM exits.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> close(vertx)));
        return vertx;
    }

    /** Deploys {workers} instances of the verticle on a Vert.x from {@link #create}; exits 1 if they fail. */
    static void start(Vertx vertx, int workers, String host, int port, Supplier<? extends Deployable> verticle) {
        try {
            vertx.deployVerticle(verticle, new DeploymentOptions().setInstances(workers))
                    .toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            // A bind failure is most likely a port in use; anything else (say, an h1-tls start whose PEM files
            // hold no certificate or key) is named by its cause alone.
            System.err.println("error: cannot serve on " + host + " port " + port + ": " + cause
                    + (cause instanceof java.net.BindException ? " (is the port already in use?)" : ""));
            close(vertx);
            // halt, not exit: exit would run the shutdown hook, which closes Vert.x a second time.
            Runtime.getRuntime().halt(1);
        }
    }

    // Bounded: the orchestrator waits stop_timeout_s for the exit before it kills the process group.
    private static void close(Vertx vertx) {
        try {
            vertx.close().toCompletionStage().toCompletableFuture().get(3, TimeUnit.SECONDS);
        } catch (Exception ignored) {
            // exiting anyway
        }
    }
}
