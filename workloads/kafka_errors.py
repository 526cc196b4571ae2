"""Which Kafka client errors prove that an operation did not happen.

Getting this wrong in the `fail` direction makes checkers report lost writes that were merely
unknown, so the definite sets are small and everything else is indefinite (`info`).
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

# Produce errors the broker returns before appending anything, and local rejections.
DEFINITE_PRODUCE = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_REQUIRED_ACKS,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError._INVALID_ARG,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._QUEUE_FULL,
    }
)


def describe(err: KafkaError | Exception | None) -> str:
    if err is None:
        return "unknown error"
    if isinstance(err, KafkaException) and err.args and isinstance(err.args[0], KafkaError):
        err = err.args[0]
    if isinstance(err, KafkaError):
        return f"{err.name()}: {err.str()}"
    return f"{type(err).__name__}: {err}"


def kafka_error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def produce_is_definite(err: KafkaError) -> bool:
    return err.code() in DEFINITE_PRODUCE
