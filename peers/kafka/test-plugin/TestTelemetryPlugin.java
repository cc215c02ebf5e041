// The launcher's minimal telemetry plugin: with one on `metric.reporters` the broker advertises
// GetTelemetrySubscriptions (71) and PushTelemetry (72). It keeps nothing, unless
// `test.telemetry.record.file` names a file: then it appends one JSON line a push (instance id,
// terminating flag, content type, push interval, principal, listener, client id, payload in
// base64), so a test sees exactly what Apache Kafka hands a plugin. Test-only: it writes on the
// request thread, which a real plugin must never do (see broker-plugin/).
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;

public class TestTelemetryPlugin implements MetricsReporter, ClientTelemetryExporterProvider {
    private volatile String recordFile;

    @Override
    public void configure(Map<String, ?> configs) {
        Object file = configs.get("test.telemetry.record.file");
        recordFile = file == null ? null : file.toString();
    }

    @Override
    public void init(List<KafkaMetric> metrics) {}

    @Override
    public void metricChange(KafkaMetric metric) {}

    @Override
    public void metricRemoval(KafkaMetric metric) {}

    @Override
    public void close() {}

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return this::record;
    }

    private synchronized void record(ClientTelemetryContext context, ClientTelemetryPayload payload) {
        String file = recordFile;
        if (file == null) {
            return;
        }
        ByteBuffer data = payload.data().duplicate();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        AuthorizableRequestContext request = context.authorizableRequestContext();
        String line = "{\"instance_id\":\"" + payload.clientInstanceId()
                + "\",\"terminating\":" + payload.isTerminating()
                + ",\"content_type\":\"" + payload.contentType()
                + "\",\"push_interval_ms\":" + context.pushIntervalMs()
                + ",\"principal\":\"" + json(String.valueOf(request.principal()))
                + "\",\"listener\":\"" + request.listenerName()
                + "\",\"security_protocol\":\"" + request.securityProtocol()
                + "\",\"client_id\":\"" + json(request.clientId())
                + "\",\"client_address\":\"" + request.clientAddress().getHostAddress()
                + "\",\"data\":\"" + Base64.getEncoder().encodeToString(bytes) + "\"}\n";
        try (FileOutputStream out = new FileOutputStream(file, true)) {
            out.write(line.getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            // A test plugin that cannot write leaves the push unrecorded; it never throws.
        }
    }

    private static String json(String text) {
        StringBuilder out = new StringBuilder();
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }
}
