"""The worker's Spark side: one Spark application, one streaming query per connector.

A source connector's query reads the connector (with its transforms and converters) and appends its records to
the topic store; a sink connector's query reads its ``topics``/``topics.regex`` from the topic store and runs the
sink (converters, transforms, connector). Every query has its own checkpoint, so one failing connector never
stops the others, and a restarted worker resumes every query from its checkpoint.

Every Spark action (start, stop, restart, delete, offset changes) runs on one *herder* thread, in the order it
was requested; the herder also polls the queries for state changes and metrics every ``status.interval.ms``.
The service layer (:mod:`spark_connect_bridge.runtime.service`) decides *what* should run; this module makes it
so and reports what actually runs.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..bus.admin import kafka_topics
from ..bus.groups import release_group
from ..bus.kafka import KafkaBus, KafkaSinkPlan, KafkaSourcePlan, sink_stream, source_stream
from ..connectors.base import checkpoint_app_id, stable_app_id
from ..connectors.factory import build_connector
from ..core.locations import Locations, is_remote
from ..engine.datasource import register
from ..engine.pipeline import read_stream, write_stream, write_topic_store
from ..engine.queries import stop_query
from ..engine.topic_store import TopicStore
from ..engine.warmup import warm_up
from ..errors import ConnectError, headline
from ..jvm import (
    SAFE_PATH_ENV,
    configure_spark,
    get_or_create,
    wants_object_stores,
    with_python_launcher,
    with_session_defaults,
)
from .secrets import is_secret_key
from .state import ConnectorState, storage_name
from .validate import CheckedConfig, check_config
from .worker_config import WorkerConfig

__all__ = ["Worker", "ConnectorRuntime", "Metrics"]

log = logging.getLogger(__name__)


@dataclass
class Metrics:
    """Live figures of one connector's query (also served under ``"metrics"`` in the status)."""

    records_in_per_sec: float = 0.0
    records_out_per_sec: float = 0.0
    batch_duration_ms: int | None = None
    records_in_total: int = 0
    records_out_total: int = 0
    batches: int = 0
    last_batch_id: int | None = None
    lag: int | None = None
    dead_lettered: int | None = None
    waiting_for_topics: bool = False
    last_progress_stamp: str | None = None  # timestamp of the last progress event read (ISO-8601, sortable)

    def to_json(self) -> dict[str, Any]:
        return {"records_in_per_sec": round(self.records_in_per_sec, 1),
                "records_out_per_sec": round(self.records_out_per_sec, 1),
                "batch_duration_ms": self.batch_duration_ms, "records_in_total": self.records_in_total,
                "records_out_total": self.records_out_total, "batches": self.batches,
                "last_batch_id": self.last_batch_id, "lag": self.lag, "dead_lettered": self.dead_lettered,
                **({"waiting_for_topics": True} if self.waiting_for_topics else {})}


@dataclass
class ConnectorRuntime:
    """What the worker knows about one connector: its stored state and its query."""

    state: ConnectorState
    kind: str = "unknown"  # source | sink | unknown (connector.class not resolvable)
    query: Any = None
    #: UNASSIGNED, RUNNING, PAUSED, STOPPED, FAILED or RESTARTING (Kafka's states, derived from the query).
    phase: str = "UNASSIGNED"
    trace: str | None = None
    restarting: bool = False
    metrics: Metrics = field(default_factory=Metrics)
    #: A driver-side source connector whose read-only ``lag(offset)`` measures the backlog (never asked for
    #: its initial offsets: see :meth:`Worker._lag`).
    lag_source: Any = None
    #: the config checked as this worker runs it, with the config mapping it was made from (see Worker.checked)
    checked_config: tuple[dict[str, str], CheckedConfig] | None = None
    end_offset: Any = None  # the end offset of the query's last batch (JSON text, as Spark reports it)
    last_lag_check: float = 0.0
    #: The end offset the lag was last measured at: a new batch end is measured at once, not up to 2 s later.
    lag_checked_end: Any = None
    last_progress_at: float = 0.0
    #: The totals saved by an earlier run of this connector (see Worker._start_query) were read.
    totals_loaded: bool = False

    @property
    def name(self) -> str:
        return self.state.name


_TOTALS_FILE = "totals.json"  # beside a connector's checkpoint generations (g0, g1, ...)


def _warn_unsafe_path(spark: Any) -> None:
    """A session made elsewhere (a notebook's) may start Spark's Python processes in a directory they import from."""
    try:
        safe = spark.conf.get(f"spark.executorEnv.{SAFE_PATH_ENV}", None) and \
            spark._jvm.java.lang.System.getenv(SAFE_PATH_ENV)
    except Exception:  # noqa: BLE001 - a Spark Connect session: its server's processes are not ours to see
        return
    if not safe:
        log.warning("The worker's Spark session starts its Python processes without %s=1: a file a connector writes "
                    "in their working directory could be imported. Build the session with configure_spark, or set "
                    "spark.executorEnv.%s=1 and %s=1 in the environment before it starts",
                    SAFE_PATH_ENV, SAFE_PATH_ENV, SAFE_PATH_ENV)


def _checkpoint_dir(root: str, name: str, generation: int) -> str:
    return Locations.join(root, "checkpoints", storage_name(name), f"g{generation}")


def _now() -> float:
    return time.monotonic()


class Worker:
    """The Spark application of a worker: starts, stops and watches one streaming query per connector.

    ``spark`` may be an existing SparkSession (a notebook's, a test run's); otherwise one is built from the
    worker config (``spark.master`` and every ``spark.*`` key) on first use and stopped by :meth:`shutdown`.
    """

    def __init__(self, config: WorkerConfig, spark: Any = None):
        self.config = config
        self._spark = spark
        self._owns_spark = spark is None
        self._registered = False
        #: the worker's own files (checkpoints' side files, the topic store), local or in a bucket
        self.files = config.locations
        self.store = TopicStore(config.topics_dir, format=config.topic_store_format, files=self.files)
        #: Kafka as the bus (worker bootstrap.servers): sources produce to it, sinks consume it.
        self.bus = KafkaBus(config.bootstrap_servers, tuple(sorted(config.kafka_client.items()))) \
            if config.bootstrap_servers else None
        self.runtimes: dict[str, ConnectorRuntime] = {}
        self._tasks: queue.Queue[tuple[Callable[[], Any], concurrent.futures.Future[Any]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.started = threading.Event()  # the Spark session is up
        #: the warm-up query is over (run, failed, or not asked for: see warm.up.enable)
        self.warmed_up = threading.Event()
        self.warm_up_seconds: float | None = None
        self.warm_up_error: str | None = None
        self._quiet_until: float | None = None  # cancellation noise silenced until then (see _quiet_cancellation)
        #: Why the worker's Spark session is gone (its JVM died or its SparkContext stopped), once it is: every
        #: connector is then FAILED with this cause, and the process exits (see :func:`~.standalone.run`).
        self.spark_lost: str | None = None
        self._saved_levels: dict[str, str | None] = {}

    # -- Spark --------------------------------------------------------------------------------------
    @property
    def spark(self) -> Any:
        if self._spark is None:
            for k, v in self.config.spark_env.items():  # loopback binding (see worker_config.spark.bind.loopback)
                os.environ.setdefault(k, v)
            from pyspark.sql import SparkSession

            builder = (SparkSession.builder.appName("kconnect-worker")
                       .config("spark.sql.session.timeZone", "UTC")
                       .config("spark.ui.showConsoleProgress", "false"))
            # The worker's own session loads the project's JVM packages (spark-sql-kafka for bootstrap.servers,
            # spark-avro, Delta) as configure_spark gives them to any session: a connector created later over REST
            # may need any of them, and a running JVM cannot add a data source. A worker config that sets its own
            # spark.jars or spark.jars.packages chooses the classpath itself: ours (and Delta's catalog, whose class
            # would then be missing) is left out, and only the session defaults apply.
            user_jars = {"spark.jars", "spark.jars.packages"} & set(self.config.spark_conf)
            # Hadoop's S3A connector joins them when the worker config configures it (spark.hadoop.fs.s3a.*)
            builder = with_session_defaults(builder) if user_jars else configure_spark(
                builder, object_stores=(wants_object_stores(self.config.spark_conf)
                                        or self.config.state_in_object_store))
            # a credential among them (a resolved spark.hadoop.fs.s3a.secret.key) never on the JVM's command line
            secrets = {k: v for k, v in self.config.spark_conf.items() if is_secret_key(k)}
            for k, v in self.config.spark_conf.items():
                if k not in secrets:
                    builder = builder.config(k, v)
            # Spark's per-query Python processes on the installed pyspark, where that is the JVM's version
            builder = with_python_launcher(builder)
            self._spark = get_or_create(builder, secrets)
            self._spark.sparkContext.setLogLevel("ERROR")
        if not self._registered:
            self._registered = True
            if not self._owns_spark:
                _warn_unsafe_path(self._spark)
            _register(self._spark)
        return self._spark

    def checkpoint(self, state: ConnectorState) -> str:
        return _checkpoint_dir(self.config.checkpoint_root, state.name, state.generation)

    def checkpoint_root_of(self, name: str) -> str:
        return Locations.parent(_checkpoint_dir(self.config.checkpoint_root, name, 0))

    def app_id(self, state: ConnectorState) -> str:
        """The Delta app id the topic store's sink uses for this connector's checkpoint (see datasource)."""
        return checkpoint_app_id(self.checkpoint(state))

    # -- the herder thread --------------------------------------------------------------------------
    def start(self) -> None:
        """Start the herder thread (it builds the Spark session first)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="kconnect-herder", daemon=True)
            self._thread.start()

    def submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """Run ``fn`` on the herder thread after every action requested before it."""
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._tasks.put((fn, fut))
        return fut

    def _loop(self) -> None:
        try:
            spark = self.spark
            # Python data sources are looked up through the JVM thread's active session: set it for this thread.
            jss = getattr(spark, "_jsparkSession", None)
            if jss is not None:
                spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(jss)
        except Exception:  # the worker cannot run without Spark: say why, keep serving REST reads
            log.exception("Cannot start the worker's SparkSession")
            return
        self.started.set()
        # Only the session the worker made: one handed to it (a notebook's) runs nothing the caller did not ask for.
        # Stored connectors being restarted warm the path up themselves.
        if self._owns_spark and self.config.config.warm_up_enable and not self.runtimes:
            self._warm_up()
        else:
            self.warmed_up.set()
        interval = self.config.status_interval_ms / 1000
        while not self._stopping.is_set():
            try:
                item = self._tasks.get(timeout=interval)
            except queue.Empty:
                item = None
            if item is not None:
                fn, fut = item
                if fut.set_running_or_notify_cancel():
                    if self.spark_lost is not None:
                        fut.set_exception(ConnectError(self.spark_lost))
                        continue
                    try:
                        fut.set_result(fn())
                    except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
                        fut.set_exception(e)
            if self.spark_lost is not None:
                continue
            cause = self._spark_gone()
            if cause is not None:
                self._session_lost(cause)
                continue
            try:
                self.poll()
            except Exception:
                log.exception("Polling the connector queries failed")

    def _warm_up(self) -> None:
        """The warm-up query (:mod:`~spark_connect_bridge.engine.warmup`), on the herder thread so that a connector
        submitted meanwhile starts after it; its failure is logged, never the worker's."""
        try:
            self.warm_up_seconds = warm_up(self.spark, os.path.join(self.config.state_dir, "_warm_up"))
        except Exception as e:  # noqa: BLE001 - the warm-up only saves time; the worker runs without it
            self.warm_up_error = headline(e) or f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"
            log.warning("The warm-up query failed (the first connector starts cold): %s", self.warm_up_error)
        finally:
            self.warmed_up.set()

    def _spark_gone(self) -> str | None:
        """Why the worker's Spark session can no longer run anything (None: it can): its SparkContext was stopped,
        or its JVM does not answer (killed, or ended by System.exit)."""
        spark = self._spark
        if spark is None:
            return None
        try:
            context = spark.sparkContext
            jsc = getattr(context, "_jsc", None)
            if jsc is None or jsc.sc().isStopped():
                return "The worker's SparkContext was stopped: no connector can run until the worker is restarted"
        except AttributeError:  # a Spark Connect session: its server is watched by its own client
            return None
        except Exception as e:  # noqa: BLE001 - py4j: connection refused / reset, the gateway is gone
            return (f"The worker's Spark session is gone: its JVM does not answer ({type(e).__name__}: "
                    f"{str(e).splitlines()[0] if str(e) else ''}); no connector can run until the worker is "
                    f"restarted")
        return None

    def _session_lost(self, cause: str) -> None:
        """Every connector FAILED with ``cause``; actions requested from now on fail with it."""
        self.spark_lost = cause
        log.error("%s", cause)
        for rt in list(self.runtimes.values()):
            rt.query, rt.lag_source = None, None
            rt.phase, rt.trace, rt.restarting = "FAILED", cause, False
            rt.metrics.records_in_per_sec = rt.metrics.records_out_per_sec = 0.0

    def shutdown(self, timeout: float = 60.0) -> None:
        """Stop every query (target states are kept: a restarted worker resumes them) and the herder."""
        if self.spark_lost is not None:  # nothing left to stop in Spark
            self._stopping.set()
            if self._thread is not None:
                self._thread.join(timeout=timeout)
            return
        if self._thread is not None and self._thread.is_alive():
            done = self.submit(self._stop_all)
            try:
                done.result(timeout=timeout)
            except Exception:
                log.exception("Stopping the connector queries failed")
            self._stopping.set()
            self._thread.join(timeout=timeout)
        else:
            self._stop_all()
        if self._owns_spark and self._spark is not None:
            self._spark.stop()
            self._spark = None

    def _stop_all(self) -> None:
        for rt in list(self.runtimes.values()):
            self.stop_query(rt)

    # -- queries (herder thread only) ---------------------------------------------------------------
    def reconcile(self, rt: ConnectorRuntime, *, restart: bool = False) -> None:
        """Bring ``rt``'s query in line with its target state (restart it when asked)."""
        target = rt.state.target_state
        if target != "STARTED":
            self.stop_query(rt)
            rt.phase, rt.trace, rt.restarting = ("PAUSED" if target == "PAUSED" else "STOPPED"), None, False
            return
        if restart:
            self.stop_query(rt)
        active = rt.query is not None and rt.query.isActive
        if active and not restart:
            return
        if rt.phase == "FAILED" and not restart:
            return  # Kafka does not restart a failed connector by itself
        self._start_query(rt)

    def stop_query(self, rt: ConnectorRuntime) -> None:
        rt.lag_source = None  # its connections go with it; a started query builds a new one
        if rt.query is not None:
            q, rt.query = rt.query, None
            self._quiet_cancellation()
            try:
                stop_query(q, self.config.task_shutdown_graceful_timeout_ms / 1000)
                self._count_progress(rt, q)
                release_group(q)  # a sink on the Kafka bus: its group matches the checkpoint, then is left alone
            except Exception:
                log.exception("Stopping the query of connector %s failed", rt.name)
            log.info("Connector %s: query stopped (%s)", rt.name, rt.state.target_state)
        rt.metrics.records_in_per_sec = rt.metrics.records_out_per_sec = 0.0

    def _quiet_cancellation(self) -> None:
        """Pause, stop and delete cancel the batch in flight: Spark logs that as ERROR with a
        ``TaskKilledException`` stack trace from the loggers below, although nothing failed. Silence them while
        queries stop (for ``_QUIET_SECONDS``, as the killed tasks finish after ``stop()`` returns); a query that
        really fails is still reported by its exception (status FAILED with the trace, and this log)."""
        levels = self._jvm_levels()
        if levels is None:
            return
        if self._quiet_until is None:
            self._saved_levels = {name: levels.get(name) for name in _CANCEL_NOISE}
            for name in _CANCEL_NOISE:
                levels.set(name, "OFF")
        self._quiet_until = _now() + _QUIET_SECONDS

    def _restore_cancellation_logs(self) -> None:
        if self._quiet_until is None or _now() < self._quiet_until:
            return
        levels = self._jvm_levels()
        self._quiet_until = None
        if levels is not None:
            for name, level in self._saved_levels.items():
                levels.set(name, level)

    def _jvm_levels(self) -> _Log4jLevels | None:
        if self._spark is None:
            return None
        try:
            return _Log4jLevels(self._spark._jvm)
        except Exception:  # not a classic JVM session (Spark Connect): nothing to silence
            log.debug("no log4j access", exc_info=True)
            return None

    def _start_query(self, rt: ConnectorRuntime) -> None:
        rt.trace = None
        # Totals count the connector's records since it was created here (a paused and resumed connector's
        # go on from where they were); rates and batch ids belong to the new query.
        old = rt.metrics
        if not rt.totals_loaded:  # the first start in this process: go on from the totals an earlier run saved
            rt.totals_loaded = True
            old = self._saved_totals(rt) or old
        rt.metrics = Metrics(records_in_total=old.records_in_total, records_out_total=old.records_out_total,
                             batches=old.batches, dead_lettered=old.dead_lettered)
        rt.end_offset = None
        checkpoint = self.checkpoint(rt.state)
        self.files.makedirs(Locations.parent(checkpoint))
        try:
            checked = self.checked(rt)
            if rt.kind == "source":
                rt.lag_source = self._driver_source(checked.prepared.connector)
                if isinstance(checked.kafka, KafkaSourcePlan) and self.bus is not None:
                    rt.query = source_stream(self.spark, checked.kafka, bus=self.bus, checkpoint=checkpoint,
                                             trigger=self.config.trigger, query_name=self._query_name(rt))
                else:
                    rt.query = write_topic_store(read_stream(self.spark, checked.prepared), self.store,
                                                 checkpoint=checkpoint, trigger=self.config.trigger,
                                                 query_name=self._query_name(rt))
            else:
                topics, regex = checked.topics, checked.topics_regex
                if not self._has_topics(topics, regex):
                    rt.phase, rt.restarting = "RUNNING", False
                    if not rt.metrics.waiting_for_topics:  # a typo or a router upstream: say so, once
                        log.warning("Connector %s waits: no topic of the topic store matches its %s (%s); topics "
                                    "now: %s", rt.name, "topics" if topics else "topics.regex",
                                    ",".join(topics) or regex, ", ".join(self.store.topics()) or "none")
                    rt.metrics.waiting_for_topics = True  # started on a later poll, once a topic exists
                    return
                if isinstance(checked.kafka, KafkaSinkPlan) and self.bus is not None:
                    rt.query = sink_stream(self.spark, checked.kafka, bus=self.bus, checkpoint=checkpoint,
                                           trigger=self.config.trigger, query_name=self._query_name(rt))
                else:
                    df = self.store.read_stream(self.spark, topics or None, regex or None,
                                                max_records_per_trigger=checked.prepared.sink_records_per_trigger)
                    if self.store.format == "delta":
                        options = self.store.source_options(topics or None, regex or None)
                        rt.lag_source = self._driver_source(lambda: build_connector(options, kind="source"))
                    rt.query = write_stream(df, checked.prepared, checkpoint=checkpoint, trigger=self.config.trigger,
                                            query_name=self._query_name(rt))
        except Exception as e:  # noqa: BLE001 - a failed start is the connector's FAILED status, with its trace
            rt.query = None
            rt.phase, rt.restarting = "FAILED", False
            rt.trace = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            log.error("Connector %s failed to start: %s", rt.name, e)
            return
        rt.phase, rt.restarting = "RUNNING", False
        rt.last_progress_at = _now()
        log.info("Connector %s started (query %s, checkpoint %s)", rt.name, rt.query.id, checkpoint)

    def checked(self, rt: ConnectorRuntime) -> CheckedConfig:
        """The connector's config checked as this worker runs it (:func:`~.validate.check_config`): once per
        config, then kept with the runtime until the config changes. Raises ConfigError."""
        if rt.checked_config is None or rt.checked_config[0] is not rt.state.config:
            rt.checked_config = (rt.state.config, check_config(rt.state.config, self.config, kind=rt.kind))
        return rt.checked_config[1]

    def _query_name(self, rt: ConnectorRuntime) -> str:
        # Query names are unique per session: a test run or notebook may run several workers.
        return f"kconnect-{rt.name}-{stable_app_id(self.config.checkpoint_root)[:6]}"

    def _has_topics(self, topics: Sequence[str], regex: str) -> bool:
        import re

        existing = kafka_topics(self.bus.admin_config()) if self.bus is not None else self.store.topics()
        if topics:
            return any(t in existing for t in topics)
        if regex:
            pattern = re.compile(f"(?:{regex})\\Z")
            return any(pattern.match(t) for t in existing)
        return bool(existing)

    @staticmethod
    def _driver_source(make: Callable[[], Any]) -> Any:
        try:
            return make()
        except Exception:  # lag is a nicety: never fail a connector over it
            log.debug("no driver-side source for lag", exc_info=True)
            return None

    # -- status -------------------------------------------------------------------------------------
    def poll(self) -> None:
        """Update every runtime's phase and metrics from its query (herder thread)."""
        self._restore_cancellation_logs()
        for rt in list(self.runtimes.values()):
            if rt.state.target_state == "STARTED" and rt.query is None and rt.metrics.waiting_for_topics:
                waiting = rt.checked_config[1] if rt.checked_config is not None else None
                if waiting is None or self._has_topics(waiting.topics, waiting.topics_regex):
                    self._start_query(rt)
                continue
            q = rt.query
            if q is None:
                continue
            if not q.isActive:
                exc = q.exception()
                self._count_progress(rt, q)
                rt.query = None
                if exc is not None:
                    rt.phase = "FAILED"
                    rt.trace = _trace_of(exc)
                    log.error("Connector %s failed: %s", rt.name,  # our message where Spark wrapped one
                              headline(str(exc)) or (str(exc).splitlines()[0] if str(exc) else exc))
                elif rt.state.target_state == "STARTED":
                    rt.phase = "FAILED"
                    rt.trace = "The connector's streaming query stopped unexpectedly"
                continue
            self._update_metrics(rt, q)

    def _update_metrics(self, rt: ConnectorRuntime, q: Any) -> None:
        m = rt.metrics
        self._count_progress(rt, q)
        idle = _now() - rt.last_progress_at
        if idle > max(5.0, 3 * self.config.trigger_interval_ms / 1000):
            m.records_in_per_sec = m.records_out_per_sec = 0.0
        if _now() - rt.last_lag_check >= 2.0 or rt.end_offset != rt.lag_checked_end:
            rt.last_lag_check, rt.lag_checked_end = _now(), rt.end_offset
            m.lag = self._lag(rt)
            m.dead_lettered = self._dead_lettered(rt)

    def _totals_file(self, name: str) -> str:
        return Locations.join(self.checkpoint_root_of(name), _TOTALS_FILE)

    def _saved_totals(self, rt: ConnectorRuntime) -> Metrics | None:
        """The totals saved by an earlier run of the connector (a worker killed with -9 included); not those of
        an earlier connector of the same name (told apart by the creation time)."""
        name = rt.name
        try:
            saved = json.loads(self.files.read_text(self._totals_file(name)))
            if saved.get("created") != rt.state.created:
                return None
            return Metrics(records_in_total=int(saved["records_in_total"]),
                           records_out_total=int(saved["records_out_total"]), batches=int(saved["batches"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            log.warning("Connector %s: its saved totals cannot be read; they count from 0", name, exc_info=True)
            return None

    def _save_totals(self, rt: ConnectorRuntime) -> None:
        m = rt.metrics
        path = self._totals_file(rt.name)
        try:
            self.files.write_text(path, json.dumps({
                "created": rt.state.created, "records_in_total": m.records_in_total,
                "records_out_total": m.records_out_total, "batches": m.batches, "last_batch_id": m.last_batch_id}))
        except OSError:
            log.warning("Connector %s: its totals cannot be saved", rt.name, exc_info=True)

    def _count_progress(self, rt: ConnectorRuntime, q: Any) -> None:
        """Add the query's progress events not counted yet to the connector's totals, and save them (beside the
        checkpoints: a restarted worker goes on from them). Also called on a query that stopped or ended, so that
        the batches it ran since the last status poll are not lost from the totals."""
        batches = rt.metrics.batches
        self._count_batches(rt, q)
        if rt.metrics.batches != batches:
            self._save_totals(rt)

    @staticmethod
    def _count_batches(rt: ConnectorRuntime, q: Any) -> None:
        m = rt.metrics
        try:
            progresses = q.recentProgress
        except Exception:  # noqa: BLE001 - the query may be stopping under us (py4j errors of any kind)
            return
        for p in progresses:
            # Each progress event once (by its timestamp). A trigger without new data reports the *next* batch
            # id with no "addBatch" duration: it is not a batch, and counting it by id would make the real batch
            # of that id look seen already and lose its records from the totals.
            stamp, bid = p.get("timestamp"), p.get("batchId")
            if stamp is None or (m.last_progress_stamp is not None and stamp <= m.last_progress_stamp):
                continue
            m.last_progress_stamp = stamp
            if bid is None or "addBatch" not in (p.get("durationMs") or {}):
                continue
            rows = int(p.get("numInputRows") or 0)
            sink_rows = (p.get("sink") or {}).get("numOutputRows")
            out = int(sink_rows) if sink_rows is not None and int(sink_rows) >= 0 else rows
            m.last_batch_id, m.batches = bid, m.batches + 1
            m.records_in_total += rows
            m.records_out_total += out
            dur = int((p.get("durationMs") or {}).get("triggerExecution") or 0)
            m.batch_duration_ms = dur
            m.records_in_per_sec = float(p.get("inputRowsPerSecond") or 0.0)
            m.records_out_per_sec = (out / (dur / 1000)) if dur else 0.0
            rt.last_progress_at = _now()
            end = ((p.get("sources") or [{}])[0]).get("endOffset")
            if end is not None:
                rt.end_offset = end

    def _lag(self, rt: ConnectorRuntime) -> int | None:
        """Records (or WAL bytes) between the query's last end offset and the source's head.

        Only ever asks ``lag()`` about an offset the query itself reported. Never ``initial_offsets()``: that
        has side effects for some sources (PostgreSQL CDC creates its replication slot there, with the
        exported snapshot of its initial load), and a slot created here, outside the query, makes the query
        find it and stream without the snapshot. Before the first batch the lag is unknown (None).
        """
        src, end = rt.lag_source, rt.end_offset
        if src is None or end is None:
            return None
        try:
            return src.lag(json.loads(end) if isinstance(end, str) else end)
        except Exception:
            log.debug("lag of %s failed", rt.name, exc_info=True)
            return None

    def _dead_lettered(self, rt: ConnectorRuntime) -> int | None:
        checked = rt.checked_config[1] if rt.checked_config is not None else None
        topic = checked.prepared.policy.dlq_topic if checked is not None else None
        if not topic:
            return None
        if self.store.format != "delta" or self.bus is not None:
            return None
        try:
            import deltalake

            path = self.store.dead_letter_table(topic)
            return int(deltalake.DeltaTable(path).count()) if os.path.isdir(path) else 0
        except Exception:
            log.debug("dead-letter count of %s failed", rt.name, exc_info=True)
            return None

    # -- storage ------------------------------------------------------------------------------------
    def remove_checkpoints(self, name: str, keep: str | None = None, *, totals: bool = True) -> None:
        """Delete the connector's checkpoints (all generations but ``keep``) and, unless ``totals`` is False (an
        offset reset: they count from the connector's creation), its saved totals."""
        root = self.checkpoint_root_of(name)
        files = self.files
        for g in files.names(root):
            p = files.join(root, g)
            if g == _TOTALS_FILE:
                if totals:
                    files.remove(p)
                continue
            if keep is None or p.rstrip("/") != keep.rstrip("/"):
                files.remove_tree(p)
        if keep is None:
            files.remove_tree(root)

    def remove_checkpoint(self, state: ConnectorState) -> None:
        """Delete one incarnation's checkpoint (its generation's), and the connector's directory once empty."""
        path = self.checkpoint(state)
        self.files.remove_tree(path)
        if not is_remote(path):  # an object store has no empty directories
            with contextlib.suppress(OSError):  # another generation is in it
                os.rmdir(os.path.dirname(path))


#: Spark loggers that report a batch cancelled by ``query.stop()`` as ERROR (with a TaskKilledException trace).
_CANCEL_NOISE = ("org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
                 "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
                 "org.apache.spark.sql.execution.datasources.v2.WritingSparkTask",
                 "org.apache.spark.util.Utils",
                 "org.apache.spark.executor.Executor",
                 "org.apache.spark.scheduler.TaskSetManager",
                 "org.apache.spark.sql.execution.streaming.MicroBatchExecution",
                 "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution")
_QUIET_SECONDS = 15.0


class _Log4jLevels:
    """Get and set log4j2 logger levels of the driver JVM (levels as names: "ERROR", "OFF"; None: inherited)."""

    def __init__(self, jvm: Any):
        self._log4j = jvm.org.apache.logging.log4j
        self._configurator = jvm.org.apache.logging.log4j.core.config.Configurator

    def get(self, name: str) -> str | None:
        level = self._log4j.LogManager.getLogger(name).getLevel()
        return None if level is None else str(level.name())

    def set(self, name: str, level: str | None) -> None:
        self._configurator.setLevel(name, self._log4j.Level.toLevel(level or "ERROR"))


def _register(spark: Any) -> None:
    # Spark discovers format("kconnect") by itself, unless its one lookup per JVM ran before the package was
    # importable or failed; registering explicitly makes the worker independent of that.

    try:
        register(spark)
    except Exception:  # already registered statically on a Spark that refuses overrides (4.0)
        log.debug("explicit kconnect registration refused", exc_info=True)


def _trace_of(exc: Any) -> str:
    desc = getattr(exc, "desc", None) or str(exc)
    stack = getattr(exc, "stackTrace", None)
    return f"{desc}\n{stack}" if stack else str(desc)
