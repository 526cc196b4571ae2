"""Queue-workload data anomalies (Jepsen's Kafka checker names), per key after one shuffle."""
