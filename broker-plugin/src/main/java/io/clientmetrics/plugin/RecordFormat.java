package io.clientmetrics.plugin;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * One push as one Kafka record, in the format the gateway's topic exporter writes too
 * (docs/record-format.md; both are checked against tests/data/record-format/vectors.json).
 *
 * <ul>
 *   <li>key: the client instance id, canonical UUID text (8-4-4-4-12), UTF-8;
 *   <li>value: an OTLP {@code ExportMetricsServiceRequest}: the payload's {@code ResourceMetrics},
 *       in order, each resource's attributes without those named like a chosen label, then the
 *       chosen labels in the configured order (integer labels as {@code int_value});
 *   <li>headers: the chosen labels (name, value as UTF-8 text), then {@code terminating}
 *       ({@code true}/{@code false}) and {@code push_interval_ms} (when the broker says it);
 *   <li>timestamp: when the push was received, epoch milliseconds.
 * </ul>
 */
final class RecordFormat {
    static final String TERMINATING = "terminating";
    static final String PUSH_INTERVAL_MS = "push_interval_ms";

    // Field numbers (opentelemetry/proto/.../metrics.proto, resource.proto, common.proto).
    private static final int RESOURCE_METRICS = 1; // MetricsData and ExportMetricsServiceRequest
    private static final int RESOURCE = 1; // ResourceMetrics.resource
    private static final int ATTRIBUTES = 1; // Resource.attributes
    private static final int KEY = 1; // KeyValue.key
    private static final int VALUE = 2; // KeyValue.value
    private static final int STRING_VALUE = 1; // AnyValue.string_value
    private static final int INT_VALUE = 3; // AnyValue.int_value

    private RecordFormat() {}

    /** A record ready for a producer (the topic is the forwarder's). */
    record TopicRecord(byte[] key, byte[] value, List<org.apache.kafka.common.header.Header> headers, long timestampMs) {}

    /** One record header. */
    record Header(String key, byte[] value) implements org.apache.kafka.common.header.Header {}

    static TopicRecord build(Push push, List<Label> labels) throws Wire.Malformed {
        List<org.apache.kafka.common.header.Header> headers = new ArrayList<>(labels.size() + 2);
        List<Object> values = new ArrayList<>(labels.size());
        List<Label> present = new ArrayList<>(labels.size());
        for (Label label : labels) {
            Object value = push.value(label);
            if (value != null) {
                present.add(label);
                values.add(value);
                headers.add(new Header(label.key, utf8(value.toString())));
            }
        }
        headers.add(new Header(TERMINATING, utf8(Boolean.toString(push.terminating()))));
        if (push.pushIntervalMs() >= 0) {
            headers.add(new Header(PUSH_INTERVAL_MS, utf8(Integer.toString(push.pushIntervalMs()))));
        }
        byte[] value = relabel(push.payload(), present, values);
        byte[] key = utf8(push.clientInstanceId().toString());
        return new TopicRecord(key, value, List.copyOf(headers), push.receivedAtMs());
    }

    /** The payload ({@code MetricsData}) as an {@code ExportMetricsServiceRequest} with the labels. */
    static byte[] relabel(byte[] payload, List<Label> labels, List<Object> values) throws Wire.Malformed {
        byte[][] names = new byte[labels.size()][];
        Wire.Writer added = new Wire.Writer(32 * labels.size());
        for (int i = 0; i < labels.size(); i++) {
            names[i] = labels.get(i).utf8;
            added.field(ATTRIBUTES, keyValue(labels.get(i), values.get(i)));
        }
        Wire.Writer out = new Wire.Writer(payload.length + 16 + added.size() * 4);
        Wire.Reader in = new Wire.Reader(payload, 0, payload.length);
        while (in.more()) {
            int tag = in.tag();
            if (tag == (RESOURCE_METRICS << 3 | Wire.LEN)) {
                int length = in.length();
                out.field(RESOURCE_METRICS, resourceMetrics(payload, in.pos, length, names, added));
                in.pos += length;
            } else {
                in.skip(tag & 7); // MetricsData has no other field: dropped, as the gateway does
            }
        }
        return out.toByteArray();
    }

    /** One {@code ResourceMetrics}: its resource rewritten first, its other fields as they were. */
    private static Wire.Writer resourceMetrics(
            byte[] buf, int offset, int length, byte[][] names, Wire.Writer added) throws Wire.Malformed {
        Wire.Writer resource = new Wire.Writer(256);
        Wire.Writer rest = new Wire.Writer(length);
        Wire.Reader in = new Wire.Reader(buf, offset, offset + length);
        while (in.more()) {
            int start = in.pos;
            int tag = in.tag();
            if (tag == (RESOURCE << 3 | Wire.LEN)) {
                // Repeated occurrences of a message field merge: their bytes concatenate.
                int size = in.length();
                resource.raw(buf, in.pos, size);
                in.pos += size;
            } else {
                in.skip(tag & 7);
                rest.raw(buf, start, in.pos - start);
            }
        }
        byte[] merged = resource.toByteArray();
        Wire.Writer out = new Wire.Writer(rest.size() + merged.length + added.size() + 8);
        out.field(RESOURCE, resource(merged, names, added));
        out.raw(rest);
        return out;
    }

    /** A {@code Resource}: attributes named like a label dropped, the labels appended. */
    private static Wire.Writer resource(byte[] buf, byte[][] names, Wire.Writer added) throws Wire.Malformed {
        Wire.Writer attributes = new Wire.Writer(buf.length + added.size());
        Wire.Writer rest = new Wire.Writer(16);
        Wire.Reader in = new Wire.Reader(buf, 0, buf.length);
        while (in.more()) {
            int start = in.pos;
            int tag = in.tag();
            if (tag == (ATTRIBUTES << 3 | Wire.LEN)) {
                int size = in.length();
                boolean replaced = isLabel(buf, in.pos, in.pos + size, names);
                in.pos += size;
                if (!replaced) {
                    attributes.raw(buf, start, in.pos - start);
                }
            } else {
                in.skip(tag & 7);
                rest.raw(buf, start, in.pos - start);
            }
        }
        attributes.raw(added);
        attributes.raw(rest);
        return attributes;
    }

    /**
     * Whether a {@code KeyValue}'s key (the last one, as protobuf reads a repeated scalar
     * field) is one of the label names: compared as UTF-8 bytes, never decoded.
     */
    private static boolean isLabel(byte[] buf, int offset, int limit, byte[][] names) throws Wire.Malformed {
        Wire.Reader in = new Wire.Reader(buf, offset, limit);
        int keyStart = 0;
        int keyEnd = 0;
        while (in.more()) {
            int tag = in.tag();
            if (tag == (KEY << 3 | Wire.LEN)) {
                int size = in.length();
                keyStart = in.pos;
                keyEnd = in.pos + size;
                in.pos += size;
            } else {
                in.skip(tag & 7);
            }
        }
        for (byte[] name : names) {
            if (Arrays.equals(buf, keyStart, keyEnd, name, 0, name.length)) {
                return true;
            }
        }
        return false;
    }

    private static Wire.Writer keyValue(Label label, Object value) {
        Wire.Writer any = new Wire.Writer(16);
        if (label.integer) {
            any.tag(INT_VALUE, Wire.VARINT);
            any.varint((Long) value);
        } else {
            byte[] text = utf8((String) value);
            any.field(STRING_VALUE, text, 0, text.length);
        }
        Wire.Writer kv = new Wire.Writer(any.size() + label.utf8.length + 4);
        kv.field(KEY, label.utf8, 0, label.utf8.length);
        kv.field(VALUE, any);
        return kv;
    }

    static byte[] utf8(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }
}
