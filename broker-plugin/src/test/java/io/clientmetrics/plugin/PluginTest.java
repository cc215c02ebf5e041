package io.clientmetrics.plugin;

import static io.clientmetrics.plugin.Fakes.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The plugin as a broker drives it: configure, exportMetrics on request threads, reconfigure, close. */
class PluginTest {
    static final Uuid ID = Uuid.fromString("X4t8HipNTm-bChwtPk9aaw"); // 5f8b7c1e-2a4d-4e6f-9b0a-1c2d3e4f5a6b
    static final MBeanServer JMX = ManagementFactory.getPlatformMBeanServer();

    private ClientMetricsPlugin plugin;

    static byte[] otlp() throws Exception {
        String payload = RecordFormatTest.vectors().get("cases").get(0).get("push").get("payload").asText();
        return Base64.getDecoder().decode(payload);
    }

    /** The record's headers but the last, which must be its {@code push_id} (a random v4 UUID). */
    static Map<String, String> headers(ProducerRecord<byte[], byte[]> record) {
        Map<String, String> out = new LinkedHashMap<>();
        for (Header h : record.headers()) {
            out.put(h.key(), new String(h.value(), StandardCharsets.UTF_8));
        }
        RecordFormatTest.assertPushId(List.copyOf(out.keySet()), out.remove("push_id"));
        return out;
    }

    static double jmx(String attribute) throws Exception {
        Object value = JMX.getAttribute(new ObjectName("kafka.server:type=client-metrics-plugin"), attribute);
        return ((Number) value).doubleValue();
    }

    @AfterEach
    void close() {
        if (plugin != null) {
            plugin.close();
        }
    }

    @Test
    void aPushBecomesOneRecordWithTheBrokersLabelsAndIsCountedInJmx() throws Exception {
        Fakes.MockClients clients = new Fakes.MockClients(true);
        plugin = new ClientMetricsPlugin(clients);
        plugin.configure(Fakes.broker("clientmetrics.labels",
                "client_id,client_instance_id,client_software_name,client_software_version,"
                        + "client_source_address,client_source_port,principal,node_id,listener,security_protocol"));
        ClientTelemetryExporter exporter = plugin.clientTelemetryExporter();
        exporter.exportMetrics(Fakes.context(5000, Fakes.request("orders", "alice")),
                Fakes.payload(ID, true, otlp()));

        await(() -> clients.history().size() == 1, "one record");
        ProducerRecord<byte[], byte[]> record = clients.history().get(0);
        assertEquals("otlp_metrics", record.topic());
        assertNull(record.partition()); // the producer picks it from the key (RecordFormatTest)
        assertFalse(clients.configs.get(0).containsKey("partitioner.class"));
        assertFalse(clients.configs.get(0).containsKey("partitioner.ignore.keys"));
        assertEquals("5f8b7c1e-2a4d-4e6f-9b0a-1c2d3e4f5a6b", new String(record.key(), StandardCharsets.UTF_8));
        Map<String, String> want = new LinkedHashMap<>();
        want.put("client_id", "orders");
        want.put("client_instance_id", "5f8b7c1e-2a4d-4e6f-9b0a-1c2d3e4f5a6b");
        want.put("client_software_name", "librdkafka");
        want.put("client_software_version", "2.16.0");
        want.put("client_source_address", "10.1.2.3");
        want.put("client_source_port", "50123");
        want.put("principal", "User:alice");
        want.put("node_id", "7");
        want.put("listener", "SASL_SSL");
        want.put("security_protocol", "SASL_SSL");
        want.put("terminating", "true");
        want.put("push_interval_ms", "5000");
        assertEquals(want, headers(record));
        assertEquals(List.of("otlp_metrics/1"), clients.ensured);
        // The producer goes to the broker's own inter-broker listener by default.
        assertEquals("127.0.0.1:19092", clients.configs.get(0).get("bootstrap.servers"));
        assertEquals("PLAINTEXT", clients.configs.get(0).get("security.protocol"));
        await(() -> {
            try {
                return jmx("sent-total") == 1.0;
            } catch (Exception e) {
                return false;
            }
        }, "sent-total 1 in JMX");
        assertEquals(1.0, jmx("received-total"));
        assertEquals(0.0, jmx("dropped-total"));
        assertEquals(0.0, jmx("queue-depth"));
    }

    /** A producer whose send() blocks, as KafkaProducer's does while it waits for a cluster. */
    static final class StuckClients extends Fakes.MockClients {
        final CountDownLatch release = new CountDownLatch(1);

        StuckClients() {
            super(true);
        }

        @Override
        public Producer<byte[], byte[]> producer(Map<String, Object> properties) {
            MockProducer<byte[], byte[]> producer =
                    new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer()) {
                        @Override
                        public synchronized Future<RecordMetadata> send(
                                ProducerRecord<byte[], byte[]> record, Callback callback) {
                            try {
                                release.await();
                            } catch (InterruptedException e) {
                                Thread.currentThread().interrupt();
                            }
                            return super.send(record, callback);
                        }
                    };
            producers.add(producer);
            return producer;
        }
    }

    @Test
    void aStuckClusterNeitherBlocksNorFailsAPushButDropsAndCountsWhatDoesNotFit() throws Exception {
        StuckClients clients = new StuckClients();
        plugin = new ClientMetricsPlugin(clients);
        plugin.configure(Fakes.broker("clientmetrics.queue.size", "5"));
        ClientTelemetryExporter exporter = plugin.clientTelemetryExporter();
        byte[] data = otlp();
        exporter.exportMetrics(Fakes.context(5000, Fakes.request("c", "u")), Fakes.payload(ID, false, data));
        Forwarder forwarder = plugin.runtime.forwarder();
        await(() -> forwarder.depth() == 0, "the first push in the stuck send()");
        long began = System.nanoTime();
        for (int i = 0; i < 99; i++) {
            exporter.exportMetrics(Fakes.context(5000, Fakes.request("c", "u")), Fakes.payload(ID, false, data));
        }
        long tookMs = (System.nanoTime() - began) / 1_000_000;
        assertTrue(tookMs < 2_000, "99 pushes took " + tookMs + " ms beside a stuck cluster");
        assertEquals(100, forwarder.received.sum());
        assertEquals(5, forwarder.depth());
        assertEquals(94, forwarder.dropped.sum());
        assertEquals(5.0 * data.length, jmx("queue-bytes"));
        clients.release.countDown(); // the cluster is back: what was queued is delivered
        await(() -> forwarder.sent.sum() == 6, "the queued pushes delivered");
        assertEquals(0, forwarder.failed.sum());
    }

    @Test
    void nothingThePluginMeetsReachesTheBrokerAsAnException() throws Exception {
        Fakes.MockClients clients = new Fakes.MockClients(false);
        plugin = new ClientMetricsPlugin(clients);
        plugin.configure(Fakes.broker());
        ClientTelemetryExporter exporter = plugin.clientTelemetryExporter();
        Forwarder forwarder = plugin.runtime.forwarder();
        ClientTelemetryPayload broken = new ClientTelemetryPayload() {
            @Override
            public Uuid clientInstanceId() {
                return ID;
            }

            @Override
            public boolean isTerminating() {
                return false;
            }

            @Override
            public String contentType() {
                return "OTLP";
            }

            @Override
            public ByteBuffer data() {
                throw new IllegalStateException("buffer released");
            }
        };
        exporter.exportMetrics(Fakes.context(5000, Fakes.request("c", "u")), broken);
        assertEquals(1, forwarder.failed.sum());
        // Not OTLP: counted as invalid on the forwarder's thread.
        exporter.exportMetrics(Fakes.context(5000, Fakes.request("c", "u")),
                Fakes.payload(ID, false, new byte[] {0x0a, 0x7f}));
        await(() -> forwarder.invalid.sum() == 1, "the invalid payload counted");
        // A delivery that fails, and a send that throws.
        exporter.exportMetrics(Fakes.context(5000, Fakes.request("c", "u")), Fakes.payload(ID, false, otlp()));
        await(() -> clients.producers.size() == 1 && clients.last().history().size() == 1, "a record sent");
        assertTrue(clients.last().errorNext(new TimeoutException("delivery timed out")));
        assertEquals(2, forwarder.failed.sum());
        clients.last().sendException = new KafkaException("buffer exhausted");
        exporter.exportMetrics(Fakes.context(5000, Fakes.request("c", "u")), Fakes.payload(ID, false, otlp()));
        await(() -> forwarder.failed.sum() == 3, "the throwing send counted");
        assertEquals(0, forwarder.sent.sum());
    }

    @Test
    void settingsChangeAtRunTimeAndBadOnesAreRefused() throws Exception {
        Fakes.MockClients clients = new Fakes.MockClients(true);
        plugin = new ClientMetricsPlugin(clients);
        plugin.configure(Fakes.broker());
        assertTrue(plugin.reconfigurableConfigs().contains("clientmetrics.labels"));
        assertTrue(plugin.reconfigurableConfigs().contains("clientmetrics.producer.sasl.jaas.config"));
        ClientTelemetryExporter exporter = plugin.clientTelemetryExporter();
        exporter.exportMetrics(Fakes.context(5000, Fakes.request("c", "u")), Fakes.payload(ID, false, otlp()));
        await(() -> clients.history().size() == 1, "a record");
        // The default labels (RecordFormatTest checks them against the vectors' default_labels).
        assertEquals(List.of("client_id", "client_instance_id", "client_software_name", "client_software_version",
                        "client_source_address", "client_source_port", "principal", "terminating", "push_interval_ms"),
                List.copyOf(headers(clients.history().get(0)).keySet()));

        Map<String, Object> bad = Fakes.broker("clientmetrics.labels", "client_id,hostname");
        ConfigException e = assertThrows(ConfigException.class, () -> plugin.validateReconfiguration(bad));
        assertTrue(e.getMessage().contains("unknown label hostname"), e.getMessage());
        assertThrows(ConfigException.class,
                () -> plugin.validateReconfiguration(Fakes.broker("clientmetrics.queue.size", "0")));
        assertThrows(ConfigException.class,
                () -> plugin.validateReconfiguration(Fakes.broker("clientmetrics.topicc", "x")));
        for (String pinned : List.of("partitioner.class", "partitioner.ignore.keys")) {
            ConfigException p = assertThrows(ConfigException.class, () -> plugin.validateReconfiguration(
                    Fakes.broker("clientmetrics.producer." + pinned, "true")));
            assertTrue(p.getMessage().contains("partitions by the client instance id"), p.getMessage());
        }

        plugin.reconfigure(Fakes.broker("clientmetrics.labels", "node_id", "clientmetrics.topic", "other"));
        exporter.exportMetrics(Fakes.context(5000, Fakes.request("c", "u")), Fakes.payload(ID, false, otlp()));
        await(() -> clients.history().size() == 2, "a second record");
        ProducerRecord<byte[], byte[]> second = clients.history().get(1);
        assertEquals("other", second.topic());
        assertEquals(List.of("node_id", "terminating", "push_interval_ms"), List.copyOf(headers(second).keySet()));
        assertEquals(1, clients.producers.size()); // same producer settings: same producer

        plugin.reconfigure(Fakes.broker("clientmetrics.producer.compression.type", "zstd"));
        exporter.exportMetrics(Fakes.context(5000, Fakes.request("c", "u")), Fakes.payload(ID, false, otlp()));
        await(() -> clients.history().size() == 3, "a third record");
        assertEquals(2, clients.producers.size());
        assertTrue(clients.producers.get(0).closed());
        assertEquals("zstd", clients.configs.get(1).get("compression.type"));
    }

    @Test
    void anExistingTopicIsLeftWithItsOwnPartitionCount() throws Exception {
        Fakes.MockClients clients = new Fakes.MockClients(true);
        clients.existingPartitions = 1;
        plugin = new ClientMetricsPlugin(clients);
        plugin.configure(Fakes.broker("clientmetrics.topic.partitions", "12"));
        plugin.clientTelemetryExporter().exportMetrics(Fakes.context(5000, Fakes.request("c", "u")),
                Fakes.payload(ID, false, otlp()));
        await(() -> clients.history().size() == 1, "a record");
        assertEquals(List.of("otlp_metrics/12"), clients.ensured);
        assertEquals(1, plugin.runtime.forwarder().topicPartitions); // seen (and warned about), not changed
    }

    @Test
    void afterCloseTheExporterTheBrokerStillHoldsIgnoresPushes() throws Exception {
        Fakes.MockClients clients = new Fakes.MockClients(true);
        plugin = new ClientMetricsPlugin(clients);
        plugin.configure(Fakes.broker());
        ClientTelemetryExporter exporter = plugin.clientTelemetryExporter();
        plugin.close();
        plugin = null;
        exporter.exportMetrics(Fakes.context(5000, Fakes.request("c", "u")), Fakes.payload(ID, false, otlp()));
        assertTrue(clients.history().isEmpty());
        assertFalse(JMX.isRegistered(new ObjectName("kafka.server:type=client-metrics-plugin")));
    }

    @Test
    @SuppressWarnings("deprecation")
    void theLegacyReceiverWritesTheSameRecordWithoutThePushInterval() throws Exception {
        Fakes.MockClients clients = new Fakes.MockClients(true);
        ClientMetricsLegacyPlugin legacy = new ClientMetricsLegacyPlugin(clients);
        legacy.configure(Fakes.broker("clientmetrics.labels", "client_id,client_software_name"));
        try {
            legacy.clientReceiver().exportMetrics(Fakes.request("orders", "alice"), Fakes.payload(ID, false, otlp()));
            await(() -> clients.history().size() == 1, "one record");
        } finally {
            legacy.close();
        }
        Map<String, String> want = new LinkedHashMap<>();
        want.put("client_id", "orders");
        want.put("client_software_name", "librdkafka");
        want.put("terminating", "false");
        assertEquals(want, headers(clients.history().get(0)));
        assertNull(headers(clients.history().get(0)).get("push_interval_ms"));
    }
}
