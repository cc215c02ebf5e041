package io.clientmetrics.plugin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.types.Password;
import org.junit.jupiter.api.Test;

/** Where the records go by default: the broker's own listener, reached as the broker reaches it. */
class BrokerTargetTest {
    static final String JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required "
            + "username=\"admin\" password=\"admin-secret\";";

    static Map<String, Object> saslSsl() {
        Map<String, Object> broker = new HashMap<>();
        broker.put("node.id", 1); // after a dynamic change the broker passes parsed values
        broker.put("listeners", "SASL_SSL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9095");
        broker.put("advertised.listeners", "SASL_SSL://127.0.0.1:9094");
        broker.put("listener.security.protocol.map", "CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL");
        broker.put("inter.broker.listener.name", "SASL_SSL");
        broker.put("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512");
        broker.put("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config", new Password(JAAS));
        broker.put("ssl.truststore.type", "PEM");
        broker.put("ssl.truststore.location", "/etc/kafka/ca.pem");
        broker.put("ssl.keystore.location", "/etc/kafka/broker.pem");
        broker.put("ssl.client.auth", "none");
        return broker;
    }

    @Test
    void aSaslSslBrokerIsReachedWithItsOwnInterBrokerLoginAndTrustStore() {
        PluginConfig config = PluginConfig.parse(saslSsl());
        Map<String, Object> p = config.producer();
        assertEquals("127.0.0.1:9094", p.get("bootstrap.servers"));
        assertEquals("SASL_SSL", p.get("security.protocol"));
        assertEquals("SCRAM-SHA-512", p.get("sasl.mechanism"));
        assertEquals(new Password(JAAS), p.get("sasl.jaas.config"));
        assertEquals("/etc/kafka/ca.pem", p.get("ssl.truststore.location"));
        assertFalse(p.containsKey("ssl.keystore.location")); // no client certificate asked for
        assertEquals(1, config.nodeId());
        assertEquals("clientmetrics-plugin-1", p.get("client.id"));
    }

    @Test
    void producerSettingsAndAnotherClusterWin() {
        Map<String, Object> broker = saslSsl();
        broker.put("clientmetrics.bootstrap.servers", "metrics-1:9093");
        broker.put("clientmetrics.producer.security.protocol", "SSL");
        broker.put("clientmetrics.producer.acks", "1");
        PluginConfig config = PluginConfig.parse(broker);
        assertEquals("metrics-1:9093", config.producer().get("bootstrap.servers"));
        assertEquals("SSL", config.producer().get("security.protocol"));
        assertEquals("1", config.producer().get("acks"));
        assertFalse(config.producer().containsKey("sasl.jaas.config"));

        Map<String, Object> own = saslSsl();
        own.put("clientmetrics.producer.sasl.jaas.config", "x");
        own.put("clientmetrics.producer.sasl.mechanism", "PLAIN");
        PluginConfig dedicated = PluginConfig.parse(own);
        assertEquals("x", dedicated.producer().get("sasl.jaas.config"));
        assertEquals("PLAIN", dedicated.producer().get("sasl.mechanism"));
    }

    @Test
    void aListenerWithoutAnAddressOrAnUnknownSettingIsAClearError() {
        Map<String, Object> broker = saslSsl();
        broker.put("clientmetrics.listener", "INTERNAL");
        ConfigException e = assertThrows(ConfigException.class, () -> PluginConfig.parse(broker));
        assertEquals("clientmetrics: this broker has no listener INTERNAL; set clientmetrics.listener "
                + "or clientmetrics.bootstrap.servers", e.getMessage());
        Map<String, Object> typo = saslSsl();
        typo.put("clientmetrics.lables", "client_id");
        assertThrows(ConfigException.class, () -> PluginConfig.parse(typo));
    }

    @Test
    void withoutAnInterBrokerListenerNameTheProtocolPicksTheListener() {
        Map<String, Object> broker = new HashMap<>();
        broker.put("broker.id", "4");
        broker.put("listeners", "PLAINTEXT://:9092");
        PluginConfig config = PluginConfig.parse(broker);
        assertEquals("localhost:9092", config.producer().get("bootstrap.servers"));
        assertEquals("PLAINTEXT", config.producer().get("security.protocol"));
        assertEquals(4, config.nodeId());
    }
}
