package netarena.vertx;

import java.util.HashMap;
import java.util.Map;

/** Minimal "--name value" parsing; a wrong command line exits 2 with one message saying what to fix. */
final class Args {
    private final Map<String, String> values = new HashMap<>();
    private final String usage;

    Args(String[] argv, String usage) {
        this.usage = usage;
        for (int i = 0; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                fail("unexpected argument '" + argv[i] + "'");
            }
            values.put(argv[i].substring(2), argv[i + 1]);
        }
    }

    String string(String name, String fallback) {
        String v = values.get(name);
        if (v == null && fallback == null) {
            fail("missing --" + name);
        }
        return v == null ? fallback : v;
    }

    int positiveInt(String name, Integer fallback) {
        String v = values.get(name);
        if (v == null) {
            if (fallback == null) {
                fail("missing --" + name);
            }
            return fallback;
        }
        try {
            int n = Integer.parseInt(v);
            if (n > 0) {
                return n;
            }
        } catch (NumberFormatException ignored) {
            // reported below
        }
        fail("--" + name + " must be a positive integer, got '" + v + "'");
        return 0;
    }

    void fail(String message) {
        System.err.println("error: " + message + "\nusage: " + usage);
        System.exit(2);
    }
}
