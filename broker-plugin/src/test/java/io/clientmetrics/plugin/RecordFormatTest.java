package io.clientmetrics.plugin;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.stream.Stream;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.header.Header;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The plugin's records against the record format's shared test vectors
 * (tests/data/record-format/vectors.json, spelled out by hand; the gateway's topic exporter is
 * checked against the same file).
 */
class RecordFormatTest {

    static JsonNode vectors() throws IOException {
        String path = System.getProperty("recordFormatVectors", "../tests/data/record-format/vectors.json");
        return new ObjectMapper().readTree(new File(path));
    }

    static Push push(JsonNode p) {
        return new Push(
                p.get("received_at_ms").asLong(),
                UUID.fromString(p.get("client_instance_id").asText()),
                p.get("terminating").asBoolean(),
                p.get("push_interval_ms").asInt(),
                p.get("client_id").asText(),
                p.get("client_software_name").asText(),
                p.get("client_software_version").asText(),
                p.get("client_source_address").asText(),
                p.get("client_source_port").asInt(),
                p.get("principal").asText(),
                p.get("node_id").asInt(),
                p.get("listener").asText(),
                p.get("security_protocol").asText(),
                Base64.getDecoder().decode(p.get("payload").asText()));
    }

    static List<Label> labels(JsonNode names) {
        List<String> out = new ArrayList<>();
        names.forEach(n -> out.add(n.asText()));
        return Label.parse(out);
    }

    @TestFactory
    Stream<DynamicTest> eachPushBecomesTheRecordTheVectorsSpellOut() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : vectors().get("cases")) {
            tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> check(c)));
        }
        assertEquals(7, tests.size(), "the vectors file lost cases");
        return tests.stream();
    }

    private static void check(JsonNode c) throws Wire.Malformed {
        Push push = push(c.get("push"));
        List<Label> labels = labels(c.get("labels"));
        if (c.path("invalid").asBoolean(false)) {
            assertThrows(Wire.Malformed.class, () -> RecordFormat.build(push, labels));
            return;
        }
        JsonNode want = c.get("record");
        RecordFormat.TopicRecord record = RecordFormat.build(push, labels);
        assertEquals(want.get("key").asText(), new String(record.key(), StandardCharsets.UTF_8));
        assertEquals(want.get("timestamp_ms").asLong(), record.timestampMs());
        List<String> wantHeaders = new ArrayList<>();
        want.get("headers").forEach(h -> wantHeaders.add(h.get(0).asText() + "=" + h.get(1).asText()));
        List<String> headers = new ArrayList<>();
        List<String> names = new ArrayList<>();
        for (Header h : record.headers()) {
            headers.add(h.key() + "=" + new String(h.value(), StandardCharsets.UTF_8));
            names.add(h.key());
        }
        // The last header is the push's own id: random, so the vectors cannot spell it out.
        String last = headers.remove(headers.size() - 1);
        assertPushId(names, last.substring("push_id=".length()));
        assertEquals(wantHeaders, headers);
        assertArrayEquals(Base64.getDecoder().decode(want.get("value").asText()), record.value());
    }

    /** {@code push_id} is the last header and a version-4 UUID in canonical (8-4-4-4-12) text. */
    static void assertPushId(List<String> names, String value) {
        assertEquals("push_id", names.get(names.size() - 1), names.toString());
        assertEquals(1, names.stream().filter("push_id"::equals).count(), names.toString());
        assertTrue(value.matches("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"), value);
        assertEquals(4, UUID.fromString(value).version());
    }

    @Test
    void everyRecordBuiltHasItsOwnPushId() throws Exception {
        JsonNode first = vectors().get("cases").get(0);
        Push push = push(first.get("push"));
        List<Label> labels = labels(first.get("labels"));
        Set<String> ids = new HashSet<>();
        for (int i = 0; i < 1000; i++) {
            List<Header> headers = RecordFormat.build(push, labels).headers();
            ids.add(new String(headers.get(headers.size() - 1).value(), StandardCharsets.UTF_8));
        }
        assertEquals(1000, ids.size()); // the same push built twice is two pushes to a reader
    }

    @Test
    void eachRecordGoesToThePartitionKafkasProducerPicksForItsKey() throws Exception {
        // KafkaProducer sends a record with a key and no partition (as the forwarder's are) to
        // BuiltInPartitioner.partitionForKey unless partitioner.class or partitioner.ignore.keys
        // is set, which the plugin refuses (PluginTest).
        JsonNode partitions = vectors().get("partitions");
        List<Integer> counts = new ArrayList<>();
        partitions.get("counts").forEach(n -> counts.add(n.asInt()));
        Push template = push(vectors().get("cases").get(0).get("push"));
        int checked = 0;
        for (Map.Entry<String, JsonNode> entry : partitions.get("keys").properties()) {
            Push push = new Push(template.receivedAtMs(), UUID.fromString(entry.getKey()), false, 5000,
                    "c", "s", "v", "a", 1, "p", 1, "l", "PLAINTEXT", template.payload());
            byte[] key = RecordFormat.build(push, List.of()).key();
            for (int i = 0; i < counts.size(); i++) {
                assertEquals(entry.getValue().get(i).asInt(), BuiltInPartitioner.partitionForKey(key, counts.get(i)),
                        entry.getKey() + " of " + counts.get(i));
                checked++;
            }
        }
        assertEquals(32, checked, "the vectors file lost partition cases");
    }

    @Test
    void withoutAPushIntervalTheHeaderIsLeftOut() throws Exception {
        JsonNode first = vectors().get("cases").get(0);
        Push p = push(first.get("push"));
        Push legacy = new Push(p.receivedAtMs(), p.clientInstanceId(), p.terminating(), -1, p.clientId(),
                p.clientSoftwareName(), p.clientSoftwareVersion(), p.clientSourceAddress(), -1, p.principal(),
                p.nodeId(), p.listener(), p.securityProtocol(), p.payload());
        RecordFormat.TopicRecord record = RecordFormat.build(legacy, List.of(Label.CLIENT_SOURCE_PORT));
        List<String> names = new ArrayList<>();
        record.headers().forEach(h -> names.add(h.key()));
        assertEquals(List.of("terminating", "push_id"), names); // an unknown port is no label either
    }

    @Test
    void truncatedOrImpossibleBytesAreMalformedNeverAnotherException() {
        byte[][] bad = {
            {0x0a, 0x7f}, // length past the end
            {0x0a, 0x02, 0x0a, 0x05}, // a resource whose length runs past its parent
            {(byte) 0x80, (byte) 0x80, (byte) 0x80, (byte) 0x80, (byte) 0x80, (byte) 0x80, (byte) 0x80, (byte) 0x80,
                (byte) 0x80, (byte) 0x80, 0x01}, // an 11-byte varint
            {0x0f}, // wire type 7
            {0x00}, // field number 0
            {0x0b, 0x0b, 0x0b}, // unterminated groups
        };
        for (byte[] payload : bad) {
            assertThrows(Wire.Malformed.class,
                    () -> RecordFormat.relabel(payload, List.of(Label.NODE_ID), List.of(1L)));
        }
    }

    @Test
    void theDefaultLabelsAreTheFormatsDefault() throws Exception {
        // The same list the gateway's topic exporter adds without a labels option.
        List<Label> want = labels(vectors().get("default_labels"));
        assertEquals(want, Label.DEFAULT);
        assertEquals(want, PluginConfig.parse(Fakes.broker()).labels());
    }

    @Test
    void unknownAndRepeatedLabelNamesAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> Label.parse(List.of("client_id", "host")));
        assertThrows(IllegalArgumentException.class, () -> Label.parse(List.of("client_id", "client_id")));
        assertEquals(List.of(Label.NODE_ID, Label.PRINCIPAL), Label.parse(List.of(" node_id", "principal ", "")));
    }
}
