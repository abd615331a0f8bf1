"""Hypothesis strategies for the differential fuzzer's Debezium SMTs (ExtractChangedRecordState, the outbox
EventRouter, ByLogicalTableRouter): :func:`tests.support.fuzz_records.change_events` whose rows also have the
columns of Debezium's outbox table (:func:`outbox_columns`) and whose records are on the topics of sharded tables
(:data:`SHARD_TOPICS`), so that one batch serves ExtractNewRecordState's chains and these SMTs' chains.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import strategies as st

from tests.support.fuzz_records import CDC_TOPIC, NESTED, TIMESTAMP, change_events

#: the topics of a table sharded in two (Debezium's topic-routing page: ``customers_shard1``, ``..._shard2``) and
#: a topic that ByLogicalTableRouter's regexes of the chains do not match
SHARD_TOPICS = (CDC_TOPIC, "srv.inventory.customers_shard1", "srv.inventory.customers_shard2")
MICRO_TIMESTAMP = {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1}

#: an outbox event's payload as text: JSON objects and arrays, empty text, text that is no JSON
_PAYLOAD_TEXT = st.one_of(NESTED.map(json.dumps), st.just(""), st.sampled_from(["abc", " ", "{"]))


def _present(draw: st.DrawFn) -> bool:
    """A column of the outbox table is there, but in one example in eight (the simplest example has it)."""
    return draw(st.integers(0, 7)) != 7


@st.composite
def outbox_columns(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, st.SearchStrategy[Any]]]:
    """The columns of Debezium's outbox table as its PostgreSQL connector writes them (``id uuid``,
    ``aggregatetype``, ``aggregateid``, ``type``, ``payload jsonb`` or ``bytea``; an extra ``tenant`` and a
    ``created_at`` timestamp of millisecond or microsecond precision), each left out now and then: (their field
    schemas, a value strategy per column)."""
    payload_bytes = draw(st.booleans())
    micros = draw(st.booleans())
    columns: dict[str, tuple[dict[str, Any], st.SearchStrategy[Any]]] = {
        "id": ({"type": "string", "name": "io.debezium.data.Uuid", "version": 1}, st.uuids().map(str)),
        "aggregatetype": ({"type": "string"}, st.sampled_from(["order", "customer", "Order"])),
        "aggregateid": ({"type": "string"}, st.text(max_size=3)),
        "type": ({"type": "string"}, st.sampled_from(["OrderCreated", "OrderLineUpdated", "Shipped"])),
        "payload": (({"type": "bytes"}, _PAYLOAD_TEXT.map(lambda t: base64.b64encode(t.encode()).decode()))
                    if payload_bytes else
                    ({"type": "string", "name": "io.debezium.data.Json", "version": 1}, _PAYLOAD_TEXT)),
        "tenant": ({"type": "string"}, st.sampled_from(["t1", "t2"])),
        "created_at": (MICRO_TIMESTAMP, st.integers(0, 4 * 10 ** 15)) if micros else
                      (TIMESTAMP, st.integers(0, 4 * 10 ** 12)),
    }
    schemas = [{**schema, "field": name, "optional": name != "id" and draw(st.booleans())}
               for name, (schema, _) in columns.items() if _present(draw)]
    return schemas, {name: values for name, (_, values) in columns.items()}


def debezium_events(max_records: int = 6, min_records: int = 1) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Change events of the ``cdc`` family: rows of :data:`tests.support.fuzz_records.FIELDS` and the outbox
    table's columns, on :data:`SHARD_TOPICS`."""
    return change_events(max_records=max_records, min_records=min_records, columns=outbox_columns(),
                         topics=SHARD_TOPICS)
