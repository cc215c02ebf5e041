package io.clientmetrics.plugin;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** How the forwarder reaches the target cluster (tests substitute a MockProducer). */
interface Clients {
    Producer<byte[], byte[]> producer(Map<String, Object> properties);

    /**
     * Create {@code topic} if it is missing; throws if the cluster could not be asked. Returns
     * the topic's partition count (-1 if another writer created it meanwhile): an existing
     * topic is left as it is.
     */
    int ensureTopic(Map<String, Object> properties, String topic, int partitions) throws Exception;

    /** The real Kafka clients of the broker's own kafka-clients jar. */
    Clients KAFKA = new Clients() {
        @Override
        public Producer<byte[], byte[]> producer(Map<String, Object> properties) {
            return new KafkaProducer<>(properties, new ByteArraySerializer(), new ByteArraySerializer());
        }

        @Override
        public int ensureTopic(Map<String, Object> properties, String topic, int partitions) throws Exception {
            Map<String, Object> props = new HashMap<>();
            properties.forEach((k, v) -> {
                if (AdminClientConfig.configNames().contains(k)) {
                    props.put(k, v);
                }
            });
            props.put(AdminClientConfig.CLIENT_ID_CONFIG, properties.get("client.id") + "-admin");
            props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 10_000);
            props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 5_000);
            try (Admin admin = Admin.create(props)) {
                if (admin.listTopics().names().get(10, TimeUnit.SECONDS).contains(topic)) {
                    TopicDescription found =
                            admin.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
                    return found.partitions().size();
                }
                NewTopic spec = new NewTopic(topic, Optional.of(partitions), Optional.empty());
                admin.createTopics(List.of(spec)).all().get(10, TimeUnit.SECONDS);
                return partitions;
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
                return -1;
            }
        }
    };
}
