package io.clientmetrics.plugin;

import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;

/**
 * The clientmetrics broker plugin for Apache Kafka 4.2 and newer (KIP-1217's exporter):
 * {@code metric.reporters=io.clientmetrics.plugin.ClientMetricsPlugin}. Every push a client
 * sends becomes one record on a Kafka topic, in the gateway's record format
 * (docs/kafka-plugin.md). For Kafka 3.7 to 4.1 use {@link ClientMetricsLegacyPlugin}.
 */
public class ClientMetricsPlugin extends PluginEntry implements ClientTelemetryExporterProvider {
    public ClientMetricsPlugin() {
        this(Clients.KAFKA);
    }

    ClientMetricsPlugin(Clients clients) {
        super(clients);
    }

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return (context, payload) ->
                runtime.export(context.authorizableRequestContext(), payload, context.pushIntervalMs());
    }
}
