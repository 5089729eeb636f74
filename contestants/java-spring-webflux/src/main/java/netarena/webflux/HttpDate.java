package netarena.webflux;

import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Locale;

/**
 * The Date header's value (RFC 9110's IMF-fixdate), formatted once per second and shared by every request in it:
 * Reactor Netty adds no Date header, and one value serves every answer of that second.
 */
final class HttpDate {
    private record Formatted(long second, String value) {}

    // Not DateTimeFormatter.RFC_1123_DATE_TIME: it writes days 1-9 with one digit, IMF-fixdate wants two.
    private static final DateTimeFormatter IMF_FIXDATE =
            DateTimeFormatter.ofPattern("EEE, dd MMM yyyy HH:mm:ss 'GMT'", Locale.US).withZone(ZoneOffset.UTC);

    private static volatile Formatted current = new Formatted(-1, "");

    private HttpDate() {}

    static String now() {
        long second = System.currentTimeMillis() / 1000;
        Formatted formatted = current;
        if (formatted.second() != second) {
            // Two threads may both format the new second: the same string, and one of them is kept.
            formatted = new Formatted(second, IMF_FIXDATE.format(Instant.ofEpochSecond(second)));
            current = formatted;
        }
        return formatted.value();
    }
}
