package io.clientmetrics.peers;

import com.google.gson.Gson;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A kafka-clients producer and consumer group with KIP-714 metrics push on, for the tests.
 *
 * <p>Prints one JSON object a line on stdout: {@code started}, each client's {@code instance}
 * (its client instance id, so a test finds its pushes), {@code done} with the records produced
 * or consumed, {@code closed} when a client was closed (its terminating push is sent then),
 * {@code delivered} with the producer's acknowledged and failed records (after its close,
 * when everything is settled), {@code error}, and {@code exit} last. It stops after {@code --duration}, on a {@code stop}
 * line or end of input on stdin, or on SIGTERM.
 */
public final class TelemetryPeer {
    private static final Gson GSON = new Gson();
    private static final Object OUT = new Object();

    private final Options options;
    private final CountDownLatch stop = new CountDownLatch(1);
    private final List<Thread> workers = new ArrayList<>();

    TelemetryPeer(Options options) {
        this.options = options;
    }

    public static void main(String[] args) throws Exception {
        Options options;
        try {
            options = Options.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("java-client-peer: " + e.getMessage());
            System.err.println(Options.USAGE);
            System.exit(2);
            return;
        }
        new TelemetryPeer(options).run();
    }

    /** One JSON line on stdout; lines from several threads never interleave. */
    static void emit(String event, Object... keyValues) {
        String text = line(event, keyValues);
        synchronized (OUT) {
            System.out.println(text);
            System.out.flush();
        }
    }

    /** {@code {"event": event, k1: v1, ...}} as one line of JSON. */
    static String line(String event, Object... keyValues) {
        if (keyValues.length % 2 != 0) {
            throw new IllegalArgumentException("keys and values come in pairs");
        }
        Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("event", event);
        for (int i = 0; i < keyValues.length; i += 2) {
            fields.put(String.valueOf(keyValues[i]), keyValues[i + 1]);
        }
        return GSON.toJson(fields);
    }

    /** Kafka's base64 id as the canonical UUID text the gateway lands. */
    static String canonical(Uuid id) {
        return new UUID(id.getMostSignificantBits(), id.getLeastSignificantBits()).toString();
    }

    private void run() throws Exception {
        Properties common = options.common();
        emit("started", "bootstrap", options.bootstraps, "options", options.describe());
        Thread hook = new Thread(this::onSigterm, "peer-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);
        startStdinWatcher();
        if (options.role.producer()) {
            for (String bootstrap : options.bootstraps) {
                start("producer", () -> produce(common, bootstrap));
            }
        }
        if (options.role.consumer()) {
            start("consumer", () -> consume(common));
        }
        if (options.role.share()) {
            start("share-consumer", () -> shareConsume(common));
        }
        if (options.durationSeconds > 0) {
            stop.await((long) (options.durationSeconds * 1000), TimeUnit.MILLISECONDS);
        } else {
            stop.await();
        }
        stop.countDown();
        joinWorkers();
        emit("exit");
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException alreadyShuttingDown) {
            return;
        }
        // Without --close the clients were left open: end the JVM without closing them.
        Runtime.getRuntime().halt(0);
    }

    private void onSigterm() {
        stop.countDown();
        joinWorkers();
    }

    private void joinWorkers() {
        for (Thread worker : workers) {
            try {
                worker.join(30_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private void start(String role, Runnable body) {
        Thread thread = new Thread(() -> {
            try {
                body.run();
            } catch (RuntimeException e) {
                emit("error", "role", role, "error", e.toString());
            }
        }, "peer-" + role + "-" + workers.size());
        workers.add(thread);
        thread.start();
    }

    private void startStdinWatcher() {
        Thread watcher = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("stop")) {
                        break;
                    }
                }
            } catch (java.io.IOException e) {
                // stdin gone: the same as end of input
            }
            stop.countDown();
        }, "peer-stdin");
        watcher.setDaemon(true);
        watcher.start();
    }

    private boolean stopped() {
        return stop.getCount() == 0;
    }

    private void produce(Properties common, String bootstrap) {
        Properties props = new Properties();
        props.putAll(common);
        props.put("bootstrap.servers", bootstrap);
        props.put("client.id", options.clientId + "-producer");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("compression.type", options.compression);
        props.put("enable.metrics.push", "true");
        props.putAll(options.properties);
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        KafkaProducer<String, String> producer = new KafkaProducer<>(props);
        // The producer is thread-safe: its id is awaited beside the sends, which may block.
        Instance instance = new Instance("producer", props, producer::clientInstanceId);
        Thread waiter = new Thread(instance::await, "peer-producer-instance");
        waiter.setDaemon(true);
        waiter.start();
        Errors errors = new Errors("producer");
        long sent = 0;
        long began = System.nanoTime();
        while (!stopped()) {
            double due = (System.nanoTime() - began) / 1e9 * options.rate;
            if (sent < options.messages && sent < due) {
                ProducerRecord<String, String> record =
                    new ProducerRecord<>(options.topic, "key-" + sent, "value-" + sent);
                sent++;
                try {
                    producer.send(record, (metadata, error) -> (error == null ? acked : failed).incrementAndGet());
                } catch (KafkaException e) {
                    failed.incrementAndGet();
                    errors.report(e);
                }
                continue;
            }
            sleep(20);
        }
        emit("done", "role", "producer", "sent", sent);
        if (options.close && options.messages > 0) {
            long began2 = System.nanoTime();
            try {
                sent += TerminatingClose.close(producer, options.topic, acked, failed);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                producer.close();
            }
            emit("closed", "role", "producer", "seconds", (System.nanoTime() - began2) / 1e9);
        } else {
            finish("producer", producer::close);
        }
        emit("delivered", "role", "producer", "acked", acked.get(), "failed", failed.get());
    }

    private void consume(Properties common) {
        Properties props = new Properties();
        props.putAll(common);
        props.put("client.id", options.clientId + "-consumer");
        props.put("group.id", options.group);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("auto.offset.reset", "earliest");
        props.put("enable.metrics.push", "true");
        props.putAll(options.properties);
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
        consumer.subscribe(List.of(options.topic));
        // A consumer is driven by its own thread only: its id is asked for between polls.
        Instance instance = new Instance("consumer", props, consumer::clientInstanceId);
        Errors errors = new Errors("consumer");
        long consumed = 0;
        while (!stopped()) {
            try {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                consumed += records.count();
            } catch (KafkaException e) {
                // e.g. no group coordinator on a standalone gateway: telemetry goes on regardless
                errors.report(e);
                sleep(100);
            }
            if (options.processMs > 0) {
                // The application's own work between polls: poll.idle.ratio.avg falls towards 0.
                sleep(options.processMs);
            }
            instance.poll(Duration.ofMillis(1));
        }
        emit("done", "role", "consumer", "consumed", consumed);
        finish("consumer", consumer::close);
    }

    /**
     * A share consumer (KIP-932) of {@code --group}: the group first reads from the earliest
     * offset (a group config, {@code share.auto.offset.reset}; its default is the latest), then
     * each record is acknowledged as accepted when the next poll comes (implicit mode).
     */
    private void shareConsume(Properties common) {
        Errors errors = new Errors("share-consumer");
        ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, options.group);
        AlterConfigOp earliest = new AlterConfigOp(
            new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
        try (Admin admin = Admin.create(common)) {
            admin.incrementalAlterConfigs(Map.of(group, List.of(earliest))).all().get(60, TimeUnit.SECONDS);
        } catch (Exception e) {
            errors.report(e);
            return;
        }
        Properties props = new Properties();
        props.putAll(common);
        props.put("client.id", options.clientId + "-share-consumer");
        props.put("group.id", options.group);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("enable.metrics.push", "true");
        props.putAll(options.properties);
        KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props);
        consumer.subscribe(List.of(options.topic));
        Instance instance = new Instance("share-consumer", props, consumer::clientInstanceId);
        long consumed = 0;
        while (!stopped()) {
            try {
                consumed += consumer.poll(Duration.ofMillis(100)).count();
            } catch (KafkaException e) {
                errors.report(e);
                sleep(100);
            }
            instance.poll(Duration.ofMillis(1));
        }
        emit("done", "role", "share-consumer", "consumed", consumed);
        finish("share-consumer", consumer::close);
    }

    private void finish(String role, Runnable close) {
        if (!options.close) {
            return;
        }
        long began = System.nanoTime();
        close.run();
        emit("closed", "role", role, "seconds", (System.nanoTime() - began) / 1e9);
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Prints a client's errors, each distinct one once (a retry loop must not flood stdout). */
    private static final class Errors {
        private final String role;
        private final java.util.Set<String> seen = new java.util.HashSet<>();

        Errors(String role) {
            this.role = role;
        }

        void report(Exception e) {
            if (seen.size() < 20 && seen.add(e.getClass().getName())) {
                emit("error", "role", role, "error", e.toString());
            }
        }
    }

    /** Asks a client for its instance id until it has one (or the wait is over) and prints it. */
    private final class Instance {
        private final String role;
        private final String clientId;
        private final String bootstrap;
        private final Function<Duration, Uuid> ask;
        private final long deadline;
        private volatile boolean settled;

        Instance(String role, Properties props, Function<Duration, Uuid> ask) {
            this.role = role;
            this.clientId = props.getProperty("client.id");
            this.bootstrap = props.getProperty("bootstrap.servers");
            this.ask = ask;
            this.deadline = System.nanoTime() + (long) (options.instanceTimeoutSeconds * 1e9);
        }

        /** Wait up to {@code wait} for the id (null from the client: not known yet). */
        void poll(Duration wait) {
            if (settled) {
                return;
            }
            String error = "no id within --instance-timeout";
            try {
                Uuid id = ask.apply(wait);
                if (id != null) {
                    settled = true;
                    emit("instance", "role", role, "client_id", clientId, "bootstrap", bootstrap,
                        "client_instance_id", canonical(id), "client_instance_id_base64", id.toString());
                    return;
                }
            } catch (org.apache.kafka.common.errors.TimeoutException e) {
                error = e.toString();
            } catch (IllegalStateException e) {
                deadlinePassed(e.toString());
                return;
            }
            if (System.nanoTime() > deadline) {
                deadlinePassed(error);
            }
        }

        /** Blocks until settled or stopped: for a thread-safe client, on a thread of its own. */
        void await() {
            while (!settled && !stopped()) {
                poll(Duration.ofMillis(200));
            }
        }

        private void deadlinePassed(String error) {
            settled = true;
            emit("no_instance", "role", role, "client_id", clientId, "error", error);
        }
    }
}
