// A tiny Java producer for the broker plugin's tests: `JavaPush PROPERTIES_FILE SECONDS` sends
// a record every 100 ms with kafka-clients 4.4 (KIP-714 telemetry on by default) for SECONDS from
// when it has its telemetry subscription, then closes and prints its client instance id.
import java.io.FileReader;
import java.io.IOException;
import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaPush {
    public static void main(String[] args) throws IOException, InterruptedException {
        Properties props = new Properties();
        try (FileReader in = new FileReader(args[0])) {
            props.load(in);
        }
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
            producer.send(new ProducerRecord<>("orders", "k", "v"));
            // Known once the broker gave the client its subscription: time starts then.
            String instance = producer.clientInstanceId(Duration.ofSeconds(60)).toString();
            long until = System.currentTimeMillis() + (long) (Double.parseDouble(args[1]) * 1000);
            while (System.currentTimeMillis() < until) {
                producer.send(new ProducerRecord<>("orders", "k", "v"));
                Thread.sleep(100);
            }
            System.out.println(instance);
        }
    }
}
