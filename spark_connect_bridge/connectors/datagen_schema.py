"""Datagen's own schemas: an Avro schema with ``arg.properties`` (as Confluent's avro-random-generator reads them)
compiled into vectorised column generators (numpy/pyarrow per batch, no per-record Python).

Supported annotations: ``options`` (a list, on any type, records included), ``range`` (numbers: ``min``
inclusive, ``max`` exclusive), ``length`` (strings, bytes, arrays, maps: a number or ``{min, max}``, max
exclusive; default ``{min: 8, max: 16}``), ``regex`` (strings; literals, classes, groups, alternation and
repeats, an unbounded repeat capped at min + 8), ``iteration`` (numbers: ``start``, ``step``, ``restart``;
booleans alternate from ``start``), ``odds`` (booleans), ``keys`` (maps), ``prefix``/``suffix`` (strings).
Types: primitives, record (struct), enum (string), array, map, a union of ``null`` and one type (nullable; null
with the generator's 1 in 2), ``timestamp-millis`` (timestamp), ``date`` (date; both 1970-2100 without a range),
``decimal`` on bytes (decimal(p, s), ``range``/``options``). Numbers without range: int and long over a wide
range, float and double in [0, 1); strings without regex/options: word characters, length 8 to 15.
Anything else is refused at validation with the field's path and the reason (:class:`SchemaError`).

A schema compiles once into a tree of functions ``gen(g) -> pyarrow.Array`` where ``g`` is datagen's counter-based
``_Gen`` (record ``n`` of task ``i`` is a pure function of the seed, ``i`` and ``n``); each generator node takes
its own random stream ids, assigned in schema order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["QUICKSTART_FILES", "CompiledSchema", "SchemaError", "compile_schema", "load_schema_file"]

#: Confluent's quickstarts (Quickstart.java): lower-case name -> (schema file, default key field).
QUICKSTART_FILES: dict[str, tuple[str, str]] = {
    "clickstream_codes": ("clickstream_codes_schema.avro", "code"),
    "clickstream": ("clickstream_schema.avro", "ip"),
    "clickstream_users": ("clickstream_users_schema.avro", "user_id"),
    "orders": ("orders_schema.avro", "orderid"),
    "ratings": ("ratings_schema.avro", "rating_id"),
    "users": ("users_schema.avro", "userid"),
    "users_": ("users_array_map_schema.avro", "userid"),
    "pageviews": ("pageviews_schema.avro", "viewtime"),
    "stock_trades": ("stock_trades_schema.avro", "symbol"),
    "inventory": ("inventory.avro", "id"),
    "product": ("product.avro", "id"),
    "purchases": ("purchase.avro", "id"),
    "transactions": ("transactions.avro", "transaction_id"),
    "stores": ("stores.avro", "store_id"),
    "credit_cards": ("credit_cards.avro", "card_id"),
    "campaign_finance": ("campaign_finance.avro", "candidate_id"),
    "fleet_mgmt_description": ("fleet_mgmt_description.avro", "vehicle_id"),
    "fleet_mgmt_location": ("fleet_mgmt_location.avro", "vehicle_id"),
    "fleet_mgmt_sensors": ("fleet_mgmt_sensors.avro", "vehicle_id"),
    "pizza_orders": ("pizza_orders.avro", "store_id"),
    "pizza_orders_completed": ("pizza_orders_completed.avro", "store_id"),
    "pizza_orders_cancelled": ("pizza_orders_cancelled.avro", "store_id"),
    "insurance_offers": ("insurance_offers.avro", "offer_id"),
    "insurance_customers": ("insurance_customers.avro", "customer_id"),
    "insurance_customer_activity": ("insurance_customer_activity.avro", "activity_id"),
    "gaming_games": ("gaming_games.avro", "id"),
    "gaming_players": ("gaming_players.avro", "player_id"),
    "gaming_player_activity": ("gaming_player_activity.avro", "player_id"),
    "payroll_employee": ("payroll_employee.avro", "employee_id"),
    "payroll_employee_location": ("payroll_employee_location.avro", "employee_id"),
    "payroll_bonus": ("payroll_bonus.avro", "employee_id"),
    "syslog_logs": ("syslog_logs.avro", "host"),
    "device_information": ("device_information.avro", "device_ip"),
    "siem_logs": ("siem_logs.avro", "hostname"),
    "shoes": ("shoes.avro", "id"),
    "shoe_customers": ("shoe_customers.avro", "id"),
    "shoe_orders": ("shoe_orders.avro", "order_id"),
    "shoe_clickstream": ("shoe_clickstream.avro", "product_id"),
}

_INT = (-(2**31), 2**31)
_LONG = (-(2**62), 2**62)  # the generator's modulus stays inside uint64
_MS_TO_2100 = (0, 4_102_444_800_000)  # a date or timestamp without range: 1970 to 2100
_DAYS_TO_2100 = (0, 47_482)
_UNBOUNDED_REPEAT = 8
_PRINTABLE = [chr(c) for c in range(32, 127)]
_WORD = [chr(c) for c in [*range(48, 58), *range(65, 91), *range(97, 123)]] + ["_"]


_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)


class SchemaError(ValueError):
    """A schema (or one of its ``arg.properties``) we cannot generate; the message names the field."""


Gen = Callable[[Any], Any]


@dataclass(frozen=True)
class CompiledSchema:
    spark_type: Any  # the value's StructType
    arrow_type: Any
    gen: Gen  # _Gen -> pyarrow.StructArray

    def columns(self, g: Any) -> dict[str, Any]:
        arr = self.gen(g)
        return {self.arrow_type.field(i).name: arr.field(i) for i in range(arr.type.num_fields)}


def load_schema_file(name: str) -> str:
    """The text of ``schema.filename``: the path if it exists, else the shipped quickstart file of that name
    (datagen falls back to its classpath resources)."""
    path = Path(name)
    if path.is_file():
        return path.read_text(encoding="utf-8")
    base = resources.files(__package__).joinpath("datagen_schemas")
    res = base.joinpath(Path(name).name)
    if Path(name).name == name and res.is_file():
        return res.read_text(encoding="utf-8")
    raise SchemaError("Unable to find the schema file")


class _Compiler:
    def __init__(self) -> None:
        self.stream = 0
        self.names: dict[str, Any] = {}

    def sid(self) -> int:
        self.stream += 1
        return self.stream

    def compile(self, schema: Any, path: str) -> tuple[Any, Any, Gen]:
        import pyarrow as pa
        from pyspark.sql import types as T

        if isinstance(schema, str):
            if schema in self.names:
                raise SchemaError(f"{path}: recursive or repeated named type {schema} is not supported")
            schema = {"type": schema}
        if isinstance(schema, list):
            return self._union(schema, path)
        if not isinstance(schema, dict):
            raise SchemaError(f"{path}: not an Avro schema: {schema!r}")
        typ = schema.get("type")
        spark: Any
        arrow: Any
        if isinstance(typ, (dict, list)):
            return self.compile(typ, path)
        props = schema.get("arg.properties") or {}
        if not isinstance(props, dict):
            raise SchemaError(f"{path}: arg.properties must be an object")
        logical = schema.get("logicalType")
        if logical == "decimal" and typ == "bytes":
            return self._decimal(schema, props, path)
        if logical not in (None, "timestamp-millis", "date"):
            raise SchemaError(f"{path}: logicalType {logical} is not supported by this datagen")
        if typ == "record":
            if "name" in schema:
                self.names[str(schema["name"])] = schema
            fields = []
            for f in schema.get("fields", []):
                fields.append((f["name"], *self.compile(f["type"], f"{path}.{f['name']}" if path else f["name"])))
            spark = T.StructType([T.StructField(n, s) for n, s, _, _ in fields])
            arrow = pa.struct([pa.field(n, a) for n, _, a, _ in fields])

            def record(g: Any, fields: list[Any] = fields) -> Any:
                return pa.StructArray.from_arrays([gen(g) for _, _, _, gen in fields], names=[n for n, *_ in fields])
            gen: Gen = record
        elif typ == "enum":
            spark, arrow = T.StringType(), pa.string()
            gen = self._choice([str(s) for s in schema.get("symbols", [])], pa.string(), path)
        elif typ == "array":
            item_spark, item_arrow, item_gen = self.compile(schema.get("items"), f"{path}[]")
            spark, arrow = T.ArrayType(item_spark), pa.list_(item_arrow)
            gen = self._sized(props, path, lambda offsets, vals, _k: pa.ListArray.from_arrays(offsets, vals),
                              item_gen, None)
        elif typ == "map":
            val_spark, val_arrow, val_gen = self.compile(schema.get("values"), f"{path}{{}}")
            keys = props.get("keys") or {}
            _, _, key_gen = self.compile({"type": "string", "arg.properties": keys}, f"{path}.keys")
            spark, arrow = T.MapType(T.StringType(), val_spark), pa.map_(pa.string(), val_arrow)
            gen = self._sized(props, path, lambda offsets, vals, ks: pa.MapArray.from_arrays(offsets, ks, vals),
                              val_gen, key_gen)
        elif typ == "null":
            spark, arrow = T.NullType(), pa.null()

            def nulls(g: Any) -> Any:
                return pa.nulls(len(g.idx))
            gen = nulls
        elif typ in ("int", "long", "float", "double"):
            if logical == "timestamp-millis":
                spark, arrow = T.TimestampType(), pa.timestamp("ms", tz="UTC")
            elif logical == "date":
                spark, arrow = T.DateType(), pa.date32()
            else:
                spark, arrow = {"int": (T.IntegerType(), pa.int32()), "long": (T.LongType(), pa.int64()),
                                "float": (T.FloatType(), pa.float32()),
                                "double": (T.DoubleType(), pa.float64())}[typ]
            gen = self._number(typ, props, path, arrow)
        elif typ == "boolean":
            spark, arrow = T.BooleanType(), pa.bool_()
            gen = self._boolean(props, path)
        elif typ in ("string", "bytes"):
            spark, arrow = (T.StringType(), pa.string()) if typ == "string" else (T.BinaryType(), pa.binary())
            gen = self._string(props, path, arrow)
        else:
            raise SchemaError(f"{path}: Avro type {typ!r} is not supported by this datagen")
        if "options" in props and typ not in ("int", "long", "float", "double", "boolean", "string", "bytes"):
            gen = self._choice(props["options"], arrow, path)
        return spark, arrow, gen

    def _union(self, branches: list[Any], path: str) -> tuple[Any, Any, Gen]:
        import pyarrow as pa

        kinds = [b if isinstance(b, str) else b.get("type") if isinstance(b, dict) else None for b in branches]
        others = [i for i, k in enumerate(kinds) if k != "null"]
        if len(others) != 1:
            raise SchemaError(f"{path}: a union other than [null, T] is not supported by this datagen")
        spark, arrow, inner = self.compile(branches[others[0]], path)
        if len(branches) == 1:
            return spark, arrow, inner
        s, null_at = self.sid(), kinds.index("null")

        def union(g: Any) -> Any:
            pick = g.ints(s, 0, len(branches) - 1)
            return pa.compute.if_else(pa.array(pick == null_at), pa.nulls(len(pick), arrow), inner(g))
        return spark, arrow, union

    def _choice(self, options: Any, arrow: Any, path: str) -> Gen:
        import pyarrow as pa

        if not isinstance(options, list) or not options:
            raise SchemaError(f"{path}: arg.properties options must be a non-empty list (options from a file are "
                              "not supported)")
        try:
            values = pa.array(options, type=arrow)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as e:
            raise SchemaError(f"{path}: arg.properties options do not fit the type: {e}") from None
        s = self.sid()

        def choice(g: Any) -> Any:
            return values.take(pa.array(g.ints(s, 0, len(values) - 1)))
        return choice

    def _number(self, typ: str, props: dict[str, Any], path: str, arrow: Any) -> Gen:
        import numpy as np
        import pyarrow as pa

        if "options" in props:
            return self._choice(props["options"], arrow, path)
        integral = typ in ("int", "long")
        cast = {"int": np.int32, "long": np.int64, "float": np.float32, "double": np.float64}[typ]

        def out(values: Any) -> Any:
            return pa.array(values.astype(cast)).cast(arrow)
        if "iteration" in props:
            it = props["iteration"]
            if not isinstance(it, dict) or "start" not in it:
                raise SchemaError(f"{path}: arg.properties iteration needs a start")
            start, restart = it["start"], it.get("restart")
            step = it.get("step", -1 if restart is not None and restart < start else 1)
            if restart is not None and restart == start:
                raise SchemaError(f"{path}: arg.properties iteration restart must differ from start")
            if step == 0 or (restart is not None and (restart - start) / step <= 0):
                raise SchemaError(f"{path}: arg.properties iteration step {step} never reaches restart {restart}")
            steps = None if restart is None else int(np.ceil((restart - start) / step))

            def iteration(g: Any) -> Any:
                k = g.idx if steps is None else g.idx % steps
                return out(start + k * step if integral else start + k.astype(np.float64) * step)
            return iteration
        rng = props.get("range") or {}
        if not isinstance(rng, dict):
            raise SchemaError(f"{path}: arg.properties range must be an object with min and/or max")
        s = self.sid()
        if integral:
            lo_default, hi_default = (_DAYS_TO_2100 if arrow == pa.date32()
                                      else _MS_TO_2100 if pa.types.is_timestamp(arrow)
                                      else _INT if typ == "int" else _LONG)
            lo, hi = int(rng.get("min", lo_default)), int(rng.get("max", hi_default))
            if hi <= lo:
                raise SchemaError(f"{path}: arg.properties range max {hi} must be greater than min {lo}")

            def integers(g: Any) -> Any:
                return out(g.ints(s, lo, hi - 1))
            return integers
        flo, fhi = float(rng.get("min", 0.0)), float(rng.get("max", 1.0 if "min" not in rng else rng["min"] + 1.0))
        if fhi <= flo:
            raise SchemaError(f"{path}: arg.properties range max {fhi} must be greater than min {flo}")

        def floats(g: Any) -> Any:
            u = g.ints(s, 0, (1 << 53) - 1) / float(1 << 53)
            return out(flo + u * (fhi - flo))
        return floats

    def _decimal(self, schema: dict[str, Any], props: dict[str, Any], path: str) -> tuple[Any, Any, Gen]:
        import numpy as np
        import pyarrow as pa
        from pyspark.sql import types as T

        precision, scale = int(schema.get("precision", 0)), int(schema.get("scale", 0))
        if not 0 < precision <= 38 or not 0 <= scale <= precision:
            raise SchemaError(f"{path}: decimal precision {precision} and scale {scale} are not supported")
        arrow = pa.decimal128(precision, scale)
        if "options" in props:
            return T.DecimalType(precision, scale), arrow, self._choice(props["options"], arrow, path)
        rng = props.get("range") or {}
        top = 10 ** (precision - scale)
        lo = round(float(rng.get("min", 0)) * 10**scale)
        hi = round(float(rng.get("max", top)) * 10**scale)  # exclusive
        if hi <= lo:
            raise SchemaError(f"{path}: arg.properties range max must be greater than min")
        s = self.sid()

        def decimal(g: Any) -> Any:
            unscaled = g.ints(s, lo, hi - 1)
            return pa.array(np.round(unscaled / 10**scale, scale)).cast(arrow)
        return T.DecimalType(precision, scale), arrow, decimal

    def _boolean(self, props: dict[str, Any], path: str) -> Gen:
        import pyarrow as pa

        if "options" in props:
            return self._choice(props["options"], pa.bool_(), path)
        if "iteration" in props:
            start = bool((props["iteration"] or {}).get("start", True))

            def alternate(g: Any) -> Any:
                return pa.array((g.idx % 2 == 0) == start)
            return alternate
        odds, s = float(props.get("odds", 0.5)), self.sid()

        def boolean(g: Any) -> Any:
            return pa.array(g.ints(s, 0, 999_999) < odds * 1_000_000)
        return boolean

    def _lengths(self, props: dict[str, Any], path: str) -> tuple[int, int]:
        length = props.get("length", {"min": 8, "max": 16})
        if isinstance(length, int):
            return length, length
        if not isinstance(length, dict):
            raise SchemaError(f"{path}: arg.properties length must be a number or an object with min and/or max")
        lo = int(length.get("min", 0))
        hi = int(length.get("max", lo + 8)) - 1  # max is exclusive
        if hi < lo:
            raise SchemaError(f"{path}: arg.properties length max must be greater than min")
        return lo, hi

    def _sized(self, props: dict[str, Any], path: str, build: Callable[[Any, Any, Any], Any], item_gen: Gen,
               key_gen: Gen | None) -> Gen:
        import numpy as np
        import pyarrow as pa

        lo, hi = self._lengths(props, path)
        s = self.sid()

        def sized(g: Any) -> Any:
            counts = g.ints(s, lo, hi)
            offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
            owner = np.repeat(g.idx, counts)
            pos = np.arange(int(offsets[-1]), dtype=np.int64) - np.repeat(offsets[:-1].astype(np.int64), counts)
            child = g.child(owner * (hi + 1) + pos)
            return build(pa.array(offsets), item_gen(child), key_gen(child) if key_gen else None)
        return sized

    def _string(self, props: dict[str, Any], path: str, arrow: Any) -> Gen:
        import pyarrow as pa
        import pyarrow.compute as pc

        if "options" in props:
            base = self._choice(props["options"], arrow, path)
        elif "regex" in props:
            base = _Regex(self, path).compile(str(props["regex"]))
        else:
            if "kind" in props:
                raise SchemaError(f"{path}: arg.properties kind is not supported by this datagen")
            lo, hi = self._lengths(props, path)
            base = _repeat(self, lambda c: _char_choice(c, _WORD), lo, hi)
        prefix, suffix = str(props.get("prefix", "")), str(props.get("suffix", ""))

        def string(g: Any) -> Any:
            arr = base(g)
            if prefix or suffix:
                arr = pc.binary_join_element_wise(prefix, arr.cast(pa.string()), suffix, "")
            return arr.cast(arrow)
        return string


def _char_choice(c: _Compiler, chars: list[str]) -> Gen:
    import pyarrow as pa

    values, s = pa.array(chars), c.sid()

    def chars_(g: Any) -> Any:
        return values.take(pa.array(g.ints(s, 0, len(values) - 1)))
    return chars_


def _concat(parts: list[Any], n: int) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if not parts:
        return pa.array([""] * n, pa.string())
    if len(parts) == 1:
        return pc.fill_null(parts[0], "")
    return pc.binary_join_element_wise(*parts, "", null_handling="replace", null_replacement="")


def _repeat(c: _Compiler, make: Callable[[_Compiler], Gen], lo: int, hi: int) -> Gen:
    """``lo`` to ``hi`` (inclusive) copies of a piece, each copy drawn afresh."""
    import pyarrow as pa

    pieces = [make(c) for _ in range(hi)]
    s = c.sid() if hi > lo else None

    def repeat(g: Any) -> Any:
        n = len(g.idx)
        count = g.ints(s, lo, hi) if s is not None else None
        parts = []
        for j, piece in enumerate(pieces):
            arr = piece(g)
            if count is not None and j >= lo:
                arr = pa.compute.if_else(pa.array(count > j), arr, pa.nulls(n, pa.string()))
            parts.append(arr)
        return _concat(parts, n)
    return repeat


class _Regex:
    """A regular expression as a generator of matching strings (parsed by Python's own ``re`` parser)."""

    def __init__(self, c: _Compiler, path: str):
        self.c, self.path = c, path

    def compile(self, pattern: str) -> Gen:
        parser: Any = getattr(re, "_parser")  # noqa: B009 - the stdlib's parser, sre_parse before 3.11
        try:
            parsed = parser.parse(pattern)
        except re.error as e:
            raise SchemaError(f"{self.path}: arg.properties regex {pattern!r} is not a regular expression: {e}") \
                from None
        self.pattern = pattern
        return self._seq(list(parsed))

    def _refuse(self, what: str) -> SchemaError:
        return SchemaError(f"{self.path}: arg.properties regex {self.pattern!r}: {what} is not supported by this "
                           "datagen's regex generator")

    def _seq(self, items: list[Any]) -> Gen:
        gens = [self._item(op, av) for op, av in items]

        def seq(g: Any) -> Any:
            return _concat([gen(g) for gen in gens], len(g.idx))
        return seq

    def _item(self, op: Any, av: Any) -> Gen:
        import pyarrow as pa

        name = str(op)
        if name == "LITERAL":
            ch = chr(av)

            def literal(g: Any) -> Any:
                return pa.repeat(pa.scalar(ch), len(g.idx))
            return literal
        if name == "ANY":
            return _char_choice(self.c, _PRINTABLE)
        if name == "IN":
            return _char_choice(self.c, self._chars(av))
        if name == "CATEGORY":
            return _char_choice(self.c, self._category(av))
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, hi, sub = av
            hi = lo + _UNBOUNDED_REPEAT if hi >= 2**31 - 1 or hi > 4096 else hi
            return _repeat(self.c, lambda _c: self._seq(list(sub)), lo, hi)
        if name == "SUBPATTERN":
            return self._seq(list(av[-1]))
        if name == "BRANCH":
            alts = [self._seq(list(a)) for a in av[1]]
            s = self.c.sid()

            def branch(g: Any) -> Any:
                pick = pa.array(g.ints(s, 0, len(alts) - 1).astype("int8"))
                return pa.compute.choose(pick, *[a(g) for a in alts])
            return branch
        if name == "AT":
            def empty(g: Any) -> Any:
                return pa.repeat(pa.scalar(""), len(g.idx))
            return empty
        raise self._refuse(name.lower())

    def _category(self, cat: Any) -> list[str]:
        name = str(cat)
        if name == "CATEGORY_DIGIT":
            return [str(d) for d in range(10)]
        if name == "CATEGORY_WORD":
            return _WORD
        if name == "CATEGORY_SPACE":
            return [" "]
        raise self._refuse(name.lower())

    def _chars(self, items: list[Any]) -> list[str]:
        out: list[str] = []
        for op, av in items:
            name = str(op)
            if name == "LITERAL":
                out.append(chr(av))
            elif name == "RANGE":
                out.extend(chr(c) for c in range(av[0], av[1] + 1))
            elif name == "CATEGORY":
                out.extend(self._category(av))
            else:  # NEGATE and the rest
                raise self._refuse(f"character class {name.lower()}")
        if not out:
            raise self._refuse("an empty character class")
        return list(dict.fromkeys(out))


def compile_schema(text: str, what: str) -> CompiledSchema:
    """Compiles a schema's text (``what`` names where it came from, for errors)."""
    try:  # Avro's parser (Jackson) allows // and /* */ comments; so do Confluent's quickstart files
        doc = json.loads(_COMMENT.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", text))
    except json.JSONDecodeError as e:
        raise SchemaError(f"{what} is not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("type") != "record":
        raise SchemaError(f"{what} must be an Avro record schema")
    spark, arrow, gen = _Compiler().compile(doc, "")
    return CompiledSchema(spark, arrow, gen)
