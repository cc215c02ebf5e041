package io.clientmetrics.plugin;

import static io.clientmetrics.plugin.Fakes.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.junit.jupiter.api.Test;

/**
 * {@code clientmetrics.linger.ms}: the longest a push waits in the plugin (the forwarder's
 * gathering, then the producer's batch) before its produce request goes out, which bounds
 * what a broker that is killed loses (docs/kafka-plugin.md).
 */
class LossWindowTest {
    /** (linger.ms, the forwarder's gathering, the producer's linger.ms), worked out by hand. */
    @Test
    void lingerIsSplitBetweenTheForwarderAndTheProducerNeverAddedToIt() {
        int[][] cases = {{500, 20, 480}, {100, 20, 80}, {20, 20, 0}, {5, 5, 0}, {0, 0, 0}, {60_000, 20, 59_980}};
        for (int[] c : cases) {
            PluginConfig config = c[0] == PluginConfig.DEFAULT_LINGER_MS
                    ? PluginConfig.parse(Fakes.broker())
                    : PluginConfig.parse(Fakes.broker("clientmetrics.linger.ms", Integer.toString(c[0])));
            assertEquals(c[0], config.lingerMs());
            assertEquals(c[1], config.gatherMs(), "gathering for linger.ms " + c[0]);
            assertEquals(c[2], config.producer().get("linger.ms"), "the producer's linger.ms for " + c[0]);
            assertEquals(c[0], config.gatherMs() + (int) config.producer().get("linger.ms"));
        }
    }

    @Test
    void badValuesAndTheProducersOwnLingerAreRefused() {
        for (String bad : new String[] {"-1", "60001", "soon"}) {
            assertThrows(ConfigException.class,
                    () -> PluginConfig.parse(Fakes.broker("clientmetrics.linger.ms", bad)), bad);
        }
        ConfigException e = assertThrows(ConfigException.class,
                () -> PluginConfig.parse(Fakes.broker("clientmetrics.producer.linger.ms", "5")));
        assertTrue(e.getMessage().contains("give clientmetrics.linger.ms instead"), e.getMessage());
    }

    @Test
    void aNewLingerAtRunTimeTakesANewProducerAndTheRecordsGoOn() throws Exception {
        Fakes.MockClients clients = new Fakes.MockClients(true);
        ClientMetricsPlugin plugin = new ClientMetricsPlugin(clients);
        try {
            plugin.configure(Fakes.broker());
            ClientTelemetryExporter exporter = plugin.clientTelemetryExporter();
            // The default given explicitly is no change: the same producer.
            plugin.reconfigure(Fakes.broker("clientmetrics.linger.ms", "500"));
            exporter.exportMetrics(Fakes.context(5000, Fakes.request("c", "u")),
                    Fakes.payload(PluginTest.ID, false, PluginTest.otlp()));
            await(() -> clients.history().size() == 1, "a record");
            assertEquals(1, clients.producers.size());
            plugin.reconfigure(Fakes.broker("clientmetrics.linger.ms", "0"));
            exporter.exportMetrics(Fakes.context(5000, Fakes.request("c", "u")),
                    Fakes.payload(PluginTest.ID, false, PluginTest.otlp()));
            await(() -> clients.history().size() == 2, "a second record");
            assertEquals(2, clients.producers.size());
            assertTrue(clients.producers.get(0).closed());
            Map<String, Object> now = clients.configs.get(1);
            assertEquals(0, now.get("linger.ms"));
            assertEquals(0, plugin.runtime.forwarder().config().gatherMs());
        } finally {
            plugin.close();
        }
    }
}
