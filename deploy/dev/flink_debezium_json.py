#!/usr/bin/env python3
"""A strict reader of Debezium JSON change events by the rules of Flink's `debezium-json`
format, written from Flink's documentation and behaviour (no Flink code): it turns a topic's
records into a Flink changelog (+I, -U, +U, -D) and applies it to a table, as a Flink job
reading the topic with `'format' = 'debezium-json'` would, with parse errors NOT ignored.

    flink_debezium_json.py [--schema-include] RECORDS.json
    flink_debezium_json.py --self-test

RECORDS.json: {"records": [{"key": base64 or null, "value": base64 or null}, ...]} in topic
order (tests/tests/flink_debezium_json.rs writes it from a live capstan topic).

Rules (Flink's debezium-json deserialization):
- a null or empty value (a tombstone) produces nothing;
- the value must be a JSON object; with --schema-include (Flink's
  'debezium-json.schema-include' = 'true') the change event is the object's "payload";
- "op" must be "c" or "r" (+I of "after"), "u" (-U of "before", then +U of "after") or "d"
  (-D of "before"); "after" must be an object for c/r/u, "before" for u/d (Flink refuses an
  update or delete whose "before" is null);
- anything else — no "op", an unknown "op", a missing image, a value that is not JSON — fails
  the whole run: "Corrupt Debezium JSON message", exit 1 (Flink fails the job).

The table is a multiset of rows, as Flink's changelog without a primary key: -U and -D must
retract a row equal to the one present (else the changelog is inconsistent: exit 1). The output
(stdout) is {"rows": [row, ...] sorted, "changes": {"+I": n, "-U": n, "+U": n, "-D": n},
"tombstones": n}. Row values are printed as they were in the JSON; nothing is logged but counts
and the reason of a failure (never a row value).
"""

from __future__ import annotations

import base64
import json
import sys


class CorruptMessage(Exception):
    """Flink's 'Corrupt Debezium JSON message': the job fails."""


def changelog(raw: bytes | None, schema_include: bool) -> list[tuple[str, dict]]:
    """The changelog rows of one record value, by Flink's debezium-json rules."""
    if raw is None or len(raw) == 0:
        return []
    try:
        doc = json.loads(raw)
    except ValueError:
        raise CorruptMessage("Corrupt Debezium JSON message: not JSON") from None
    if not isinstance(doc, dict):
        raise CorruptMessage("Corrupt Debezium JSON message: not a JSON object")
    if schema_include:
        if "payload" not in doc or "schema" not in doc:
            raise CorruptMessage("Corrupt Debezium JSON message: no schema/payload "
                                 "while debezium-json.schema-include is true")
        doc = doc["payload"]
        if not isinstance(doc, dict):
            raise CorruptMessage("Corrupt Debezium JSON message: payload is not an object")
    elif "schema" in doc and "payload" in doc:
        raise CorruptMessage("Corrupt Debezium JSON message: it has a schema; enable "
                             "debezium-json.schema-include")
    op = doc.get("op")
    before, after = doc.get("before"), doc.get("after")

    def image(v, name):
        if not isinstance(v, dict):
            raise CorruptMessage(f"Corrupt Debezium JSON message: op '{op}' without '{name}'")
        return v

    if op in ("c", "r"):
        return [("+I", image(after, "after"))]
    if op == "u":
        return [("-U", image(before, "before")), ("+U", image(after, "after"))]
    if op == "d":
        return [("-D", image(before, "before"))]
    raise CorruptMessage(f"Corrupt Debezium JSON message: unknown \"op\" value {op!r}")


class Table:
    """A multiset of rows, changed by a Flink changelog."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.changes = {"+I": 0, "-U": 0, "+U": 0, "-D": 0}

    def apply(self, kind: str, row: dict) -> None:
        key = json.dumps(row, sort_keys=True)
        self.changes[kind] += 1
        if kind in ("+I", "+U"):
            self.rows[key] = self.rows.get(key, 0) + 1
            return
        n = self.rows.get(key, 0)
        if n == 0:
            raise CorruptMessage(f"inconsistent changelog: {kind} of a row the table does not hold")
        if n == 1:
            del self.rows[key]
        else:
            self.rows[key] = n - 1

    def result(self) -> list[dict]:
        out = []
        for key, n in sorted(self.rows.items()):
            out.extend([json.loads(key)] * n)
        return out


def read(records: list[dict], schema_include: bool) -> dict:
    table = Table()
    tombstones = 0
    for i, rec in enumerate(records):
        raw = None if rec.get("value") is None else base64.b64decode(rec["value"])
        if not raw:
            tombstones += 1
        try:
            for kind, row in changelog(raw, schema_include):
                table.apply(kind, row)
        except CorruptMessage as e:
            raise CorruptMessage(f"record {i}: {e}") from None
    return {"rows": table.result(), "changes": table.changes, "tombstones": tombstones}


def self_test() -> None:
    """The reader refuses what Flink refuses, and reads what Flink reads."""
    def refused(value: dict | list | str, schema_include: bool = False) -> bool:
        raw = (value if isinstance(value, str) else json.dumps(value)).encode()
        try:
            changelog(raw, schema_include)
        except CorruptMessage:
            return True
        return False

    # capstan's earlier snapshot-complete marker on a table topic: no "op"
    assert refused({"snapshot_complete": {"db": "shop", "table": "orders", "rows": 21}})
    assert refused({"before": None, "after": {"id": 1}, "op": "x"})
    assert refused({"before": None, "after": None, "op": "c"})
    assert refused({"before": None, "after": {"id": 1}, "op": "u"})
    assert refused({"before": None, "after": None, "op": "d"})
    assert refused("not json")
    assert refused([1, 2])
    assert refused({"schema": {}, "payload": {"op": "c", "after": {"id": 1}}})
    assert refused({"op": "c", "after": {"id": 1}}, schema_include=True)
    assert changelog(None, False) == [] and changelog(b"", True) == []
    assert changelog(b'{"before":null,"after":{"id":1},"op":"r"}', False) == [("+I", {"id": 1})]
    assert changelog(b'{"schema":{},"payload":{"before":{"id":1},"after":{"id":2},"op":"u"}}',
                     True) == [("-U", {"id": 1}), ("+U", {"id": 2})]
    t = Table()
    t.apply("+I", {"id": 1})
    try:
        t.apply("-D", {"id": 2})
        raise AssertionError("a retraction of an absent row was accepted")
    except CorruptMessage:
        pass
    print("flink_debezium_json: self-test passed", file=sys.stderr)


def main(argv: list[str]) -> int:
    if argv == ["--self-test"]:
        self_test()
        return 0
    schema_include = "--schema-include" in argv
    files = [a for a in argv if a != "--schema-include"]
    if len(files) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(files[0], encoding="utf-8") as f:
        records = json.load(f)["records"]
    try:
        result = read(records, schema_include)
    except CorruptMessage as e:
        print(f"flink_debezium_json: {e}", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
