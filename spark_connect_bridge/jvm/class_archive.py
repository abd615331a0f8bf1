"""The Spark JVM's classes from a class-data archive (the JDK's CDS), made by an earlier session of this machine.

A Spark JVM loads and verifies ~20,000 classes before its session is up, most of them the same every time. The JDK
keeps classes it loaded in an archive file (``-XX:ArchiveClassesAtExit``: written when the JVM exits) and maps them
from there at the next start (``-XX:SharedArchiveFile``), already parsed and verified. Measured (2026-11-29, idle, a
``local[2]`` session up and running ``spark.range(1).collect()``, then the worker's warm-up): the session up in
6.5-7.4 s instead of 12.4-12.6 s, 10.7-12.3 CPU-s of the JVM instead of 20.3-20.4; the warm-up 3.3-4.5 CPU-s instead
of 4.9-5.8 (docs/benchmarks.md).

:func:`archive_java_options` gives a session those options: a session finding no archive for its JDK and Spark's
class path writes one as its JVM exits (to a ``.part`` file of its own); a later session checks a finished one with
the JDK itself (``-Xshare:on -XX:+VerifySharedSpaces``, Spark's class path) and renames it into place before using
it. A truncated or foreign archive makes the JVM abort at start, so nothing unchecked is ever used, and only from a
directory only this user can write to (``~/.cache/spark_connect_bridge/jvm-classes``, ``$XDG_CACHE_HOME``): the JVM
runs what the archive holds. Classes of the session's own jars (``spark.jars``) are archived too; the JDK uses one
only where the class file it is about to define is the archived one (size and CRC). Only for a local master on a
POSIX system, and where the directories Spark puts on the JVM's class path (its conf directory, ``HADOOP_CONF_DIR``,
``YARN_CONF_DIR``) are absent or empty: the JDK writes no archive for a class path with a non-empty directory (a
pip-installed pyspark has no conf directory). ``KCONNECT_CLASS_ARCHIVE=off`` turns it off, or a directory moves it.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
import uuid

__all__ = ["ARCHIVE_ENV", "archive_java_options", "archive_directory", "promote", "write_archive"]

log = logging.getLogger(__name__)

#: ``off`` (or ``false``, ``0``, ``no``) turns the archive off; a directory keeps it there instead.
ARCHIVE_ENV = "KCONNECT_CLASS_ARCHIVE"
#: The JDK's CDS messages (a class it skips while writing, an archive of another class path) stay off the output.
QUIET = "-Xlog:cds*=off"
#: An archive of another JDK or Spark is removed when a new one is put in place this many days after it was made.
KEEP_DAYS = 30
#: A ``.part`` newer than this may still be written by its JVM.
SETTLE_SECONDS = 10.0


def archive_directory() -> str | None:
    """The private directory of the archives, or None where turned off or not private to this user."""
    chosen = os.environ.get(ARCHIVE_ENV, "")
    if chosen.strip().lower() in ("off", "false", "0", "no", "none"):
        return None
    directory = chosen or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                       "spark_connect_bridge", "jvm-classes")
    from .python_launcher import _private_dir

    if not _private_dir(directory):
        log.debug("class archives not used: %s is not a directory only this user can write to", directory)
        return None
    return directory


def _java() -> str | None:
    """The java Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the PATH's."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.isfile(java) else None


def _class_path_dirs_empty(spark_home: str) -> bool:
    """Whether every directory Spark's launcher puts on the JVM's class path (the conf directory, Hadoop's and
    YARN's when set) is absent or empty: the JDK refuses to write an archive for a class path with a non-empty
    directory ("Cannot have non-empty directory in paths", printed as the JVM exits), and Spark's other class path
    variables may hold anything."""
    if os.environ.get("SPARK_DIST_CLASSPATH") or os.environ.get("SPARK_EXTRA_CLASSPATH"):
        return False
    dirs = [os.environ.get("SPARK_CONF_DIR") or os.path.join(spark_home, "conf"),
            os.environ.get("HADOOP_CONF_DIR"), os.environ.get("YARN_CONF_DIR")]
    for directory in filter(None, dirs):
        try:
            if os.listdir(directory):
                return False
        except FileNotFoundError:
            continue
        except OSError:
            return False
    return True


def _key(java: str, spark_home: str) -> str:
    """What an archive is valid for: the JDK (its binary and ``release``) and Spark's class path (each jar's name,
    size and time)."""
    digest = hashlib.sha256()
    jdk = os.path.dirname(os.path.dirname(java))
    for path in (java, os.path.join(jdk, "release"), os.path.join(jdk, "lib", "modules")):
        try:
            st = os.stat(path)
            digest.update(f"{path}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        except OSError:
            digest.update(f"{path}:-\n".encode())
    digest.update((os.environ.get("SPARK_CONF_DIR") or spark_home).encode())
    for jar in sorted(glob.glob(os.path.join(spark_home, "jars", "*.jar"))):
        st = os.stat(jar)
        digest.update(f"{os.path.basename(jar)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _private_file(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def _check(java: str, part: str, scratch: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([java, f"-XX:SharedArchiveFile={part}", "-Xshare:on", "-XX:-CreateCoredumpOnCrash",
                           f"-XX:ErrorFile={scratch}/hs_err.log", *options, "-version"],
                          capture_output=True, text=True, timeout=60, cwd=scratch)


def _usable(part: str, java: str, spark_home: str) -> bool:
    """Whether the JDK maps ``part`` whole (its checksums verified) with the class path it was written for, which
    must be jars of Spark's own (``$SPARK_HOME/jars``). A truncated archive aborts that JVM, not a session's."""
    jars = os.path.join(os.path.realpath(spark_home), "jars") + os.sep
    with tempfile.TemporaryDirectory() as scratch:  # where a crashing check would leave its hs_err file
        try:
            header = _check(java, part, scratch, "-Xlog:class+path=info")
            expected = [line.partition("Expecting -Djava.class.path=")[2] for line in header.stdout.splitlines()
                        if "Expecting -Djava.class.path=" in line]
            class_path = expected[-1].strip() if expected else ""
            if not class_path or not all(os.path.realpath(entry).startswith(jars)
                                         for entry in class_path.split(os.pathsep)):
                log.debug("class archive %s refused: written for the class path %r", part, class_path[:300])
                return False
            done = _check(java, part, scratch, "-XX:+VerifySharedSpaces", "-cp", class_path)
        except (OSError, subprocess.TimeoutExpired) as e:
            log.debug("class archive %s not checked: %s", part, e)
            return False
    if done.returncode != 0:
        log.debug("class archive %s refused by the JDK: %s", part, (done.stdout + done.stderr).strip()[-300:])
    return done.returncode == 0


def promote(directory: str, java: str, spark_home: str, settle: float | None = None) -> str | None:
    """The checked archive for this JDK and Spark (``spark-<key>.jsa``), after renaming a finished ``.part`` (one
    not written to for ``settle`` seconds, default :data:`SETTLE_SECONDS`) into place where there is none yet; None
    where there is none. Refused and stale parts are removed."""
    key = _key(java, spark_home)
    final = os.path.join(directory, f"spark-{key}.jsa")
    if os.path.exists(final) and not _private_file(final):
        log.warning("the Spark JVM's class archive %s is not this user's alone: removed, not used", final)
        os.remove(final)
    for part in sorted(glob.glob(os.path.join(directory, f"spark-{key}.*.part"))):
        try:
            settled = time.time() - os.stat(part).st_mtime >= (SETTLE_SECONDS if settle is None else settle)
        except OSError:
            continue
        if not settled:
            continue
        if not os.path.exists(final) and _private_file(part) and _usable(part, java, spark_home):
            os.replace(part, final)
            log.info("the Spark JVM's class archive %s is in place: later sessions start from it", final)
            _forget_old(directory, final)
        else:
            with contextlib.suppress(OSError):
                os.remove(part)
    return final if _private_file(final) else None


def _forget_old(directory: str, kept: str) -> None:
    """Archives of other JDKs or Spark installations not renewed for :data:`KEEP_DAYS` (a pyspark upgraded, a
    venv removed): each is ~160 MB."""
    for other in glob.glob(os.path.join(directory, "spark-*.jsa")):
        with contextlib.suppress(OSError):
            if other != kept and time.time() - os.stat(other).st_mtime > KEEP_DAYS * 86400:
                os.remove(other)


def archive_java_options(master: str) -> str | None:
    """The JVM options of a session with ``master``: map this machine's checked archive, or write one at exit;
    None where not used (see the module's doc)."""
    if os.name != "posix" or not master.startswith("local"):
        return None
    directory, java = archive_directory(), _java()
    if directory is None or java is None:
        return None
    from .python_launcher import _spark_home

    spark_home = _spark_home()
    if not _class_path_dirs_empty(spark_home):
        log.debug("no class archive: a directory on Spark's class path is not empty (its conf directory)")
        return None
    try:
        final = promote(directory, java, spark_home)
    except OSError as e:
        log.debug("class archives not used: %s", e)
        return None
    if final is not None:
        return f"-XX:SharedArchiveFile={final} {QUIET}"
    part = os.path.join(directory, f"spark-{_key(java, spark_home)}.{uuid.uuid4().hex[:12]}.part")
    return f"-XX:ArchiveClassesAtExit={part} {QUIET}"


_WRITER = """
from pyspark.sql import SparkSession
from spark_connect_bridge.jvm import configure_spark
spark = configure_spark(SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")).getOrCreate()
spark.range(1).collect()
print(spark.sparkContext._gateway.proc.pid, flush=True)
spark.stop()
"""


def write_archive(python: str, timeout: float = 300.0) -> str | None:
    """Make this machine's archive now, where there is none: a session of ``python`` (with this package) that
    starts, runs one job and stops, then its JVM's archive checked and put in place as the next session would.
    For a machine image or a CI job: every later session maps it from its start.
    The archive's path, or None (turned off, not local, or the JVM wrote none)."""
    options = archive_java_options("local[1]")
    if options is None or not options.startswith("-XX:ArchiveClassesAtExit="):
        return options.split()[0].partition("=")[2] if options else None
    directory, java = archive_directory(), _java()
    assert directory is not None and java is not None
    from .python_launcher import _spark_home

    spark_home = _spark_home()
    try:
        env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON") or python}
        done = subprocess.run([python, "-c", _WRITER], capture_output=True, text=True, timeout=timeout, env=env)
        pid = int(done.stdout.split()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
        log.debug("no class archive written: %s", e)
        return None
    deadline = time.monotonic() + timeout
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:  # it writes the archive as it exits
        time.sleep(0.2)
    return promote(directory, java, spark_home, settle=0.0)
