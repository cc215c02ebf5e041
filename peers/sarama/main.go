// A Sarama (github.com/IBM/sarama) producer as a test peer: a Go client with no
// KIP-714 support. It sends -messages records to -topic as -client-id, closes,
// and prints JSON lines ("done", "exit") on stdout.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/IBM/sarama"
)

func emit(fields map[string]any) {
	line, _ := json.Marshal(fields)
	fmt.Println(string(line))
}

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "bootstrap servers")
	clientID := flag.String("client-id", "sarama-peer", "client.id")
	topic := flag.String("topic", "sarama-peer", "topic to produce to")
	messages := flag.Int("messages", 10, "records to produce")
	flag.Parse()

	config := sarama.NewConfig()
	config.ClientID = *clientID
	// ApiVersions v3 (software name and version) needs a protocol version of 2.4 or later.
	config.Version = sarama.V3_6_0_0
	config.Producer.Return.Successes = true
	config.Producer.RequiredAcks = sarama.WaitForAll
	producer, err := sarama.NewSyncProducer([]string{*bootstrap}, config)
	if err != nil {
		emit(map[string]any{"event": "error", "error": err.Error()})
		os.Exit(1)
	}
	sent := 0
	for i := 0; i < *messages; i++ {
		msg := &sarama.ProducerMessage{Topic: *topic, Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))}
		if _, _, err := producer.SendMessage(msg); err != nil {
			emit(map[string]any{"event": "error", "error": err.Error()})
			continue
		}
		sent++
	}
	emit(map[string]any{"event": "done", "sent": sent})
	if err := producer.Close(); err != nil {
		emit(map[string]any{"event": "error", "error": err.Error()})
	}
	emit(map[string]any{"event": "exit"})
}
