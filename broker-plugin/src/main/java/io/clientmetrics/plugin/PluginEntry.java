package io.clientmetrics.plugin;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;

/**
 * What the two entry classes share: the {@link MetricsReporter} half a broker drives through
 * {@code metric.reporters} (settings in, reconfiguration, close), all handed to one
 * {@link PluginRuntime}. The subclasses add only the telemetry interface of their Kafka
 * versions; this class names neither, so it loads on every broker from 3.7 on.
 */
abstract class PluginEntry implements MetricsReporter {
    final PluginRuntime runtime;

    PluginEntry(Clients clients) {
        runtime = new PluginRuntime(clients);
    }

    @Override
    public void configure(Map<String, ?> configs) {
        runtime.configure(configs);
    }

    @Override
    public Set<String> reconfigurableConfigs() {
        return PluginConfig.RECONFIGURABLE;
    }

    @Override
    public void validateReconfiguration(Map<String, ?> configs) {
        runtime.validate(configs);
    }

    @Override
    public void reconfigure(Map<String, ?> configs) {
        runtime.reconfigure(configs);
    }

    /** The broker's own metrics are not what this plugin reports: ignored. */
    @Override
    public void init(List<KafkaMetric> metrics) {}

    @Override
    public void metricChange(KafkaMetric metric) {}

    @Override
    public void metricRemoval(KafkaMetric metric) {}

    @Override
    public void close() {
        runtime.close();
    }
}
