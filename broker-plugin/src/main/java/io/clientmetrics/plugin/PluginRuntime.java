package io.clientmetrics.plugin;

import java.nio.ByteBuffer;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What both entry classes share: configuration, the forwarder, the metrics, and the one
 * method the broker's request threads call, which never blocks and never throws (an
 * exception would answer the client INVALID_RECORD and switch its telemetry off for good).
 */
final class PluginRuntime {
    private static final Logger LOG = LoggerFactory.getLogger(PluginRuntime.class);

    private final Clients clients;
    private volatile Forwarder forwarder;
    private PluginMetrics metrics;

    PluginRuntime(Clients clients) {
        this.clients = clients;
    }

    synchronized void configure(Map<String, ?> broker) {
        PluginConfig config = PluginConfig.parse(broker);
        if (forwarder != null) {
            forwarder.update(config);
            return;
        }
        Forwarder started = new Forwarder(config, clients);
        started.start();
        try {
            metrics = new PluginMetrics(started);
        } catch (RuntimeException e) {
            LOG.warn("clientmetrics: the plugin's metrics could not be registered", e);
        }
        forwarder = started;
        LOG.info("clientmetrics: broker plugin on node {}: topic {} on {}, labels {}", config.nodeId(),
                config.topic(), config.target(), Label.keys(config.labels()));
    }

    void validate(Map<String, ?> broker) {
        PluginConfig.parse(broker);
    }

    synchronized void reconfigure(Map<String, ?> broker) {
        PluginConfig config = PluginConfig.parse(broker);
        Forwarder current = forwarder;
        if (current != null) {
            current.update(config);
            LOG.info("clientmetrics: reconfigured: topic {} on {}, labels {}", config.topic(), config.target(),
                    Label.keys(config.labels()));
        }
    }

    synchronized void close() {
        Forwarder current = forwarder;
        forwarder = null; // from now on pushes are ignored: the broker may still call us
        if (current != null) {
            current.close();
        }
        if (metrics != null) {
            metrics.close();
            metrics = null;
        }
    }

    Forwarder forwarder() {
        return forwarder;
    }

    PluginMetrics metrics() {
        return metrics;
    }

    /** Called on a request thread for every non-empty push. */
    void export(AuthorizableRequestContext context, ClientTelemetryPayload payload, int pushIntervalMs) {
        Forwarder current = forwarder;
        if (current == null) {
            return;
        }
        try {
            current.offer(capture(context, payload, pushIntervalMs, current.config().nodeId()));
        } catch (RuntimeException | LinkageError e) {
            current.failed.increment();
            LOG.debug("clientmetrics: a push could not be taken", e);
        }
    }

    static Push capture(
            AuthorizableRequestContext context, ClientTelemetryPayload payload, int pushIntervalMs, int nodeId) {
        ByteBuffer data = payload.data().duplicate();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        Uuid id = payload.clientInstanceId();
        RequestDetails details = RequestDetails.of(context);
        String clientId = context.clientId();
        return new Push(
                System.currentTimeMillis(),
                new UUID(id.getMostSignificantBits(), id.getLeastSignificantBits()),
                payload.isTerminating(),
                pushIntervalMs,
                clientId == null ? "" : clientId,
                details.softwareName,
                details.softwareVersion,
                RequestDetails.address(context),
                details.port,
                String.valueOf(context.principal()),
                nodeId,
                context.listenerName(),
                context.securityProtocol().name,
                bytes);
    }
}
