package netarena.shared;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/**
 * Spring Boot's server properties for the protocol netarena started the server for (NETARENA_PROTOCOL; unset, as
 * when started by hand, is h1), given to SpringApplication as its default properties before it starts.
 * <ul>
 *   <li>h1: none, Boot's cleartext server (server.http2.enabled is false by default).
 *   <li>h1-tls: HTTPS on the same port with the PEM certificate and key netarena names in NETARENA_TLS_CERT and
 *       NETARENA_TLS_KEY, through Boot's PEM SSL properties (server.ssl.certificate and
 *       server.ssl.certificate-private-key, read as file: resources), and HTTP/2 off (server.http2.enabled=false,
 *       Boot's default, stated because a server started for h1-tls must never choose h2 by ALPN).
 *   <li>h2: the same HTTPS with server.http2.enabled=true: Boot's HTTP/2 over TLS, h2 by ALPN.
 *   <li>h2c: server.http2.enabled=true in cleartext: Boot's h2c, which takes a client's prior-knowledge preface.
 * </ul>
 * What Boot leaves beside HTTP/2 (HTTP/1.1 on the same port, offered by ALPN) each application narrows where its
 * server lets it. Any other protocol, or a TLS one without a readable file, exits 2 with one line before Spring
 * starts, instead of serving cleartext where HTTPS was asked for. Shared by java-spring-mvc-vt and
 * java-spring-webflux: each pom adds this folder to its sources (build-helper-maven-plugin's add-source), each
 * manifest names it in build_inputs.
 */
public final class ServedProtocol {
    private ServedProtocol() {}

    public static Map<String, Object> serverProperties() {
        String protocol = name();
        return switch (protocol) {
            case "h1" -> Map.of();
            case "h1-tls" -> https(protocol, false);
            case "h2" -> https(protocol, true);
            case "h2c" -> Map.of("server.http2.enabled", "true");
            default -> {
                fail("NETARENA_PROTOCOL must be h1, h1-tls, h2 or h2c (this contestant serves no other), got '"
                        + protocol + "'");
                yield Map.of();
            }
        };
    }

    private static Map<String, Object> https(String protocol, boolean http2) {
        return Map.of(
                "server.ssl.certificate", "file:" + pemFile("NETARENA_TLS_CERT", protocol),
                "server.ssl.certificate-private-key", "file:" + pemFile("NETARENA_TLS_KEY", protocol),
                "server.http2.enabled", String.valueOf(http2));
    }

    /** The protocol netarena started the server for: NETARENA_PROTOCOL, h1 when unset. */
    public static String name() {
        return System.getenv().getOrDefault("NETARENA_PROTOCOL", "h1");
    }

    /** The readable file the environment variable names, or exit 2 saying which is missing. */
    private static String pemFile(String variable, String protocol) {
        String file = System.getenv(variable);
        if (file == null || file.isEmpty()) {
            fail("NETARENA_PROTOCOL=" + protocol + " without " + variable + ": set it to the PEM file to serve TLS"
                    + " with (netarena does for its h1-tls and h2 levels)");
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
