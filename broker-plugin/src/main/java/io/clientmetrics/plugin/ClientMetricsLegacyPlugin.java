package io.clientmetrics.plugin;

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
 * {@code ClientTelemetryExporterProvider} on 3.7–4.1) cannot even be loaded there. What they
 * share is in {@link PluginEntry}.
 */
@SuppressWarnings({"deprecation", "removal"})
public class ClientMetricsLegacyPlugin extends PluginEntry implements ClientTelemetry {
    public ClientMetricsLegacyPlugin() {
        this(Clients.KAFKA);
    }

    ClientMetricsLegacyPlugin(Clients clients) {
        super(clients);
    }

    @Override
    public ClientTelemetryReceiver clientReceiver() {
        return (context, payload) -> runtime.export(context, payload, -1);
    }
}
