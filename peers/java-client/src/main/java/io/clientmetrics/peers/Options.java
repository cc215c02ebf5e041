package io.clientmetrics.peers;

import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

/** The peer's command line, parsed and checked; a bad one is an {@link IllegalArgumentException}. */
public final class Options {
    /** Which clients to run. */
    public enum Role {
        PRODUCER, CONSUMER, BOTH, SHARE;

        boolean producer() {
            return this == PRODUCER || this == BOTH;
        }

        boolean consumer() {
            return this == CONSUMER || this == BOTH;
        }

        /** A share consumer (KIP-932) of --group, alone. */
        boolean share() {
            return this == SHARE;
        }
    }

    static final String USAGE = String.join("\n",
        "usage: java-client-peer --bootstrap HOST:PORT [options]",
        "  --bootstrap HOST:PORT      bootstrap.servers (required); repeated with --role producer:",
        "                             one producer per cluster, each with the same client id",
        "  --command-config FILE      client properties (security...), as Kafka's tools take them",
        "  --property K=V             one more client property (repeatable)",
        "  --client-id ID             client.id base: ID-producer, ID-consumer (default java-peer)",
        "  --role producer|consumer|both|share   which clients run (default both); share: a\n"
        + "                             KafkaShareConsumer of --group (KIP-932), reading from the\n"
        + "                             earliest offset (the group's share.auto.offset.reset)",
        "  --topic NAME               topic produced to and consumed from (default peer-topic)",
        "  --group NAME               the consumer's (or share consumer's) group.id (default peer-group)",
        "  --messages N               records to produce (default 100; 0: none)",
        "  --rate N                   records per second at most (default 50)",
        "  --duration SECONDS         stop after this long (default 0: on 'stop' or EOF on stdin, or SIGTERM)",
        "  --compression TYPE         the producer's compression.type for records (default none)",
        "  --instance-timeout SECONDS how long to wait for each client's instance id (default 30)",
        "  --process-ms N             the consumer's time spent on each poll's result, as slow\n"
        + "                             per-record processing in the application would (default 0)",
        "  --close                    close the clients at the end (a terminating push; the producer\n"
        + "                             sends one last record first); else halt");

    /** The options that take a value. */
    private static final Set<String> VALUED = Set.of("--bootstrap", "--command-config", "--property",
        "--client-id", "--role", "--topic", "--group", "--messages", "--rate", "--duration",
        "--compression", "--instance-timeout", "--process-ms");

    public final String bootstrap;
    /** Every --bootstrap given, the first being {@link #bootstrap}. */
    public final List<String> bootstraps;
    public final Path commandConfig;
    public final Map<String, String> properties;
    public final String clientId;
    public final Role role;
    public final String topic;
    public final String group;
    public final long messages;
    public final double rate;
    public final double durationSeconds;
    public final String compression;
    public final double instanceTimeoutSeconds;
    /** Milliseconds the consumer spends outside poll() after each poll (slow processing). */
    public final long processMs;
    public final boolean close;

    private Options(Map<String, String> single, Map<String, String> properties, boolean close,
                    List<String> bootstraps) {
        this.bootstrap = required(single, "--bootstrap");
        this.bootstraps = List.copyOf(bootstraps);
        String config = single.get("--command-config");
        this.commandConfig = config == null ? null : Path.of(config);
        this.properties = properties;
        this.clientId = single.getOrDefault("--client-id", "java-peer");
        this.role = role(single.getOrDefault("--role", "both"));
        this.topic = single.getOrDefault("--topic", "peer-topic");
        this.group = single.getOrDefault("--group", "peer-group");
        this.messages = (long) number(single, "--messages", 100, 0);
        this.rate = number(single, "--rate", 50, Double.MIN_VALUE);
        this.durationSeconds = number(single, "--duration", 0, 0);
        this.compression = compression(single.getOrDefault("--compression", "none"));
        this.instanceTimeoutSeconds = number(single, "--instance-timeout", 30, 0);
        this.processMs = (long) number(single, "--process-ms", 0, 0);
        this.close = close;
        if (bootstraps.size() > 1 && role != Role.PRODUCER) {
            throw new IllegalArgumentException("several --bootstrap need --role producer");
        }
    }

    /** Parse {@code args}; unknown options, missing values and bad numbers are refused. */
    public static Options parse(String[] args) {
        Map<String, String> single = new LinkedHashMap<>();
        Map<String, String> properties = new LinkedHashMap<>();
        boolean close = false;
        List<String> bootstraps = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (arg.equals("--close")) {
                close = true;
                continue;
            }
            if (!VALUED.contains(arg)) {
                throw new IllegalArgumentException("unknown option " + arg);
            }
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException(arg + " needs a value");
            }
            String value = args[++i];
            if (arg.equals("--property")) {
                int eq = value.indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("--property takes KEY=VALUE, got " + value);
                }
                properties.put(value.substring(0, eq), value.substring(eq + 1));
            } else {
                if (arg.equals("--bootstrap")) {
                    bootstraps.add(value);
                }
                single.putIfAbsent(arg, value);
            }
        }
        return new Options(single, properties, close, bootstraps);
    }

    /** The settings every client gets: bootstrap, the command config's, then --property's. */
    public Properties common() throws IOException {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        if (commandConfig != null) {
            Properties file = new Properties();
            try (Reader reader = Files.newBufferedReader(commandConfig)) {
                file.load(reader);
            }
            props.putAll(file);
        }
        props.putAll(properties);
        return props;
    }

    /** The command line of the options that were set (for the "started" line). */
    public List<String> describe() {
        List<String> out = new ArrayList<>();
        out.add("role=" + role.name().toLowerCase(Locale.ROOT));
        out.add("topic=" + topic);
        out.add("messages=" + messages);
        out.add("close=" + close);
        return out;
    }

    private static String required(Map<String, String> single, String name) {
        String value = single.get(name);
        if (value == null || value.isBlank()) {
            throw new IllegalArgumentException(name + " is required");
        }
        return value;
    }

    private static double number(Map<String, String> single, String name, double fallback, double min) {
        String text = single.get(name);
        if (text == null) {
            return fallback;
        }
        double value;
        try {
            value = Double.parseDouble(text);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " takes a number, got " + text);
        }
        if (!(value >= min) || Double.isInfinite(value)) {
            throw new IllegalArgumentException(name + " must be at least " + min + ", got " + text);
        }
        return value;
    }

    private static Role role(String text) {
        try {
            return Role.valueOf(text.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("--role takes producer, consumer, both or share, got " + text);
        }
    }

    private static String compression(String text) {
        String lower = text.toLowerCase(Locale.ROOT);
        if (!List.of("none", "gzip", "snappy", "lz4", "zstd").contains(lower)) {
            throw new IllegalArgumentException("--compression takes none, gzip, snappy, lz4 or zstd, got " + text);
        }
        return lower;
    }
}
