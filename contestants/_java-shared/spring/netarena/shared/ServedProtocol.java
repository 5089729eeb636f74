package netarena.shared;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/**
 * Spring Boot's server properties for the protocol netarena started the server for (NETARENA_PROTOCOL; unset, as
 * when started by hand, is h1), given to SpringApplication as its default properties before it starts.
 * <ul>
 *   <li>h1: none, Boot's cleartext server.
 *   <li>h1-tls: HTTPS on the same port with the PEM certificate and key netarena names in NETARENA_TLS_CERT and
 *       NETARENA_TLS_KEY, through Boot's PEM SSL properties (server.ssl.certificate and
 *       server.ssl.certificate-private-key, read as file: resources), and HTTP/2 off (server.http2.enabled=false,
 *       Boot's default, stated because a server started for h1-tls must never choose h2 by ALPN).
 * </ul>
 * Any other protocol, or h1-tls without a readable file, exits 2 with one line before Spring starts, instead of
 * serving cleartext where HTTPS was asked for. Shared by java-spring-mvc-vt and java-spring-webflux: each pom adds
 * this folder to its sources (build-helper-maven-plugin's add-source), each manifest names it in build_inputs.
 */
public final class ServedProtocol {
    private ServedProtocol() {}

    public static Map<String, Object> serverProperties() {
        String protocol = System.getenv().getOrDefault("NETARENA_PROTOCOL", "h1");
        if (protocol.equals("h1")) {
            return Map.of();
        }
        if (!protocol.equals("h1-tls")) {
            fail("NETARENA_PROTOCOL must be h1 or h1-tls (this contestant serves no other), got '" + protocol + "'");
        }
        return Map.of(
                "server.ssl.certificate", "file:" + pemFile("NETARENA_TLS_CERT"),
                "server.ssl.certificate-private-key", "file:" + pemFile("NETARENA_TLS_KEY"),
                "server.http2.enabled", "false");
    }

    /** The readable file the environment variable names, or exit 2 saying which is missing. */
    private static String pemFile(String variable) {
        String file = System.getenv(variable);
        if (file == null || file.isEmpty()) {
            fail("NETARENA_PROTOCOL=h1-tls without " + variable + ": set it to the PEM file to serve TLS with"
                    + " (netarena does for its h1-tls levels)");
        }
        if (!Files.isReadable(Path.of(file))) {
            fail(variable + "=" + file + " cannot be read; it must name a PEM file");
        }
        return file;
    }

    private static void fail(String message) {
        System.err.println("error: " + message);
        System.exit(2);
    }
}
