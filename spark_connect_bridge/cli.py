"""The ``kconnect`` command: run pipelines, inspect plugins, serve a schema registry.

Sub-commands are thin layers over the library (``pipeline``, ``plugins``, ``docs``):

* ``kconnect run SOURCE_CONFIG [SINK_CONFIG] [--once]``: a source config into a sink config in one query, or into
  the topic store (``--topics-dir``) when no sink is given; prints progress and a summary;
* ``kconnect plugins list|describe|validate``: plugins and their generated docs, config validation;
* ``kconnect schema-registry``: the embedded Confluent-compatible schema registry.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import logging
import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

from .config import load_config_file
from .config.examples import example_names, example_text, write_examples
from .converters.registry_server import main as registry_main
from .core import plugins
from .docs import plugin_markdown
from .engine.pipeline import check_routes, read_stream, unmatched_records, write_stream, write_topic_store
from .engine.queries import stop_query
from .engine.topic_store import TopicStore
from .errors import ConfigError, ConnectError, headline
from .jvm import with_python_launcher, with_session_defaults
from .rest.client import Client
from .runtime.group import run_distributed
from .runtime.standalone import run
from .runtime.validate import check_config
from .runtime.worker_config import load_worker_config
from .version import __version__

__all__ = ["main"]

log = logging.getLogger("spark_connect_bridge.cli")


class QueryFailed(ConnectError):
    """A query of ``kconnect run`` failed: our message (or the first line of Spark's) with Spark's whole text kept
    for ``--debug``."""

    def __init__(self, name: str, error: Any):
        text = str(getattr(error, "desc", None) or error)
        first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
        super().__init__(f"query {name} failed: {headline(text) or first}")
        stack = getattr(error, "stackTrace", None) or getattr(error, "_stackTrace", None)  # the JVM's (pyspark 4)
        self.trace = f"{text}\n\nJVM stacktrace:\n{stack}" if stack and str(stack) not in text else text


def _spark(master: str, app: str, conf: Sequence[str] = ()) -> Any:
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false"))
    for item in conf:
        k, _, v = item.partition("=")
        builder = builder.config(k, v)
    spark = with_python_launcher(with_session_defaults(builder)).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _quiet_query_failures(spark: Any) -> None:
    """A failed query is reported once, by :class:`QueryFailed` (our message; Spark's traces with ``--debug``):
    the copies of its stack trace that Spark's own loggers print at ERROR as the task, the stage and the query fail
    are silenced (the loggers the worker silences while it cancels a batch)."""
    from .runtime.worker import _CANCEL_NOISE, _Log4jLevels

    try:
        levels = _Log4jLevels(spark._jvm)
        for name in _CANCEL_NOISE:
            levels.set(name, "OFF")
    except Exception:  # not a classic JVM session: nothing to silence
        log.debug("no log4j access", exc_info=True)


def _rate(records: int, seconds: float) -> str:
    """``12,345 records/s``; below 10 a second with one decimal (``0.3 records/s``), not a rounded ``0``."""
    rate = records / max(seconds, 1e-9)
    return f"{rate:,.0f} records/s" if rate >= 10 or records == 0 else f"{rate:.1f} records/s"


def _print_progress(query: Any, seen: int, started: float) -> int:
    progress = query.recentProgress
    for p in progress[seen:]:
        rows = p.get("numInputRows", 0)
        if rows:
            dur = p.get("durationMs", {}).get("triggerExecution", 0) / 1000 or 1e-9
            print(f"  batch {p['batchId']:>4}: {rows:>10,} records in {dur:6.2f} s "
                  f"({_rate(rows, dur)})  [{time.monotonic() - started:6.1f} s elapsed]", flush=True)
    return len(progress)


def _await(queries: list[Any], graceful_timeout_s: float) -> int:
    started, seen, total = time.monotonic(), [0] * len(queries), 0
    try:
        while any(q.isActive for q in queries):
            for i, q in enumerate(queries):
                seen[i] = _print_progress(q, seen[i], started)
            time.sleep(0.5)
    except KeyboardInterrupt:
        print(f"stopping ... (the batches in flight finish first, for at most {graceful_timeout_s:g} s; "
              "Ctrl-C again stops now)", flush=True)
        try:
            for q in queries:
                stop_query(q, graceful_timeout_s)
        except KeyboardInterrupt:
            for q in queries:
                q.stop()
    for i, q in enumerate(queries):
        seen[i] = _print_progress(q, seen[i], started)
        total += sum(p.get("numInputRows", 0) for p in q.recentProgress)
        if q.exception() is not None:
            raise QueryFailed(q.name, q.exception())
    return total


def cmd_run(args: argparse.Namespace) -> int:
    source = check_config(load_config_file(args.source), kind="source").prepared  # every problem before Spark
    sinks = [check_config(load_config_file(s), kind="sink").prepared for s in args.sink]
    spark = _spark(args.master, "kconnect-run", args.conf)
    if not args.debug:
        _quiet_query_failures(spark)
    check_routes(spark, source, sinks)  # a sink that can take none of the source's topics
    started = time.monotonic()
    df = read_stream(spark, source)
    trigger = {"availableNow": True} if args.once else {"processingTime": args.trigger_interval}
    ckpt_root = os.path.abspath(args.checkpoint_dir)
    resumed = os.path.isdir(ckpt_root) and any(os.scandir(ckpt_root))
    if args.sink:
        queries = [write_stream(df, sink, checkpoint=os.path.join(ckpt_root, os.path.basename(s)), trigger=trigger)
                   for s, sink in zip(args.sink, sinks)]
        where = ", ".join(args.sink)
    else:
        out = os.path.abspath(args.topics_dir)
        queries = [write_topic_store(df, out, checkpoint=os.path.join(ckpt_root, "topics"), trigger=trigger)]
        where = f"the topic store {out}"
    print(f"kconnect {__version__}: {args.source} -> {where} ({'until caught up' if args.once else 'until stopped'})",
          flush=True)
    total = _await(queries, args.graceful_timeout)
    elapsed = time.monotonic() - started
    print(f"done: {total:,} records in {elapsed:.1f} s ({_rate(total, elapsed)} overall)")
    if total == 0 and resumed:
        print(f"  nothing new: the checkpoints under {ckpt_root} were already at the end of the source (a run "
              f"resumes where the last one stopped); to start afresh, delete them or pass another --checkpoint-dir",
              flush=True)
    for s, q in zip(args.sink, queries if args.sink else []):
        unmatched = unmatched_records(q)
        if unmatched:
            print(f"warning: {unmatched:,} of them not written by {s}: their topics match neither its topics nor "
                  f"topics.regex", flush=True)
    if not args.sink:
        store = TopicStore(os.path.abspath(args.topics_dir))
        for topic in store.topics():
            print(f"  topic {topic}: {store.read_batch(spark, [topic]).count():,} records in {store.table_path(topic)}")
        sample = store.read_batch(spark).orderBy("partition", "offset").limit(3).collect()
        if sample:
            print("  sample:")
            for r in sample:
                print(f"    key={r['key']!r} value={r['value']}")
    spark.stop()
    return 0


def cmd_plugins(args: argparse.Namespace) -> int:
    if args.action == "list":
        rows = plugins.describe_all()
        if args.type:
            rows = [r for r in rows if r["type"] == args.type]
        width = max(len(r["class"]) for r in rows) if rows else 10
        for r in rows:
            print(f"{r['class']:<{width}}  {r['type']}")
        return 0
    if args.action == "describe":
        print(plugin_markdown(args.name))
        return 0
    if args.action == "validate":
        worker = load_worker_config(args.worker_config) if args.worker_config else None
        checked = check_config(load_config_file(args.config), worker)
        how = f"as the worker of {args.worker_config} runs it" if worker else "as kconnect run runs it"
        print(f"{args.config}: valid {checked.kind} connector config ({checked.prepared.connector_class.__name__}), "
              f"{how}")
        return 0
    raise AssertionError(args.action)


def cmd_schema_registry(args: argparse.Namespace, rest: list[str]) -> int:
    return registry_main(rest)


def cmd_standalone(args: argparse.Namespace) -> int:
    return run(args.worker_config, args.connector_configs, live=not args.no_live)


def cmd_distributed(args: argparse.Namespace) -> int:
    return run_distributed(args.worker_config, live=not args.no_live)


def cmd_worker(args: argparse.Namespace) -> int:
    return run(args.worker_config, (), live=not args.no_live)


def _client(args: argparse.Namespace) -> Any:
    return Client(args.url, user=os.environ.get("KCONNECT_REST_USER"),
                  password=os.environ.get("KCONNECT_REST_PASSWORD"))


def cmd_connectors(args: argparse.Namespace) -> int:
    c = _client(args)
    if args.action == "list":
        out: Any = c.call("GET", "/connectors", expand=["status"])
        if not out:
            print(f"no connectors on the worker at {c.url}")
        for name, entry in sorted(out.items()):
            st = entry["status"]
            print(f"{name:<30} {st['type']:<7} {st['connector']['state']:<11} tasks={len(st['tasks'])}")
        return 0
    if args.action == "create":
        req = load_config_file(args.config)
        body: dict[str, Any] = {"name": req.get("name"), "config": dict(req)}
        if req.initial_state:
            body["initial_state"] = req.initial_state
        out = c.call("POST", "/connectors", body)
    elif args.action == "status":
        out = c.call("GET", f"/connectors/{args.name}/status")
    elif args.action in ("pause", "resume", "stop"):
        out = c.call("PUT", f"/connectors/{args.name}/{args.action}")
    elif args.action == "restart":
        out = c.call("POST", f"/connectors/{args.name}/restart", includeTasks=str(args.include_tasks).lower(),
                     onlyFailed=str(args.only_failed).lower())
    elif args.action == "delete":
        out = c.call("DELETE", f"/connectors/{args.name}")
    else:
        raise AssertionError(args.action)
    if out is not None:
        print(json.dumps(out, indent=2))
    return 0


def cmd_offsets(args: argparse.Namespace) -> int:
    c = _client(args)
    if args.action == "get":
        out = c.call("GET", f"/connectors/{args.name}/offsets")
    elif args.action == "set":
        with open(args.file, encoding="utf-8") as f:
            out = c.call("PATCH", f"/connectors/{args.name}/offsets", json.load(f))
    else:
        out = c.call("DELETE", f"/connectors/{args.name}/offsets")
    print(json.dumps(out, indent=2))
    return 0


def cmd_examples(args: argparse.Namespace) -> int:
    if args.to:
        written = write_examples(args.to)
        kept = len(example_names()) - len(written)
        print(f"wrote {len(written)} example configs to {args.to}" + (f" ({kept} already there, kept)" if kept else ""))
        return 0
    if args.name:
        print(example_text(args.name), end="")
        return 0
    for name in example_names():
        print(name)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kconnect", description="Kafka Connect pipelines on Apache Spark.")
    p.add_argument("--version", action="version", version=f"kconnect {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    p.add_argument("--debug", action="store_true",
                   help="on a failure, print Spark's whole Java/Python stack trace after the message")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a source config into a sink config (or into the topic store)")
    run.add_argument("source", help="source connector config (.properties or .json)")
    run.add_argument("sink", nargs="*", help="sink connector configs (none: write the records to --topics-dir)")
    run.add_argument("--topics-dir", default="work/topics", help="topic store directory (default: %(default)s)")
    run.add_argument("--checkpoint-dir", default="work/checkpoints",
                     help="checkpoint root: one checkpoint per query (default: %(default)s)")
    run.add_argument("--once", action="store_true", help="process what is available now, then exit")
    run.add_argument("--trigger-interval", default="2 seconds", help="micro-batch interval when not --once")
    run.add_argument("--graceful-timeout", type=float, default=30.0, metavar="SECONDS",
                     help="on Ctrl-C, how long the batches in flight may take to finish and commit before they are "
                          "cancelled (default: %(default)s; a cancelled batch is read again by the next run)")
    run.add_argument("--master", default=os.environ.get("KCONNECT_SPARK_MASTER", "local[2]"))
    run.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark config")
    run.set_defaults(func=cmd_run)

    pl = sub.add_parser("plugins", help="list, describe and validate plugins")
    pl_sub = pl.add_subparsers(dest="action", required=True)
    ls = pl_sub.add_parser("list", help="every connector, transform, predicate and converter")
    ls.add_argument("--type", choices=["source", "sink", "transformation", "predicate", "converter",
                                       "header_converter"])
    d = pl_sub.add_parser("describe", help="the generated config reference of one plugin")
    d.add_argument("name")
    v = pl_sub.add_parser("validate", help="validate a connector config file (connector, transforms, converters)")
    v.add_argument("config")
    v.add_argument("--worker-config", metavar="WORKER_PROPERTIES",
                   help="check the config as the worker of this config file runs it (its converter defaults, "
                        "topic store or Kafka bus); without it, as kconnect run and the one-call API run it")
    pl.set_defaults(func=cmd_plugins)

    ex = sub.add_parser("examples", help="the example configs of the quick start: list them, print one, or write "
                                         "them all (kconnect examples --to conf)")
    ex.add_argument("name", nargs="?", help="the example to print (file-source, demo/datagen-orders, ...)")
    ex.add_argument("--to", metavar="DIR", help="write every example under DIR (existing files are kept)")
    ex.set_defaults(func=cmd_examples)

    sa = sub.add_parser("standalone", help="run a worker with the REST API and the given connectors "
                                           "(like connect-standalone)")
    sa.add_argument("worker_config", help="worker.properties")
    sa.add_argument("connector_configs", nargs="*", help="connector configs (.properties or .json)")
    sa.add_argument("--no-live", action="store_true", help="no live status table")
    sa.set_defaults(func=cmd_standalone)
    wk = sub.add_parser("worker", help="run a worker with the REST API; connectors come from its stored state")
    wk.add_argument("worker_config", help="worker.properties")
    wk.add_argument("--no-live", action="store_true", help="no live status table")
    wk.set_defaults(func=cmd_worker)

    di = sub.add_parser("distributed", help="run a worker of a group (like connect-distributed): group.id with "
                                            "bootstrap.servers (Kafka) or group.store.url (PostgreSQL)")
    di.add_argument("worker_config", help="worker.properties")
    di.add_argument("--no-live", action="store_true", help="no live status table")
    di.set_defaults(func=cmd_distributed)

    url_help = "the worker's REST API (default: $KCONNECT_URL or http://127.0.0.1:8083; basic auth from " \
               "$KCONNECT_REST_USER / $KCONNECT_REST_PASSWORD)"
    default_url = os.environ.get("KCONNECT_URL", "http://127.0.0.1:8083")
    co = sub.add_parser("connectors", help="manage the connectors of a running worker (over its REST API)")
    co_sub = co.add_subparsers(dest="action", required=True)
    for action, needs in (("list", None), ("create", "config"), ("status", "name"), ("pause", "name"),
                          ("resume", "name"), ("stop", "name"), ("restart", "name"), ("delete", "name")):
        a = co_sub.add_parser(action)
        if needs:
            a.add_argument(needs)
        if action == "restart":
            a.add_argument("--include-tasks", action="store_true")
            a.add_argument("--only-failed", action="store_true")
        a.add_argument("--url", default=default_url, help=url_help)
    co.set_defaults(func=cmd_connectors)
    of = sub.add_parser("offsets", help="read and change a connector's offsets (change: connector STOPPED)")
    of_sub = of.add_subparsers(dest="action", required=True)
    for action in ("get", "set", "reset"):
        a = of_sub.add_parser(action)
        a.add_argument("name")
        if action == "set":
            a.add_argument("file", help='JSON file: {"offsets": [{"partition": {...}, "offset": {...}}]}')
        a.add_argument("--url", default=default_url, help=url_help)
    of.set_defaults(func=cmd_offsets)

    sr = sub.add_parser("schema-registry", help="serve the embedded Confluent-compatible schema registry",
                        add_help=False)
    sr.set_defaults(func=None)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "schema-registry":
        return cmd_schema_registry(argparse.Namespace(), argv[1:])
    args = build_parser().parse_args(argv)
    if hasattr(signal, "SIGUSR1"):  # kill -USR1 <pid>: every Python thread's stack on stderr (jstack for the JVM)
        with contextlib.suppress(ValueError, OSError):  # a stderr with no file descriptor (main() in a test)
            faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except ConnectError as e:
        print(f"error: {headline(e) or e}", file=sys.stderr)
        _trace(args, getattr(e, "trace", None) or ("".join(traceback.format_exception(e)) if args.debug else None))
        return 2 if isinstance(e, ConfigError) else 1
    except Exception as e:  # Spark's error around one of ours (a Py4J or analysis error of a batch write)
        ours = headline(e)
        if ours is None:
            raise
        print(f"error: {ours}", file=sys.stderr)
        _trace(args, "".join(traceback.format_exception(e)))
        return 1


def _trace(args: argparse.Namespace, trace: str | None) -> None:
    """The stack trace behind a message: printed with ``--debug``, else a line saying how to see it."""
    if not trace:
        return
    if args.debug:
        print(f"\n{trace.rstrip()}", file=sys.stderr)
    else:
        print("(Spark's Java/Python stack trace: run again with kconnect --debug ...)", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
