package io.clientmetrics.plugin;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;

/**
 * The clientmetrics broker plugin for Apache Kafka 4.2 and newer (KIP-1217's exporter):
 * {@code metric.reporters=io.clientmetrics.plugin.ClientMetricsPlugin}. Every push a client
 * sends becomes one record on a Kafka topic, in the gateway's record format
 * (docs/kafka-plugin.md). For Kafka 3.7 to 4.1 use {@link ClientMetricsLegacyPlugin}.
 */
public class ClientMetricsPlugin implements MetricsReporter, ClientTelemetryExporterProvider {
    final PluginRuntime runtime;

    public ClientMetricsPlugin() {
        this(Clients.KAFKA);
    }

    ClientMetricsPlugin(Clients clients) {
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
    public ClientTelemetryExporter clientTelemetryExporter() {
        return (context, payload) ->
                runtime.export(context.authorizableRequestContext(), payload, context.pushIntervalMs());
    }
}
