"""Spark's JVM packages (Delta, spark-avro, spark-sql-kafka, JDBC drivers), fetched from Maven Central.

The artifacts are declared once, in ``pom.xml`` beside this module (one Maven profile per classpath). With a
``mvn`` on the PATH they are resolved into the local Maven cache (``~/.m2``) on first use and the classpath is
remembered under ``~/.cache/spark_connect_bridge/jvm``; without one, the same coordinates go to Spark's own
``spark.jars.packages`` (Ivy). Nothing is vendored.

>>> from pyspark.sql import SparkSession
>>> from spark_connect_bridge.jvm import configure_spark
>>> spark = configure_spark(SparkSession.builder.master("local[2]")).getOrCreate()   # doctest: +SKIP

``configure_spark`` is to this project what Delta's ``configure_spark_with_delta_pip`` is to Delta: it adds the
jars and, by default, Delta's SQL extension and catalog. ``classpath("kafka-broker")`` gives the jars of an
Apache Kafka broker and its tools (used by the tests to start a real broker).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import logging
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConnectError
from .class_archive import archive_java_options
from .python_launcher import _master, with_python_launcher

__all__ = ["OBJECT_STORE_PREFIXES", "POM", "SAFE_PATH_ENV", "SESSION_DEFAULTS", "Artifact", "artifacts", "classpath",
           "configure_spark", "get_or_create", "spark_version", "wants_object_stores", "with_session_defaults",
           "with_python_launcher"]

log = logging.getLogger(__name__)

POM = str(importlib.resources.files(__package__).joinpath("pom.xml"))
_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
_DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
_DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# Avro's own limits (org.apache.avro.SystemLimitException) on one string/bytes value and one array/map.
AVRO_LIMITS = ("-Dorg.apache.avro.limits.string.maxLength=67108864 -Dorg.apache.avro.limits.bytes.maxLength=67108864 "
               "-Dorg.apache.avro.limits.collectionItems.maxLength=16777216")


@dataclass(frozen=True)
class Artifact:
    """One Maven coordinate (``group:artifact:version``)."""

    group: str
    artifact: str
    version: str

    def __str__(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


def spark_version() -> str:
    """The installed pyspark's version (``4.2.0``), which the Spark packages must match."""
    import pyspark

    return pyspark.__version__.split("+")[0].split(".dev")[0]


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _properties(root: ET.Element, minor: str, *, spark: bool) -> dict[str, str]:
    """The pom's properties, with those of the profile activated by ``spark.minor=<minor>`` on top; for Spark's
    own packages (``spark``) the minor version must be one the pom declares."""
    props = {el.tag.split("}")[1]: (el.text or "").strip() for el in root.findall("m:properties/*", _NS)}
    declared = {_minor(props["spark.version"])} | {
        p.findtext("m:activation/m:property/m:value", "", _NS) for p in root.findall("m:profiles/m:profile", _NS)}
    if spark and minor not in declared:
        raise ConnectError(f"No JVM packages are declared for Spark {minor} (declared: "
                           f"{', '.join(sorted(d for d in declared if d))}): Delta Lake and Maven Central's Spark "
                           "modules for it are not available; use a declared Spark version")
    for profile in root.findall("m:profiles/m:profile", _NS):
        prop = profile.find("m:activation/m:property", _NS)
        if prop is not None and prop.findtext("m:name", "", _NS) == "spark.minor" \
                and prop.findtext("m:value", "", _NS) == minor:
            props.update({el.tag.split("}")[1]: (el.text or "").strip()
                          for el in profile.findall("m:properties/*", _NS)})
    return props


def artifacts(profile: str = "spark", version: str | None = None) -> list[Artifact]:
    """The artifacts a profile of ``pom.xml`` declares, for Spark ``version`` (default: the installed pyspark);
    Spark's own modules are those of the release the pom names for that minor version.

    >>> [a.artifact for a in artifacts("spark", "4.2.0")][:2]
    ['delta-spark_2.13', 'spark-avro_2.13']
    """
    version = version or spark_version()
    root = ET.parse(POM).getroot()
    props = _properties(root, _minor(version), spark=profile == "spark")

    def expand(text: str | None) -> str:
        text, before = (text or "").strip(), None
        while text != before:  # properties may name other properties
            before, text = text, re.sub(r"\$\{([^}]+)\}", lambda m: props[m.group(1)], text)
        return text

    found = [p for p in root.findall("m:profiles/m:profile", _NS) if p.findtext("m:id", "", _NS) == profile]
    if not found:
        raise ConnectError(f"No JVM package profile {profile!r} in {POM}")
    deps = found[0].findall("m:dependencies/m:dependency", _NS)
    return [Artifact(expand(d.findtext("m:groupId", "", _NS)), expand(d.findtext("m:artifactId", "", _NS)),
                     expand(d.findtext("m:version", "", _NS))) for d in deps]


def _cache_dir() -> str:
    return os.environ.get("KCONNECT_JVM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "spark_connect_bridge", "jvm")


def classpath(profile: str = "spark", version: str | None = None, *, mvn: str | None = None) -> list[str]:
    """The jar files of a ``pom.xml`` profile, resolved with Maven (first call) or read from the cache.

    Raises :class:`ConnectError` when Maven is not installed or cannot resolve the artifacts.
    """
    version = version or spark_version()
    artifacts(profile, version)  # an undeclared Spark version fails here, before Maven runs
    with open(POM, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    cached = os.path.join(_cache_dir(), f"{profile}-{version}-{digest}.classpath")
    if os.path.exists(cached):
        with open(cached) as f:
            jars = [p for p in f.read().strip().split(os.pathsep) if p]
        if jars and all(os.path.exists(p) for p in jars):
            return jars
    mvn = mvn or shutil.which("mvn")
    if not mvn:
        raise ConnectError("Maven (mvn) is needed to fetch the JVM packages of profile "
                           f"{profile!r}: apt-get install maven, or use spark.jars.packages (configure_spark does)")
    os.makedirs(_cache_dir(), exist_ok=True)
    with tempfile.NamedTemporaryFile("r", suffix=".classpath", dir=_cache_dir()) as out:
        cmd = [mvn, "-q", "-B", "-f", POM, "-P", profile, f"-Dspark.minor={_minor(version)}",
               "dependency:build-classpath", f"-Dmdep.outputFile={out.name}"]
        log.info("Resolving the %s JVM packages with Maven (first use; cached afterwards)", profile)
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=_cache_dir())
        if done.returncode != 0:
            errors = [ln for ln in done.stdout.splitlines() + done.stderr.splitlines() if "ERROR" in ln]
            raise ConnectError(f"Maven could not resolve the {profile} JVM packages for Spark {version}: "
                               + " ".join(errors[:3]))
        text = out.read().strip()
    with open(cached + ".tmp", "w") as f:
        f.write(text)
    os.replace(cached + ".tmp", cached)
    return [p for p in text.split(os.pathsep) if p]


def _base_name(jar: str) -> str:
    """``jackson-core-2.13.5.jar`` -> ``jackson-core``."""
    return re.sub(r"-\d[^/]*\.jar$", "", os.path.basename(jar))


def _without_spark_own(jars: list[str]) -> list[str]:
    """The jars Spark does not ship itself: transitive copies of Spark's own libraries (Scala, Jackson, Hadoop,
    log4j, Parquet, ...) in other versions would only shadow or clash with Spark's."""
    from pyspark.find_spark_home import _find_spark_home

    spark_jars = os.path.join(_find_spark_home(), "jars")
    own = {_base_name(j) for j in os.listdir(spark_jars)} if os.path.isdir(spark_jars) else set()
    return [j for j in jars if _base_name(j) not in own]


# Spark's SQL settings every session of ours starts with (a user's own setting wins). hugeMethodLimit: HotSpot
# compiles no method over 8000 bytes of bytecode, and a whole-stage-codegen method over it runs interpreted.
# Converters into Kafka make such methods (a Debezium envelope's JSON: processNext of 19,489 bytes): with the
# limit at 8000 Spark runs that stage as separate compiled operators, 2-3x faster (measured, bench/ notes in
# docs/getting-started.md). Spark's own docs recommend 8000 on HotSpot.
SESSION_DEFAULTS = {"spark.sql.codegen.hugeMethodLimit": "8000"}


# Every Python process Spark starts for us runs with a safe import path (Python 3.11's PYTHONSAFEPATH): Spark
# starts its Python workers as `python -m pyspark.daemon` in the driver's working directory, which would otherwise be
# first on their sys.path, and a connector that may write files there (a FileStreamSink) could plant a module
# (`deltalake.py`) that the next connector imports. spark.executorEnv reaches every daemon Spark starts for a Python
# function (UDFs, data sources' readers, writers and planners); the driver's own environment reaches the others (the
# lookup of `pyspark_*` data sources ignores spark.executorEnv), so it is set before the JVM starts.
SAFE_PATH_ENV = "PYTHONSAFEPATH"


def with_session_defaults(builder: Any) -> Any:
    """``builder`` with :data:`SESSION_DEFAULTS` where it does not set the key itself, and Python's safe import path
    (:data:`SAFE_PATH_ENV`) for every Python process Spark starts: in ``spark.executorEnv`` and in this process's
    environment, which the JVM that ``getOrCreate()`` launches inherits (a JVM already running keeps its own)."""
    options = getattr(builder, "_options", {})
    for key, value in SESSION_DEFAULTS.items():
        if key not in options:
            builder = builder.config(key, value)
    # the JVM's classes mapped from this machine's class archive, or written to one at exit (jvm/class_archive.py)
    java_key = "spark.driver.extraJavaOptions"
    java_options = str(options.get(java_key) or "")
    if "ArchiveClassesAtExit" not in java_options and "SharedArchiveFile" not in java_options:
        archive = archive_java_options(_master(options))
        if archive:
            builder = builder.config(java_key, " ".join(filter(None, [java_options, archive])))
    executor_key = f"spark.executorEnv.{SAFE_PATH_ENV}"
    if not options.get(executor_key):
        builder = builder.config(executor_key, "1")
    if not os.environ.get(SAFE_PATH_ENV):
        os.environ[SAFE_PATH_ENV] = "1"
    return builder


def wants_object_stores(conf: Mapping[str, Any]) -> bool:
    """Whether Spark settings ``conf`` configure Hadoop's S3A connector (a ``spark.hadoop.fs.s3a.*`` key)."""
    return any(str(k).startswith(OBJECT_STORE_PREFIXES) for k in conf)


#: Spark settings that configure an object store connector of the ``object-stores`` profile.
OBJECT_STORE_PREFIXES = ("spark.hadoop.fs.s3a.",)


def _object_store_jars(builder: Any, version: str) -> Any:
    """``builder`` with the ``object-stores`` profile's jars (hadoop-aws and its AWS SDK bundle) on the driver's and
    executors' class path. Not ``spark.jars``: Spark copies those into every application's work directory (in local
    mode too), and the SDK bundle is ~690 MB; on a cluster the same files must exist on every node (or give them in
    ``spark.jars.packages`` yourself)."""
    options = getattr(builder, "_options", {})
    try:
        jars = _without_spark_own(classpath("object-stores", version))
    except ConnectError as e:
        if shutil.which("mvn"):
            raise
        log.info("%s; falling back to spark.jars.packages", e)
        packages = [options.get("spark.jars.packages"), *(str(a) for a in artifacts("object-stores", version))]
        return builder.config("spark.jars.packages", ",".join(filter(None, packages)))
    for side in ("driver", "executor"):
        key = f"spark.{side}.extraClassPath"
        builder = builder.config(key, os.pathsep.join(filter(None, [options.get(key), *jars])))
    return builder


def configure_spark(builder: Any, *, delta: bool = True, profile: str = "spark",
                    object_stores: bool | None = None) -> Any:
    """Add the project's JVM packages to a ``SparkSession.Builder`` and return it.

    With Maven on the PATH the jars are resolved into the local Maven cache and set as ``spark.jars``;
    otherwise their coordinates go to ``spark.jars.packages`` and Spark resolves them itself. With
    ``delta=True`` Delta's SQL extension and catalog are configured too (what the delta-spark engine needs).
    With ``object_stores=True`` (default: when the builder sets a ``spark.hadoop.fs.s3a.*`` key) Hadoop's S3A
    connector is added, for ``s3a://`` checkpoints, tables and files (needs Maven: see :func:`_object_store_jars`).
    :data:`SESSION_DEFAULTS` are set where the builder does not set them.
    """
    if object_stores is None:
        object_stores = wants_object_stores(getattr(builder, "_options", {}))
    builder = with_session_defaults(builder)
    version = spark_version()
    try:
        artifacts(profile, version)
    except ConnectError as e:  # a Spark release without declared packages: the Python engines apply
        log.warning("configure_spark: %s; the session runs without them (the deltalake and fastavro engines apply)",
                    e)
        return builder
    try:
        builder = builder.config("spark.jars", ",".join(_without_spark_own(classpath(profile, version))))
    except ConnectError as e:
        if shutil.which("mvn"):
            raise
        log.info("%s; falling back to spark.jars.packages", e)
        builder = builder.config("spark.jars.packages", ",".join(str(a) for a in artifacts(profile, version)))
    # A corrupt length in an Avro datum (from_avro of a bad Kafka record) would make Avro allocate up to 2 GiB and
    # the OutOfMemoryError kills the executor (in local mode the driver); with limits it is a record error.
    for side in ("driver", "executor"):
        key = f"spark.{side}.extraJavaOptions"
        builder = builder.config(key, " ".join(filter(None, [getattr(builder, "_options", {}).get(key), AVRO_LIMITS])))
    if object_stores:
        builder = _object_store_jars(builder, version)
    if delta and any(a.group == "io.delta" for a in artifacts(profile, version)):
        builder = builder.config("spark.sql.extensions", _DELTA_EXTENSION) \
                         .config("spark.sql.catalog.spark_catalog", _DELTA_CATALOG)
    return builder


def get_or_create(builder: Any, secrets: Mapping[str, str]) -> Any:
    """``builder.getOrCreate()`` with the Spark settings ``secrets`` (values that are credentials, such as a
    resolved ``spark.hadoop.fs.s3a.secret.key``) kept off the JVM's command line.

    pyspark starts the driver's JVM as ``spark-submit --conf key=value ...`` with every builder setting, so any
    local user reads them in ``ps``. Here they reach the new JVM through ``spark-submit --extra-properties-file``,
    a file only this user can read, deleted once the JVM has read it (``spark-defaults.conf`` still loads, and
    Spark trims a value read from a properties file as it trims one in ``spark-defaults.conf``). When a Spark
    context already runs in this process, they are set on the session as pyspark sets builder options then."""
    from pyspark import SparkContext

    if not secrets:
        return builder.getOrCreate()
    if SparkContext._active_spark_context is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        spark = builder.getOrCreate()
        for key, value in secrets.items():
            spark._jsparkSession.sessionState().conf().setConfString(key, value)
        return spark
    with _submit_properties(secrets):
        return builder.getOrCreate()


@contextlib.contextmanager
def _submit_properties(conf: Mapping[str, str]) -> Iterator[None]:
    """``PYSPARK_SUBMIT_ARGS`` naming a 0600 properties file that holds ``conf``, for the JVM pyspark launches."""
    fd, path = tempfile.mkstemp(prefix="kconnect-spark-", suffix=".properties")
    before = os.environ.get("PYSPARK_SUBMIT_ARGS")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(f"{_escape_property(k)}={_escape_property(v)}\n" for k, v in conf.items())
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--extra-properties-file {shlex.quote(path)} {before or 'pyspark-shell'}"
        yield
    finally:
        if before is None:
            os.environ.pop("PYSPARK_SUBMIT_ARGS", None)
        else:
            os.environ["PYSPARK_SUBMIT_ARGS"] = before
        os.unlink(path)


def _escape_property(text: str) -> str:
    """``text`` as java.util.Properties reads it back (a key or a value)."""
    special = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}
    return "".join(special.get(c) or ("\\" + c if c in " =:#!" else c) for c in text)
