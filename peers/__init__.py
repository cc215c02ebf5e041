"""The real peers the tests and benchmarks drive: Apache Kafka 4.4, its Java client, franz-go."""
