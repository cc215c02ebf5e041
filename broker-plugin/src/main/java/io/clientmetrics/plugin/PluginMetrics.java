package io.clientmetrics.plugin;

import java.util.List;
import java.util.function.DoubleSupplier;
import org.apache.kafka.common.metrics.JmxReporter;
import org.apache.kafka.common.metrics.KafkaMetricsContext;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.common.utils.Time;

/**
 * The plugin's own counters in a Kafka metrics registry with a JMX reporter:
 * {@code kafka.server:type=client-metrics-plugin}, attributes {@code received-total},
 * {@code sent-total}, {@code dropped-total}, {@code failed-total}, {@code invalid-total},
 * {@code queue-depth}, {@code queue-bytes}.
 */
final class PluginMetrics implements AutoCloseable {
    static final String JMX_DOMAIN = "kafka.server";
    static final String GROUP = "client-metrics-plugin";

    private final Metrics metrics;

    PluginMetrics(Forwarder forwarder) {
        List<MetricsReporter> reporters = List.of(new JmxReporter());
        metrics = new Metrics(new MetricConfig(), reporters, Time.SYSTEM, new KafkaMetricsContext(JMX_DOMAIN));
        add("received-total", "Pushes the broker handed the plugin", forwarder.received::sum);
        add("sent-total", "Records the target cluster acknowledged", forwarder.sent::sum);
        add("dropped-total", "Pushes dropped because the queue was full (or the plugin closing)",
                forwarder.dropped::sum);
        add("failed-total", "Records that could not be produced or delivered", forwarder.failed::sum);
        add("invalid-total", "Pushes whose payload is not OTLP MetricsData", forwarder.invalid::sum);
        add("queue-depth", "Pushes waiting to be produced", forwarder::depth);
        add("queue-bytes", "Payload bytes waiting to be produced", forwarder::bytes);
    }

    private void add(String name, String description, DoubleSupplier value) {
        metrics.addMetric(metrics.metricName(name, GROUP, description), (config, now) -> value.getAsDouble());
    }

    Metrics registry() {
        return metrics;
    }

    @Override
    public void close() {
        metrics.close();
    }
}
