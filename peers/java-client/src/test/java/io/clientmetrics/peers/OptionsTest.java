package io.clientmetrics.peers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import org.apache.kafka.common.Uuid;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class OptionsTest {
    @Test
    void defaults() {
        Options o = Options.parse(new String[] {"--bootstrap", "127.0.0.1:9092"});
        assertEquals("127.0.0.1:9092", o.bootstrap);
        assertEquals(Options.Role.BOTH, o.role);
        assertEquals("java-peer", o.clientId);
        assertEquals(100, o.messages);
        assertEquals("none", o.compression);
        assertFalse(o.close);
        assertNull(o.commandConfig);
    }

    @Test
    void everyOption() {
        Options o = Options.parse(new String[] {
            "--bootstrap", "h:1", "--client-id", "c", "--role", "Producer", "--topic", "t",
            "--group", "g", "--messages", "0", "--rate", "2.5", "--duration", "3",
            "--compression", "ZSTD", "--instance-timeout", "5", "--property", "linger.ms=5",
            "--property", "acks=all", "--process-ms", "750", "--close"});
        assertEquals(Options.Role.PRODUCER, o.role);
        assertEquals(0, o.messages);
        assertEquals(2.5, o.rate);
        assertEquals(3.0, o.durationSeconds);
        assertEquals("zstd", o.compression);
        assertEquals("5", o.properties.get("linger.ms"));
        assertEquals("all", o.properties.get("acks"));
        assertEquals(750, o.processMs);
        assertTrue(o.close);
    }

    @Test
    void theShareRoleRunsTheShareConsumerAlone() {
        Options.Role share = Options.parse(new String[] {"--bootstrap", "h:1", "--role", "share"}).role;
        assertEquals(Options.Role.SHARE, share);
        assertTrue(share.share());
        assertFalse(share.producer());
        assertFalse(share.consumer());
        assertFalse(Options.Role.BOTH.share());
    }

    @Test
    void severalClustersGetOneProducerEach() {
        Options o = Options.parse(new String[] {
            "--bootstrap", "a:1", "--bootstrap", "b:2", "--role", "producer"});
        assertEquals("a:1", o.bootstrap);
        assertEquals(java.util.List.of("a:1", "b:2"), o.bootstraps);
        assertEquals("several --bootstrap need --role producer", assertThrows(
            IllegalArgumentException.class,
            () -> Options.parse(new String[] {"--bootstrap", "a:1", "--bootstrap", "b:2"})).getMessage());
    }

    @Test
    void badCommandLinesAreRefusedWithTheReason() {
        assertEquals("--bootstrap is required",
            assertThrows(IllegalArgumentException.class, () -> Options.parse(new String[] {})).getMessage());
        assertEquals("unknown option --nope", assertThrows(IllegalArgumentException.class,
            () -> Options.parse(new String[] {"--bootstrap", "h:1", "--nope", "1"})).getMessage());
        assertEquals("--topic needs a value", assertThrows(IllegalArgumentException.class,
            () -> Options.parse(new String[] {"--bootstrap", "h:1", "--topic"})).getMessage());
        assertEquals("--rate takes a number, got fast", assertThrows(IllegalArgumentException.class,
            () -> Options.parse(new String[] {"--bootstrap", "h:1", "--rate", "fast"})).getMessage());
        assertThrows(IllegalArgumentException.class,
            () -> Options.parse(new String[] {"--bootstrap", "h:1", "--messages", "-1"}));
        assertThrows(IllegalArgumentException.class,
            () -> Options.parse(new String[] {"--bootstrap", "h:1", "--rate", "0"}));
        assertThrows(IllegalArgumentException.class,
            () -> Options.parse(new String[] {"--bootstrap", "h:1", "--role", "admin"}));
        assertThrows(IllegalArgumentException.class,
            () -> Options.parse(new String[] {"--bootstrap", "h:1", "--compression", "brotli"}));
        assertThrows(IllegalArgumentException.class,
            () -> Options.parse(new String[] {"--bootstrap", "h:1", "--property", "=x"}));
    }

    @Test
    void commandConfigThenPropertiesWin(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("client.properties");
        Files.writeString(file, "security.protocol=SASL_SSL\nacks=1\n");
        Options o = Options.parse(new String[] {
            "--bootstrap", "h:1", "--command-config", file.toString(), "--property", "acks=all"});
        Properties props = o.common();
        assertEquals("h:1", props.get("bootstrap.servers"));
        assertEquals("SASL_SSL", props.get("security.protocol"));
        assertEquals("all", props.get("acks"));
    }

    @Test
    void instanceIdsAreWrittenAsTheGatewayLandsThem() {
        // Kafka's Uuid prints base64url; the landing zone keeps the canonical 8-4-4-4-12 text.
        Uuid id = new Uuid(0x0123456789abcdefL, 0xfedcba9876543210L);
        assertEquals("01234567-89ab-cdef-fedc-ba9876543210", TelemetryPeer.canonical(id));
        assertEquals("ASNFZ4mrze_-3LqYdlQyEA", id.toString());
    }

    @Test
    void linesAreOneJsonObject() {
        assertEquals("{\"event\":\"done\",\"role\":\"producer\",\"sent\":3,\"note\":\"a \\\"b\\\"\"}",
            TelemetryPeer.line("done", "role", "producer", "sent", 3, "note", "a \"b\""));
        assertThrows(IllegalArgumentException.class, () -> TelemetryPeer.line("x", "lonely"));
    }
}
