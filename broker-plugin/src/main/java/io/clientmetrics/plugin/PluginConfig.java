package io.clientmetrics.plugin;

import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Range;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.common.config.ConfigException;

/**
 * The plugin's settings: broker properties under {@value #PREFIX} (docs/kafka-plugin.md).
 * Every one of them can also be changed at run time with {@code kafka-configs --alter
 * --entity-type brokers}, as {@code metric.reporters} can.
 */
record PluginConfig(
        String topic,
        List<Label> labels,
        int queueSize,
        long queueMaxBytes,
        boolean createTopic,
        int partitions,
        long closeTimeoutMs,
        /* The longest a push waits in the plugin before its produce request goes out. */
        int lingerMs,
        int nodeId,
        /* Properties for the producer (and the admin client that creates the topic). */
        Map<String, Object> producer,
        /* The plugin's own settings the producer is made from (a change needs a new one). */
        Map<String, Object> producerSettings,
        /* Where the records go, in words, for the log. */
        String target) {

    static final String PREFIX = "clientmetrics.";
    static final String PRODUCER_PREFIX = "producer.";
    static final String DEFAULT_TOPIC = "otlp_metrics";

    static final String TOPIC = "topic";
    static final String LABELS = "labels";
    static final String QUEUE_SIZE = "queue.size";
    static final String QUEUE_MAX_BYTES = "queue.max.bytes";
    static final String TOPIC_CREATE = "topic.create";
    static final String TOPIC_PARTITIONS = "topic.partitions";
    static final String BOOTSTRAP_SERVERS = "bootstrap.servers";
    static final String LISTENER = "listener";
    static final String CLOSE_TIMEOUT_MS = "close.timeout.ms";
    static final String LINGER_MS = "linger.ms";
    /** The default of {@value #LINGER_MS}: see the producer's settings in {@link #parse}. */
    static final int DEFAULT_LINGER_MS = 500;

    static final ConfigDef DEF = new ConfigDef()
            .define(TOPIC, Type.STRING, DEFAULT_TOPIC, new ConfigDef.NonEmptyString(), Importance.HIGH,
                    "The topic each push becomes a record on (the gateway's topic exporter's default).")
            .define(LABELS, Type.LIST, Label.keys(Label.DEFAULT), Importance.HIGH,
                    "Broker-added labels that become resource attributes and headers: " + Label.known())
            .define(BOOTSTRAP_SERVERS, Type.STRING, "", Importance.HIGH,
                    "The cluster the records go to; empty: this broker's own listener.")
            .define(LISTENER, Type.STRING, "", Importance.MEDIUM,
                    "Without bootstrap.servers: which of this broker's listeners to produce to "
                            + "(default: the inter-broker listener).")
            .define(QUEUE_SIZE, Type.INT, 10_000, Range.atLeast(1), Importance.MEDIUM,
                    "Pushes waiting to be produced before new ones are dropped (and counted).")
            .define(QUEUE_MAX_BYTES, Type.LONG, 32L << 20, Range.atLeast(1), Importance.MEDIUM,
                    "Payload bytes waiting to be produced before new pushes are dropped (and counted).")
            .define(TOPIC_CREATE, Type.BOOLEAN, true, Importance.LOW,
                    "Create the topic if it is missing.")
            .define(TOPIC_PARTITIONS, Type.INT, 1, Range.atLeast(1), Importance.LOW,
                    "Partitions of a topic the plugin creates.")
            .define(CLOSE_TIMEOUT_MS, Type.LONG, 5_000L, Range.atLeast(0), Importance.LOW,
                    "How long closing waits for queued records to be delivered.")
            .define(LINGER_MS, Type.INT, DEFAULT_LINGER_MS, Range.between(0, 60_000), Importance.MEDIUM,
                    "The longest a push waits in the plugin (its queue, then the producer's batch) "
                            + "before its produce request is sent: a broker that dies loses at most "
                            + "this long of pushes, plus the produce request's round trip, while the "
                            + "target keeps up.");

    /**
     * Producer settings the plugin refuses: every writer of the record format puts one client
     * instance's records on one partition, the one Kafka's producer picks for the key (murmur2;
     * the gateway's librdkafka producer uses its {@code murmur2_random}), docs/record-format.md.
     */
    static final List<String> PINNED =
            List.of(ProducerConfig.PARTITIONER_CLASS_CONFIG, ProducerConfig.PARTITIONER_IGNORE_KEYS_CONFIG);

    /** Every property name the broker may change at run time (Kafka wants them listed). */
    static final Set<String> RECONFIGURABLE;

    static {
        Set<String> names = new LinkedHashSet<>();
        for (String name : DEF.names()) {
            names.add(PREFIX + name);
        }
        for (String name : ProducerConfig.configNames()) {
            names.add(PREFIX + PRODUCER_PREFIX + name);
        }
        RECONFIGURABLE = Collections.unmodifiableSet(names);
    }

    /** Parse and check the broker's properties; a bad value is a {@link ConfigException}. */
    static PluginConfig parse(Map<String, ?> broker) {
        Map<String, Object> own = new HashMap<>();
        Map<String, Object> producer = new HashMap<>();
        for (Map.Entry<String, ?> entry : broker.entrySet()) {
            String key = entry.getKey();
            if (!key.startsWith(PREFIX) || entry.getValue() == null) {
                continue;
            }
            String name = key.substring(PREFIX.length());
            if (name.startsWith(PRODUCER_PREFIX)) {
                producer.put(name.substring(PRODUCER_PREFIX.length()), entry.getValue());
            } else if (DEF.names().contains(name)) {
                own.put(name, BrokerTarget.text(entry.getValue()));
            } else {
                throw new ConfigException(key, entry.getValue(), "unknown clientmetrics plugin setting");
            }
        }
        if (producer.containsKey(ProducerConfig.LINGER_MS_CONFIG)) {
            throw new ConfigException(PREFIX + PRODUCER_PREFIX + ProducerConfig.LINGER_MS_CONFIG,
                    producer.get(ProducerConfig.LINGER_MS_CONFIG),
                    "give " + PREFIX + LINGER_MS + " instead: it bounds the plugin's queue and the producer's "
                            + "batch together (the pushes a broker that dies loses)");
        }
        for (String pinned : PINNED) {
            if (producer.containsKey(pinned)) {
                throw new ConfigException(PREFIX + PRODUCER_PREFIX + pinned, producer.get(pinned),
                        "the plugin partitions by the client instance id as Kafka's producer does by default "
                                + "(readers take a partition as a share of client instances)");
            }
        }
        AbstractConfig config = new AbstractConfig(DEF, own, false);
        List<Label> labels;
        try {
            labels = Label.parse(config.getList(LABELS));
        } catch (IllegalArgumentException e) {
            throw new ConfigException(PREFIX + LABELS, own.get(LABELS), e.getMessage());
        }
        int nodeId = BrokerTarget.nodeId(broker);
        BrokerTarget target = BrokerTarget.of(broker, config.getString(BOOTSTRAP_SERVERS),
                config.getString(LISTENER), producer);
        Map<String, Object> props = new HashMap<>();
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "clientmetrics-plugin-" + nodeId);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        // Few, large produce requests: the broker's CPU matters more here than a record's
        // latency (half a second by default). The producer's network thread costs per request:
        // with 100 ms, 256 KiB and a forwarder that woke per push, the plugin's threads took
        // ~3x the CPU per push they take now (bench/broker_plugin.py, docs/kafka-plugin.md).
        // The producer lingers what the forwarder's gathering leaves of linger.ms, so a push
        // waits at most linger.ms in all before it is sent: the loss window of a broker that
        // is killed (docs/kafka-plugin.md, "What a broker that dies loses").
        int lingerMs = config.getInt(LINGER_MS);
        props.put(ProducerConfig.LINGER_MS_CONFIG, lingerMs - gatherMs(lingerMs));
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, 512 * 1024);
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        // The forwarder's own thread blocks in send() at most this long when the cluster is
        // away (or a new topic's metadata is slow to come); meanwhile the queue takes new
        // pushes and then drops them (counted).
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30_000);
        // Its own telemetry would come back to this plugin on a broker that is its own target.
        props.put("enable.metrics.push", false);
        props.putAll(target.properties());
        props.putAll(producer);
        return new PluginConfig(
                config.getString(TOPIC),
                labels,
                config.getInt(QUEUE_SIZE),
                config.getLong(QUEUE_MAX_BYTES),
                config.getBoolean(TOPIC_CREATE),
                config.getInt(TOPIC_PARTITIONS),
                config.getLong(CLOSE_TIMEOUT_MS),
                lingerMs,
                nodeId,
                Collections.unmodifiableMap(props),
                producerSettings(own, producer),
                target.description());
    }

    /**
     * How long the forwarder lets pushes gather once one is in (one wake-up for many pushes):
     * {@link Forwarder#GATHER_MS}, or all of {@code lingerMs} when that is shorter.
     */
    static int gatherMs(int lingerMs) {
        return (int) Math.min(Forwarder.GATHER_MS, lingerMs);
    }

    int gatherMs() {
        return gatherMs(lingerMs);
    }

    /**
     * Whether moving from this config to {@code next} needs a new producer: only when the
     * plugin's own settings for it change (a dynamic update hands the plugin the broker's
     * settings with their defaults filled in, which must not count as a change).
     */
    boolean sameProducer(PluginConfig next) {
        return producerSettings.equals(next.producerSettings) && lingerMs == next.lingerMs;
    }

    private static Map<String, Object> producerSettings(Map<String, Object> own, Map<String, Object> producer) {
        Map<String, Object> out = new HashMap<>();
        producer.forEach((k, v) -> out.put(PRODUCER_PREFIX + k, BrokerTarget.text(v)));
        for (String name : new String[] {BOOTSTRAP_SERVERS, LISTENER}) {
            if (own.containsKey(name)) {
                out.put(name, own.get(name));
            }
        }
        return Collections.unmodifiableMap(out);
    }
}
