package netarena.webflux;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import netarena.shared.ServedProtocol;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.event.ApplicationEnvironmentPreparedEvent;
import org.springframework.core.env.ConfigurableEnvironment;
import org.springframework.core.env.Environment;
import org.springframework.core.env.MapPropertySource;

/** Spring Boot WebFlux on Reactor Netty, started as Boot documents for production: `java -jar` on the fat jar. */
@SpringBootApplication
public class Application {
    static final String USAGE = "java -Dreactor.netty.ioWorkerCount=N -jar netarena-webflux.jar --server.address=ADDR"
            + " --server.port=PORT --netarena.static-dir=DIR [--netarena.mongo-url=mongodb://HOST:PORT/DATABASE]"
            + " [--netarena.pg-url=postgres://USER@HOST:PORT/DATABASE --netarena.pg-pool=N]";

    public static void main(String[] args) {
        SpringApplication app = new SpringApplication(Application.class);
        // Checked once Spring has read the command line, before any bean exists: a wrong value exits 2 with one
        // line saying what to fix instead of a context failure's stack trace.
        app.addListeners((ApplicationEnvironmentPreparedEvent event) -> {
            checkArguments(event.getEnvironment());
            configurePostgres(event.getEnvironment());
        });
        // The server properties of the protocol started for (ServedProtocol): HTTPS for h1-tls and h2, HTTP/2 for h2
        // and h2c, nothing for h1.
        app.setDefaultProperties(ServedProtocol.serverProperties());
        app.run(args);
    }

    private static void checkArguments(Environment env) {
        String staticDir = env.getProperty("netarena.static-dir");
        if (staticDir == null || staticDir.isEmpty()) {
            fail("missing --netarena.static-dir");
        }
        if (!Files.isDirectory(Path.of(staticDir))) {
            fail("--netarena.static-dir " + staticDir + " is not a directory; pass the folder holding the static file set");
        }
        String mongoUrl = env.getProperty("netarena.mongo-url", "");
        if (!mongoUrl.isEmpty()) {
            String problem = MongoDocs.problemWith(mongoUrl);
            if (problem != null) {
                fail("--netarena.mongo-url '" + mongoUrl + "': " + problem);
            }
        }
    }

    /** Boot's R2DBC settings from --netarena.pg-url and --netarena.pg-pool (PostgresSettings). */
    private static void configurePostgres(ConfigurableEnvironment env) {
        try {
            Map<String, Object> properties = PostgresSettings.springProperties(
                    env.getProperty("netarena.pg-url", ""), env.getProperty("netarena.pg-pool", "10"));
            env.getPropertySources().addLast(new MapPropertySource("netarena-postgresql", properties));
        } catch (IllegalArgumentException e) {
            fail(e.getMessage());
        }
    }

    private static void fail(String message) {
        System.err.println("error: " + message + "\nusage: " + USAGE);
        System.exit(2);
    }
}
