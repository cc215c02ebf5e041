package io.clientmetrics.plugin;

import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Pushes in, records out: a bounded queue the request threads offer to without ever waiting
 * (a full queue drops the push and counts it), and one thread of its own that takes what has
 * gathered every {@value #GATHER_MS} ms or so (less when {@code clientmetrics.linger.ms} is),
 * builds each record and hands it to a Kafka producer. A cluster that is away costs the broker
 * nothing but this queue; the producer reconnects by itself when it is back. What is queued
 * or batched here is lost if the broker is killed: {@code linger.ms} bounds it.
 */
final class Forwarder {
    private static final Logger LOG = LoggerFactory.getLogger(Forwarder.class);
    private static final long TOPIC_RETRY_MS = 30_000;
    private static final long WARN_EVERY_MS = 60_000;
    /**
     * Once a push is in, how long the thread lets more gather before it takes them all: one
     * wake-up (and one signal from a request thread) per this many milliseconds instead of
     * one per push. Part of {@code clientmetrics.linger.ms}: the producer lingers the rest
     * ({@link PluginConfig#gatherMs}).
     */
    static final long GATHER_MS = 20;

    final LongAdder received = new LongAdder();
    final LongAdder sent = new LongAdder();
    final LongAdder dropped = new LongAdder();
    final LongAdder failed = new LongAdder();
    final LongAdder invalid = new LongAdder();

    private final LinkedBlockingQueue<Push> queue = new LinkedBlockingQueue<>();
    private final AtomicLong queuedBytes = new AtomicLong();
    private final AtomicLong lastWarning = new AtomicLong();
    private final Clients clients;
    private final Thread thread;
    private volatile PluginConfig config;
    private volatile boolean closing;
    private volatile long closeDeadlineMs;

    // Owned by the forwarder's thread (close() may close the producer from outside).
    private volatile Producer<byte[], byte[]> producer;
    private PluginConfig producerConfig;
    private boolean topicReady;
    /** The partition count of the topic as last checked (-1: not known). */
    volatile int topicPartitions = -1;
    private long nextTopicAttemptMs;

    Forwarder(PluginConfig config, Clients clients) {
        this.config = config;
        this.clients = clients;
        this.thread = new Thread(this::run, "clientmetrics-plugin-forwarder");
        this.thread.setDaemon(true);
    }

    void start() {
        thread.start();
    }

    /** Take new settings; the forwarder's thread switches producer if it must. */
    void update(PluginConfig next) {
        config = next;
    }

    PluginConfig config() {
        return config;
    }

    int depth() {
        return queue.size();
    }

    long bytes() {
        return queuedBytes.get();
    }

    /** Queue a push without waiting: false (dropped, counted) when the queue is full. */
    boolean offer(Push push) {
        received.increment();
        PluginConfig limits = config;
        int size = push.payload().length;
        if (closing || queue.size() >= limits.queueSize() || queuedBytes.get() + size > limits.queueMaxBytes()) {
            dropped.increment();
            warn("queue full: a push was dropped (clientmetrics.queue.size / queue.max.bytes)", null);
            return false;
        }
        queuedBytes.addAndGet(size);
        queue.add(push);
        return true;
    }

    /** Stop taking pushes, deliver what is queued for at most the close timeout, stop. */
    void close() {
        closeDeadlineMs = System.currentTimeMillis() + config.closeTimeoutMs();
        closing = true;
        try {
            thread.join(config.closeTimeoutMs() + 1_000);
            Producer<byte[], byte[]> stuck = producer;
            if (thread.isAlive() && stuck != null) {
                // Blocked in send() on a cluster that is away: closing the producer ends it.
                stuck.close(java.time.Duration.ZERO);
                thread.join(5_000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException e) {
            LOG.warn("clientmetrics: closing the forwarder failed", e);
        }
    }

    private void run() {
        try {
            while (!closing || (!queue.isEmpty() && System.currentTimeMillis() < closeDeadlineMs)) {
                Push push = taken(queue.poll(100, TimeUnit.MILLISECONDS));
                if (push == null) {
                    continue;
                }
                int gather = config.gatherMs();
                if (!closing && gather > 0) {
                    Thread.sleep(gather); // let more come: they are taken without waiting
                }
                // One at a time off the queue, so what waits stays within its bounds.
                while (push != null) {
                    forward(push);
                    push = taken(queue.poll());
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException | LinkageError e) {
            LOG.error("clientmetrics: the forwarder stopped", e);
        } finally {
            int left = queue.size();
            queue.clear();
            queuedBytes.set(0);
            dropped.add(left);
            closeProducer(Math.max(0, closeDeadlineMs - System.currentTimeMillis()));
        }
    }

    /** A push just taken off the queue (or null): its bytes no longer wait. */
    private Push taken(Push push) {
        if (push != null) {
            queuedBytes.addAndGet(-push.payload().length);
        }
        return push;
    }

    private void forward(Push push) {
        PluginConfig now = config;
        RecordFormat.TopicRecord record;
        try {
            record = RecordFormat.build(push, now.labels());
        } catch (Wire.Malformed e) {
            invalid.increment();
            warn("a push whose payload is not OTLP MetricsData was dropped: " + e.getMessage(), null);
            return;
        }
        try {
            Producer<byte[], byte[]> out = producerFor(now);
            out.send(
                    new ProducerRecord<>(
                            now.topic(), null, record.timestampMs(), record.key(), record.value(), record.headers()),
                    (metadata, error) -> {
                        if (error == null) {
                            sent.increment();
                        } else {
                            failed.increment();
                            warn("a record could not be delivered to " + now.target(), error);
                        }
                    });
        } catch (RuntimeException e) {
            // KafkaException (a timeout waiting for the cluster, a full buffer), bad settings.
            failed.increment();
            warn("a record could not be produced to " + now.target(), e);
        }
    }

    private Producer<byte[], byte[]> producerFor(PluginConfig now) {
        if (now == producerConfig && producer != null && (topicReady || !now.createTopic())) {
            return producer; // nothing changed since the last record
        }
        if (producer == null || !producerConfig.sameProducer(now)) {
            closeProducer(now.closeTimeoutMs());
            producer = clients.producer(now.producer());
            LOG.info("clientmetrics: producing client telemetry to topic {} on {}", now.topic(), now.target());
            topicReady = false;
            nextTopicAttemptMs = 0;
        }
        if (producerConfig == null || !producerConfig.topic().equals(now.topic())) {
            topicReady = false;
            nextTopicAttemptMs = 0;
        }
        producerConfig = now;
        long time = System.currentTimeMillis();
        if (now.createTopic() && !topicReady && time >= nextTopicAttemptMs) {
            try {
                int found = clients.ensureTopic(now.producer(), now.topic(), now.partitions());
                topicReady = true;
                topicPartitions = found;
                if (found > 0 && found != now.partitions()) {
                    // Left as it is: adding partitions would move instances' records midway.
                    LOG.warn("clientmetrics: topic {} exists with {} partitions, not the {} of "
                                    + "clientmetrics.topic.partitions; it is left as it is",
                            now.topic(), found, now.partitions());
                }
            } catch (Exception e) {
                if (e instanceof InterruptedException) {
                    Thread.currentThread().interrupt();
                }
                nextTopicAttemptMs = time + TOPIC_RETRY_MS;
                warn("could not check or create topic " + now.topic() + " on " + now.target(), e);
            }
        }
        return producer;
    }

    private void closeProducer(long timeoutMs) {
        if (producer != null) {
            try {
                producer.close(java.time.Duration.ofMillis(timeoutMs));
            } catch (RuntimeException e) {
                LOG.warn("clientmetrics: closing the producer failed", e);
            }
            producer = null;
        }
    }

    /** Log at most one warning a minute: a cluster that is away must not flood the log. */
    private void warn(String message, Throwable error) {
        long time = System.currentTimeMillis();
        long last = lastWarning.get();
        if (time - last >= WARN_EVERY_MS && lastWarning.compareAndSet(last, time)) {
            LOG.warn("clientmetrics: {}{} (received {}, sent {}, dropped {}, failed {}, invalid {}; "
                            + "this warning is shown at most once a minute)",
                    message, error == null ? "" : ": " + error, received.sum(), sent.sum(), dropped.sum(),
                    failed.sum(), invalid.sum());
        }
    }
}
