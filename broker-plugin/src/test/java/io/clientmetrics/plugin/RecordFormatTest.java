package io.clientmetrics.plugin;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.UUID;
import java.util.stream.Stream;
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
        for (Header h : record.headers()) {
            headers.add(h.key() + "=" + new String(h.value(), StandardCharsets.UTF_8));
        }
        assertEquals(wantHeaders, headers);
        assertArrayEquals(Base64.getDecoder().decode(want.get("value").asText()), record.value());
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
        assertEquals(List.of("terminating"), names); // an unknown port is no label either
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
    void unknownAndRepeatedLabelNamesAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> Label.parse(List.of("client_id", "host")));
        assertThrows(IllegalArgumentException.class, () -> Label.parse(List.of("client_id", "client_id")));
        assertEquals(List.of(Label.NODE_ID, Label.PRINCIPAL), Label.parse(List.of(" node_id", "principal ", "")));
    }
}
