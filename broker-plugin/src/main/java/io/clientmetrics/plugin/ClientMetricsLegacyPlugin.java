package io.clientmetrics.plugin;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetry;
import org.apache.kafka.server.telemetry.ClientTelemetryReceiver;

/**
 * The clientmetrics broker plugin for Apache Kafka 3.7 to 4.1 (KIP-714's receiver, deprecated
 * since 4.2 and gone in 5.0): {@code metric.reporters=io.clientmetrics.plugin.ClientMetricsLegacyPlugin}.
 * Same records as {@link ClientMetricsPlugin}, except that these brokers do not tell a plugin
 * the push interval, so records carry no {@code push_interval_ms} header.
 *
 * <p>Two classes, not one implementing both interfaces: a broker picks the new interface when
 * a class has both, but a class naming an interface the broker's kafka-clients lacks (4.2's
 * {@code ClientTelemetryExporterProvider} on 3.7–4.1) cannot even be loaded there.
 */
@SuppressWarnings({"deprecation", "removal"})
public class ClientMetricsLegacyPlugin implements MetricsReporter, ClientTelemetry {
    final PluginRuntime runtime;

    public ClientMetricsLegacyPlugin() {
        this(Clients.KAFKA);
    }

    ClientMetricsLegacyPlugin(Clients clients) {
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

    @Override
    public ClientTelemetryReceiver clientReceiver() {
        return (context, payload) -> runtime.export(context, payload, -1);
    }
}
