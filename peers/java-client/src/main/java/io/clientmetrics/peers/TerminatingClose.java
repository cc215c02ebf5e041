package io.clientmetrics.peers;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * Closes a producer so that it always sends its terminating telemetry push.
 *
 * <p>{@code KafkaProducer.close()} sends the terminating push only while its I/O thread still
 * has work once close has begun: {@code Sender.run()} stops polling as soon as nothing is queued
 * or in flight. A producer closed mid-stream has that work; a test's producer, idle at the end,
 * may not, and a last record sent just before {@code close()} can be acknowledged before close
 * begins (it was, on a busy machine). So the work is held: the callback of a first record holds
 * the I/O thread while a second record is queued and {@code close()} begins, and is let go only
 * when the closing thread waits in {@code close()}'s join of the I/O thread, after both the
 * telemetry reporter and the sender were told to close. The second record is then still queued,
 * and the I/O thread polls at least once more: that poll sends the terminating push.
 */
final class TerminatingClose {
    private static final long DELIVERY_WAIT_MS = 120_000;

    private TerminatingClose() {
    }

    /** Sends the two records (counted in {@code acked}/{@code failed}), then closes. */
    static long close(KafkaProducer<String, String> producer, String topic, AtomicLong acked,
                      AtomicLong failed) throws InterruptedException {
        CountDownLatch held = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        producer.send(new ProducerRecord<>(topic, "hold", "hold"), (metadata, error) -> {
            (error == null ? acked : failed).incrementAndGet();
            held.countDown();
            try {
                release.await(DELIVERY_WAIT_MS, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        // Bounded: a record that is never delivered (the cluster gone) leaves nothing to hold.
        boolean holding = held.await(DELIVERY_WAIT_MS, TimeUnit.MILLISECONDS);
        producer.send(new ProducerRecord<>(topic, "last", "last"),
            (metadata, error) -> (error == null ? acked : failed).incrementAndGet());
        Thread closing = Thread.currentThread();
        Thread releaser = new Thread(() -> {
            // close() waits TIMED_WAITING only in its join of the I/O thread (its locks park
            // WAITING), and it joins only after initiating the telemetry and sender close.
            while (holding && closing.getState() != Thread.State.TIMED_WAITING) {
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    break;
                }
            }
            release.countDown();
        }, "peer-producer-close-releaser");
        releaser.setDaemon(true);
        releaser.start();
        producer.close();
        release.countDown();
        return 2;
    }
}
