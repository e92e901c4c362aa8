"""Confluent's own Avro deserializer over capstan's records: Python confluent-kafka's Consumer
reads a topic, its AvroDeserializer (fastavro) decodes each key and value in Confluent's wire
format with the writer schema it fetches from the Schema Registry by the id in the record, and
the change events are applied by key, as a sink would: `c`, `r`, `u` put the `after` row, `d`
removes the key. Run by deploy/dev/avro-consumer.sh (tests/tests/debezium_converters.rs).

    avro_consumer.py BOOTSTRAP TOPIC REGISTRY_URL SENTINEL_ID [TIMEOUT_S]

Reads from the topic's start until a row whose `id` is SENTINEL_ID arrived (or TIMEOUT_S,
default 60, passed: exit 1). Prints one JSON object: the rows by canonical key
({"rows": {key: row}}), how many records were decoded, how many tombstones came, and each row
field of the value subject's latest schema ({"fields": {name: [avro type, connect.name]}}).

Values are printed canonically: decimals (Avro's decimal logical type) as plain text, bytes as
lowercase hex, records as objects. A record the deserializer refuses fails the run (exit 1).
"""

import decimal
import faulthandler
import json
import sys
import time
import uuid

from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext


def canonical(v):
    if isinstance(v, dict):
        return {k: canonical(x) for k, x in v.items()}
    if isinstance(v, list):
        return [canonical(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    return v


def row_fields(registry, topic):
    """Each field of the row in the value subject's latest schema: [type, connect.name]. The row
    record is defined at its first use, `before` (`after` names it)."""
    schema = json.loads(registry.get_latest_version(f"{topic}-value").schema.schema_str)
    before = next(f for f in schema["fields"] if f["name"] == "before")
    row = next(t for t in before["type"] if t != "null")
    out = {}
    for f in row["fields"]:
        t = f["type"]
        if isinstance(t, list):
            t = next(x for x in t if x != "null")
        if isinstance(t, dict):
            out[f["name"]] = [t.get("logicalType") or t["type"], t.get("connect.name")]
        else:
            out[f["name"]] = [t, None]
    return out


def main():
    bootstrap, topic, url, sentinel = sys.argv[1:5]
    timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 60.0
    # a call that blocks past the deadline (broker, registry, close) prints every thread's stack
    # to stderr and exits 1, so a hang names its place instead of waiting for an outer kill
    faulthandler.dump_traceback_later(timeout + 60, exit=True)
    # without a timeout the registry client waits for an answer forever
    registry = SchemaRegistryClient({"url": url, "timeout": 10})
    deserialize = AvroDeserializer(registry)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"avro-consumer-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    print(f"avro_consumer: subscribed to {topic}", file=sys.stderr, flush=True)
    rows, decoded, tombstones, seen = {}, 0, 0, False
    deadline = time.monotonic() + timeout
    try:
        while not seen:
            if time.monotonic() > deadline:
                print(f"avro_consumer: no row with id {sentinel} within {timeout}s", file=sys.stderr)
                sys.exit(1)
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise RuntimeError(str(msg.error()))
            key = deserialize(msg.key(), SerializationContext(topic, MessageField.KEY))
            decoded += 1
            if msg.value() is None:
                tombstones += 1
                continue
            value = deserialize(msg.value(), SerializationContext(topic, MessageField.VALUE))
            k = json.dumps(canonical(key), sort_keys=True)
            if value["op"] == "d":
                rows.pop(k, None)
            else:
                rows[k] = canonical(value["after"])
                seen = str(value["after"]["id"]) == sentinel
    finally:
        print(f"avro_consumer: {decoded} records decoded, closing", file=sys.stderr, flush=True)
        consumer.close()
    print(json.dumps({"rows": rows, "converted": decoded, "tombstones": tombstones,
                      "fields": row_fields(registry, topic)}))


if __name__ == "__main__":
    main()
