package io.clientmetrics.plugin;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.network.ClientInformation;
import org.apache.kafka.common.network.ListenerName;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.requests.RequestContext;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;

/** What a broker hands the plugin, built as Kafka 4.4's broker builds it. */
final class Fakes {
    private Fakes() {}

    /** The broker's own RequestContext for a PushTelemetry request from {@code 10.1.2.3:50123}. */
    static RequestContext request(String clientId, String principal) {
        try {
            return new RequestContext(
                    new RequestHeader(ApiKeys.PUSH_TELEMETRY, (short) 0, clientId, 42),
                    "127.0.0.1:9092-10.1.2.3:50123-0",
                    InetAddress.getByName("10.1.2.3"),
                    Optional.of(50123),
                    new KafkaPrincipal(KafkaPrincipal.USER_TYPE, principal),
                    ListenerName.normalised("SASL_SSL"),
                    SecurityProtocol.SASL_SSL,
                    new ClientInformation("librdkafka", "2.16.0"),
                    false);
        } catch (UnknownHostException e) {
            throw new AssertionError(e);
        }
    }

    static ClientTelemetryPayload payload(Uuid id, boolean terminating, byte[] data) {
        return new ClientTelemetryPayload() {
            @Override
            public Uuid clientInstanceId() {
                return id;
            }

            @Override
            public boolean isTerminating() {
                return terminating;
            }

            @Override
            public String contentType() {
                return "OTLP";
            }

            @Override
            public ByteBuffer data() {
                return ByteBuffer.wrap(data).asReadOnlyBuffer();
            }
        };
    }

    static ClientTelemetryContext context(int pushIntervalMs, RequestContext request) {
        return new ClientTelemetryContext() {
            @Override
            public int pushIntervalMs() {
                return pushIntervalMs;
            }

            @Override
            public RequestContext authorizableRequestContext() {
                return request;
            }
        };
    }

    /** The properties a broker passes a metric reporter's configure(), plus the plugin's. */
    static Map<String, Object> broker(String... pluginProperties) {
        Map<String, Object> props = new HashMap<>();
        props.put("node.id", "7");
        props.put("listeners", "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093");
        props.put("advertised.listeners", "PLAINTEXT://127.0.0.1:19092");
        props.put("listener.security.protocol.map", "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT");
        props.put("inter.broker.listener.name", "PLAINTEXT");
        for (int i = 0; i < pluginProperties.length; i += 2) {
            props.put(pluginProperties[i], pluginProperties[i + 1]);
        }
        return props;
    }

    /** Clients whose producers are MockProducers, kept for the test to look at. */
    static class MockClients implements Clients {
        final List<MockProducer<byte[], byte[]>> producers = new CopyOnWriteArrayList<>();
        final List<Map<String, Object>> configs = new CopyOnWriteArrayList<>();
        final List<String> ensured = new CopyOnWriteArrayList<>();
        final boolean autoComplete;
        /** The partition count of a topic that exists already; 0: the topic is missing. */
        volatile int existingPartitions;

        MockClients(boolean autoComplete) {
            this.autoComplete = autoComplete;
        }

        @Override
        public Producer<byte[], byte[]> producer(Map<String, Object> properties) {
            MockProducer<byte[], byte[]> producer =
                    new MockProducer<>(autoComplete, null, new ByteArraySerializer(), new ByteArraySerializer());
            configs.add(properties);
            producers.add(producer);
            return producer;
        }

        @Override
        public int ensureTopic(Map<String, Object> properties, String topic, int partitions) {
            ensured.add(topic + "/" + partitions);
            return existingPartitions > 0 ? existingPartitions : partitions;
        }

        MockProducer<byte[], byte[]> last() {
            return producers.get(producers.size() - 1);
        }

        List<org.apache.kafka.clients.producer.ProducerRecord<byte[], byte[]>> history() {
            List<org.apache.kafka.clients.producer.ProducerRecord<byte[], byte[]>> all = new ArrayList<>();
            producers.forEach(p -> all.addAll(p.history()));
            return all;
        }
    }

    static void await(BooleanSupplier condition, String what) {
        long deadline = System.currentTimeMillis() + 10_000;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }
    }
}
