package io.clientmetrics.plugin;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * The labels a broker adds to a push, with KIP-714's names: the same names, order and
 * types as the gateway's ({@code clientmetrics.telemetry.model.PUSH_LABELS}).
 */
enum Label {
    CLIENT_INSTANCE_ID(false),
    CLIENT_ID(false),
    CLIENT_SOFTWARE_NAME(false),
    CLIENT_SOFTWARE_VERSION(false),
    CLIENT_SOURCE_ADDRESS(false),
    CLIENT_SOURCE_PORT(true),
    PRINCIPAL(false),
    NODE_ID(true),
    LISTENER(false),
    SECURITY_PROTOCOL(false);

    /**
     * The record format's default, the gateway's topic exporter's too: all the inventory shows
     * of a client (Strimzi's two, then its software, source address and port, principal).
     */
    static final List<Label> DEFAULT = List.of(CLIENT_ID, CLIENT_INSTANCE_ID, CLIENT_SOFTWARE_NAME,
            CLIENT_SOFTWARE_VERSION, CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT, PRINCIPAL);

    /** An integer label becomes an OTLP {@code int_value}; the others a {@code string_value}. */
    final boolean integer;
    /** The name in a record's headers and resource attributes. */
    final String key;
    /** The name as UTF-8 bytes (how a resource attribute's key is compared). */
    final byte[] utf8;

    Label(boolean integer) {
        this.integer = integer;
        this.key = name().toLowerCase(Locale.ROOT);
        this.utf8 = key.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    /** The names of {@code labels}, comma-separated, as a log line shows them. */
    static String keys(List<Label> labels) {
        return labels.stream().map(l -> l.key).collect(Collectors.joining(","));
    }

    static String known() {
        return Arrays.stream(values()).map(l -> l.key).collect(Collectors.joining(", "));
    }

    /** The labels named in {@code names}, in that order; unknown or repeated names are errors. */
    static List<Label> parse(List<String> names) {
        List<Label> out = new ArrayList<>();
        for (String raw : names) {
            String name = raw.trim();
            if (name.isEmpty()) {
                continue;
            }
            Label found = null;
            for (Label label : values()) {
                if (label.key.equals(name)) {
                    found = label;
                }
            }
            if (found == null) {
                throw new IllegalArgumentException("unknown label " + name + " (known: " + known() + ")");
            }
            if (out.contains(found)) {
                throw new IllegalArgumentException("label " + name + " is named twice");
            }
            out.add(found);
        }
        return List.copyOf(out);
    }
}
