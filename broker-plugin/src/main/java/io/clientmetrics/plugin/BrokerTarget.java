package io.clientmetrics.plugin;

import java.util.Collection;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.types.Password;

/**
 * Where the records go when {@code clientmetrics.bootstrap.servers} is not set: this broker's
 * own listener (the inter-broker one unless {@code clientmetrics.listener} names another),
 * reached with the listener's security protocol, the broker's trust store and, on a SASL
 * listener, the broker's own inter-broker mechanism and login, unless the
 * {@code clientmetrics.producer.*} settings say otherwise.
 */
record BrokerTarget(Map<String, Object> properties, String description) {

    private static final String[] TRUST = {
        "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
        "ssl.truststore.certificates", "ssl.endpoint.identification.algorithm",
    };
    private static final String[] KEY = {
        "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
        "ssl.keystore.certificate.chain", "ssl.keystore.key",
    };

    static BrokerTarget of(
            Map<String, ?> broker, String bootstrap, String listener, Map<String, Object> producer) {
        Map<String, Object> props = new HashMap<>();
        if (!bootstrap.isEmpty()) {
            props.put("bootstrap.servers", bootstrap);
            return new BrokerTarget(props, bootstrap);
        }
        String name = listener.isEmpty() ? interBrokerListener(broker) : listener;
        String address = address(broker, name);
        String protocol = protocol(broker, name);
        props.put("bootstrap.servers", address);
        props.put("security.protocol", protocol);
        String prefix = "listener.name." + name.toLowerCase(Locale.ROOT) + ".";
        if (protocol.endsWith("SSL")) {
            copy(broker, prefix, TRUST, props);
            String auth = setting(broker, prefix, "ssl.client.auth");
            if ("required".equals(auth) || "requested".equals(auth)) {
                copy(broker, prefix, KEY, props);
            }
        }
        if (protocol.startsWith("SASL_") && !producer.containsKey("sasl.jaas.config")) {
            String mechanism = producer.containsKey("sasl.mechanism")
                    ? text(producer.get("sasl.mechanism"))
                    : orDefault(text(broker.get("sasl.mechanism.inter.broker.protocol")), "GSSAPI");
            props.put("sasl.mechanism", mechanism);
            String jaas = setting(broker, prefix + mechanism.toLowerCase(Locale.ROOT) + ".", "sasl.jaas.config");
            if (jaas != null) {
                props.put("sasl.jaas.config", new Password(jaas));
            }
        }
        return new BrokerTarget(props, name + " listener " + address + " (this broker)");
    }

    static int nodeId(Map<String, ?> broker) {
        String id = text(broker.get("node.id"));
        if (id == null || id.isEmpty() || id.equals("-1")) {
            id = text(broker.get("broker.id"));
        }
        try {
            return id == null ? -1 : Integer.parseInt(id.trim());
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** A broker property's value as text, whichever type the broker parsed it to. */
    static String text(Object value) {
        if (value == null) {
            return null;
        }
        if (value instanceof Password) {
            return ((Password) value).value();
        }
        if (value instanceof Collection) {
            return String.join(",", ((Collection<?>) value).stream().map(String::valueOf).toList());
        }
        if (value instanceof Class) {
            return ((Class<?>) value).getName();
        }
        return value.toString();
    }

    private static String interBrokerListener(Map<String, ?> broker) {
        String name = text(broker.get("inter.broker.listener.name"));
        if (name != null && !name.isEmpty()) {
            return name;
        }
        String protocol = orDefault(text(broker.get("security.inter.broker.protocol")), "PLAINTEXT");
        for (String entry : listeners(broker)) {
            String listener = entry.substring(0, entry.indexOf("://"));
            if (protocol(broker, listener).equals(protocol)) {
                return listener;
            }
        }
        throw new ConfigException("clientmetrics: no listener to produce to; set clientmetrics.bootstrap.servers");
    }

    private static String[] listeners(Map<String, ?> broker) {
        String advertised = text(broker.get("advertised.listeners"));
        String all = advertised == null || advertised.isEmpty() ? text(broker.get("listeners")) : advertised;
        return all == null || all.isEmpty() ? new String[0] : all.split("\\s*,\\s*");
    }

    private static String address(Map<String, ?> broker, String name) {
        for (String entry : listeners(broker)) {
            int sep = entry.indexOf("://");
            if (sep > 0 && entry.substring(0, sep).equalsIgnoreCase(name)) {
                String hostPort = entry.substring(sep + 3);
                String host = hostPort.substring(0, hostPort.lastIndexOf(':'));
                String port = hostPort.substring(hostPort.lastIndexOf(':') + 1);
                if (host.isEmpty() || host.equals("0.0.0.0") || host.equals("[::]")) {
                    host = "localhost";
                }
                return host + ":" + port;
            }
        }
        throw new ConfigException("clientmetrics: this broker has no listener " + name
                + "; set clientmetrics.listener or clientmetrics.bootstrap.servers");
    }

    private static String protocol(Map<String, ?> broker, String name) {
        String map = text(broker.get("listener.security.protocol.map"));
        if (map != null) {
            for (String pair : map.split("\\s*,\\s*")) {
                String[] kv = pair.split(":", 2);
                if (kv.length == 2 && kv[0].equalsIgnoreCase(name)) {
                    return kv[1].trim().toUpperCase(Locale.ROOT);
                }
            }
        }
        return name.toUpperCase(Locale.ROOT); // without a map a listener is named by its protocol
    }

    /** A listener-prefixed setting, else the broker-wide one. */
    private static String setting(Map<String, ?> broker, String prefix, String name) {
        String own = text(broker.get(prefix + name));
        return own != null ? own : text(broker.get(name));
    }

    private static void copy(Map<String, ?> broker, String prefix, String[] names, Map<String, Object> into) {
        for (String name : names) {
            String value = setting(broker, prefix, name);
            if (value != null) {
                into.put(name, name.endsWith("password") || name.endsWith(".key") ? new Password(value) : value);
            }
        }
    }

    private static String orDefault(String value, String fallback) {
        return value == null || value.isEmpty() ? fallback : value;
    }
}
