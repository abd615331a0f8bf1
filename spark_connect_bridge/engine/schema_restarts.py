"""A sink typed from its messages, run as a plain streaming query while its messages' schemas hold.

A sink whose types come from each micro-batch's messages (JsonConverter with ``schemas.enable=true`` and no
``spark.schema``) runs through :class:`~.pipeline.BatchRouter` in ``foreachBatch``: the DataFrame built for each
micro-batch is analysed and planned again, every micro-batch (~0.5 CPU-s each, docs/benchmarks.md). For a sink that
recognises a replayed batch (``delivery = "exactly-once"``) and is strict (``errors.tolerance=none``, no source's
failed records), on a classic session at any trigger but ``once``, :class:`SchemaFollowingQuery` runs it so only
until a micro-batch has been written typed by its messages' schema texts: at the start of the next one, before it
reads anything, the router ends its query (:class:`HandOver`; that micro-batch stays in the checkpoint's offset log,
not committed) and a plain streaming query starts on the same checkpoint, typed by those texts behind the same guard
(:meth:`~spark_connect_bridge.converters.json_envelopes.BatchTexts.guarded`), analysed once, written by the
connector's streaming writer. It runs the uncommitted micro-batch first, with the same batch id. A message with
another schema fails that query's write, which the sink aborts; the router's query then runs again from the
checkpoint, types that micro-batch from its messages, writes it, and hands over again.

Callers see one query (:class:`SchemaFollowingQuery`): one ``id`` (the checkpoint's), ``isActive`` until the last
run ends, the progress of every run, ``exception()``, ``awaitTermination()``, ``processAllAvailable()`` and
``stop()``. Spark's ERROR line for the router's query ending by a hand-over is filtered out (by its run id only).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..converters.json_envelopes import SCHEMAS_CHANGED

log = logging.getLogger(__name__)

__all__ = ["HAND_OVER", "HandOver", "HandOverSignal", "SchemaFollowingQuery"]

#: The text of the router's hand-over, found again in the ended query's exception.
HAND_OVER = "KCONNECT_HAND_OVER: the micro-batch goes to the plain query typed by the previous one's schemas"
#: Finished runs whose progress is kept (``recentProgress``).
KEPT_RUNS = 8


class HandOver(Exception):
    """Raised by the router at the start of a micro-batch once the previous one was written typed by texts."""


class _NotHandOver(logging.Filter):
    """py4j logs every exception a Python callback raises as ERROR with its trace: not a hand-over."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, HandOver)


logging.getLogger("py4j.clientserver").addFilter(_NotHandOver())


class HandOverSignal:
    """Between a :class:`~.pipeline.BatchRouter` and its :class:`SchemaFollowingQuery`: the router says when a
    micro-batch was written typed by texts (:meth:`typed`) and, at the next one, ends its query
    (:meth:`hand_over`)."""

    def __init__(self) -> None:
        self._typed = threading.Event()
        self.handed_over = False  # the router's run ended by hand_over (not by an error's text: a record's error
        # message may quote the record)
        self.query: Any = None  # the router's query, set by SchemaFollowingQuery once started
        self.filters: list[Any] = []

    def typed(self) -> None:
        self._typed.set()

    def due(self) -> bool:
        return self._typed.is_set()

    def reset(self, query: Any = None) -> None:
        self._typed.clear()
        self.handed_over = False
        self.query = query

    def hand_over(self, batch_id: int) -> None:
        """End the router's query before micro-batch ``batch_id`` reads anything (it stays uncommitted)."""
        if self.query is not None:
            self.filters.append(_deny_terminated_error(self.query))
        self.handed_over = True
        raise HandOver(f"{HAND_OVER} (batch {batch_id})")

    def clear_filters(self) -> None:
        while self.filters:
            remove = self.filters.pop()
            remove()


def _deny_terminated_error(query: Any) -> Callable[[], None]:
    """Filter out Spark's ERROR "Query [...runId = <run>] terminated with error" of ``query``'s run (a hand-over
    is no error); returns the filter's removal. Nothing else is filtered: not another run, not another message."""
    try:
        l4j = _jvm().org.apache.logging.log4j
        regex = rf"(?s).*runId = {query.runId}\] terminated with error.*"
        f = l4j.core.filter.RegexFilter.createFilter(regex, None, False, l4j.core.Filter.Result.DENY,
                                                     l4j.core.Filter.Result.NEUTRAL)
        f.start()
        config = l4j.LogManager.getContext(False).getConfiguration()
        config.addFilter(f)
    except Exception:
        log.debug("no log4j filter for the hand-over", exc_info=True)
        return lambda: None

    def remove() -> None:
        try:
            config.removeFilter(f)
        except Exception:
            log.debug("removing the hand-over's log4j filter failed", exc_info=True)

    return remove


def _activate(spark: Any) -> None:
    """Make ``spark`` this thread's active session in the JVM (py4j pins a JVM thread to each Python thread)."""
    jvm, jss = getattr(spark, "_jvm", None), getattr(spark, "_jsparkSession", None)
    if jvm is not None and jss is not None:  # a classic session (Spark Connect resolves on its server)
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(jss)


def _jvm() -> Any:
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None or sc._jvm is None:
        raise RuntimeError("no classic SparkContext")
    return sc._jvm


class SchemaFollowingQuery:
    """One streaming query to its callers, run as the router's query and plain queries in turn on one checkpoint
    (the module's docstring says when). ``start_router`` / ``start_plain`` start each run (the router's forgets
    what it learnt before; the plain one is typed by what the router's last run learnt); ``report`` records a
    plain run's micro-batch counts as the router records its own."""

    def __init__(self, spark: Any, name: str, signal: HandOverSignal, start_router: Callable[[], Any],
                 start_plain: Callable[[], Any], report: Callable[[int, dict], None]):
        self._name, self._spark = name, spark
        self._signal, self._start_router, self._start_plain, self._report = signal, start_router, start_plain, report
        self._lock = threading.RLock()
        self._done = threading.Event()
        self._runs: list[Any] = []
        self._stopped = False
        self._exception: Any = None
        self._plain = False
        self._reported = -1
        self._current = self._router()  # a run that cannot start raises here, as Spark's start() does
        self._id = self._current.id
        self._thread = threading.Thread(target=self._supervise, name=f"kconnect-follow-{name}", daemon=True)
        self._thread.start()

    # -- runs --------------------------------------------------------------------------------------------
    def _router(self) -> Any:
        self._signal.reset()
        q = self._start_router()
        self._signal.reset(q)
        return q

    def _supervise(self) -> None:
        try:
            _activate(self._spark)  # Spark finds the session's Python data sources through the thread's session
            while True:
                q = self._current
                self._await(q)
                exc = q.exception()
                with self._lock:
                    self._signal.clear_filters()
                    if self._plain:
                        self._harvest(q)
                    if self._stopped:
                        return
                    text = str(exc) if exc is not None else ""
                    if not self._plain and self._signal.handed_over and HAND_OVER in text:
                        log.info("%s: its schemas held over a micro-batch; the next ones run in a plain streaming "
                                 "query typed by them", self._name)
                        start, self._plain = self._start_plain, True
                    elif self._plain and SCHEMAS_CHANGED in text:
                        log.info("%s: a message carries another schema; its micro-batch is typed again from its "
                                 "messages", self._name)
                        start, self._plain = self._router, False
                    else:
                        self._exception = exc
                        return
                    self._runs = [*self._runs, q][-KEPT_RUNS:]
                    self._current = start()
        except Exception as e:  # noqa: BLE001 - a run that could not start ends the query with its error
            log.error("%s: restarting its query failed: %s", self._name, e)
            self._exception = e
        finally:
            self._signal.clear_filters()
            self._done.set()

    def _await(self, q: Any) -> None:
        while True:
            try:
                if q.awaitTermination(0.5):
                    return
            except Exception:  # noqa: BLE001 - it ended with an error: exception() has it
                return
            if self._plain:
                self._harvest(q)

    def _harvest(self, q: Any) -> None:
        """A plain run's micro-batches into the router's per-batch metrics (``BATCH_METRICS``), each once."""
        try:
            progresses = q.recentProgress
        except Exception:  # noqa: BLE001 - stopping under us
            return
        for p in progresses:
            bid = p["batchId"]
            if bid is None or bid <= self._reported or "addBatch" not in (p["durationMs"] or {}):
                continue
            self._reported = bid
            row = (p["observedMetrics"] or {}).get("kconnect")
            counts = row.asDict() if row is not None and hasattr(row, "asDict") else dict(row or {})
            records = int(counts.get("records") or p["numInputRows"] or 0)
            self._report(bid, {"batch_id": bid, "records": records, "failed": 0, "dead_lettered": 0,
                               "written": records})

    # -- StreamingQuery ------------------------------------------------------------------------------------
    @property
    def id(self) -> Any:
        return self._id

    @property
    def runId(self) -> Any:
        return self._current.runId

    @property
    def name(self) -> Any:
        return self._current.name

    @property
    def isActive(self) -> bool:
        return not self._done.is_set()

    @property
    def status(self) -> dict:
        try:
            return self._current.status
        except Exception:  # noqa: BLE001 - between runs
            return {"message": "Restarting", "isDataAvailable": False, "isTriggerActive": False}

    @property
    def lastProgress(self) -> Any:
        last = self._current.lastProgress
        for q in reversed(self._runs):
            if last is not None:
                break
            last = q.lastProgress
        return last

    @property
    def recentProgress(self) -> list:
        return [p for q in [*self._runs, self._current] for p in q.recentProgress]

    def exception(self) -> Any:
        return self._exception if self._done.is_set() else None

    def awaitTermination(self, timeout: float | None = None) -> bool | None:
        ended = self._done.wait(timeout)
        if ended and self._exception is not None:
            raise self._exception
        return ended if timeout is not None else None

    def processAllAvailable(self) -> None:
        while True:
            q = self._current
            with contextlib.suppress(Exception):  # the run ended (a hand-over, a schema change, a failure)
                q.processAllAvailable()
            while self._current is q and not q.isActive and not self._done.is_set():
                time.sleep(0.05)  # the next run is starting
            if self._done.is_set():
                if self._exception is not None:
                    raise self._exception
                return
            if self._current is q:
                return

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            q = self._current
        q.stop()
        self._thread.join()

    def explain(self, extended: bool = False) -> None:
        self._current.explain(extended)

    def __getattr__(self, item: str) -> Any:  # anything else of StreamingQuery: the current run's
        if item.startswith("_"):
            raise AttributeError(item)
        return getattr(self._current, item)
