"""The Spark JVM's class archive (jvm/class_archive.py): written by a JVM as it exits, checked by the JDK before any
session maps it, and never taken from a place others can write to."""

import os
import subprocess

import pytest

from spark_connect_bridge.jvm import class_archive
from spark_connect_bridge.jvm.python_launcher import _spark_home


@pytest.fixture
def archives(tmp_path, monkeypatch):
    directory = tmp_path / "classes"
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, str(directory))
    monkeypatch.setattr(class_archive, "SETTLE_SECONDS", 0.0)
    # a class path without a non-empty directory (the run's own SPARK_CONF_DIR holds its spark-defaults.conf)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "no-conf"))
    for name in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH", "SPARK_EXTRA_CLASSPATH"):
        monkeypatch.delenv(name, raising=False)
    return directory


def _write_archive(option: str) -> str:
    """What a session's JVM does with ``option`` (``-XX:ArchiveClassesAtExit=<part>``), on a small program of
    Spark's own jars: its loaded classes written to ``<part>`` as it exits."""
    part = option.split()[0].partition("=")[2]
    launcher = next(p for p in os.listdir(os.path.join(_spark_home(), "jars")) if p.startswith("spark-launcher_"))
    subprocess.run([class_archive._java(), option.split()[0], class_archive.QUIET, "-cp",
                    os.path.join(_spark_home(), "jars", launcher), "org.apache.spark.launcher.Main"],
                   capture_output=True, timeout=60)
    return part


def test_a_session_writes_the_archive_and_the_next_one_maps_it_once_checked(archives):
    first = class_archive.archive_java_options("local[2]")
    assert first is not None and first.startswith("-XX:ArchiveClassesAtExit=") and class_archive.QUIET in first
    part = _write_archive(first)
    assert os.path.getsize(part) > 0 and oct(archives.stat().st_mode & 0o777) == "0o700"
    second = class_archive.archive_java_options("local[2]")
    [final] = archives.glob("spark-*.jsa")
    assert second == f"-XX:SharedArchiveFile={final} {class_archive.QUIET}" and not os.path.exists(part)
    # the JDK maps it: a JVM with it starts
    assert subprocess.run([class_archive._java(), second.split()[0], "-version"], capture_output=True).returncode == 0
    assert class_archive.archive_java_options("yarn") is None  # a file on this machine: local masters only


def test_a_truncated_archive_is_refused_and_removed(archives):
    part = _write_archive(class_archive.archive_java_options("local[1]"))
    with open(part, "rb") as whole:
        head = whole.read(os.path.getsize(part) // 2)
    os.chmod(part, 0o600)
    with open(part, "wb") as cut:  # a JVM killed while it wrote its archive
        cut.write(head)
    option = class_archive.archive_java_options("local[1]")
    assert option is not None and option.startswith("-XX:ArchiveClassesAtExit=")  # written again, not mapped
    assert not os.path.exists(part) and not list(archives.glob("*.jsa"))


def test_an_archive_others_can_write_is_never_mapped(archives):
    # attack: the JVM runs what an archive holds; one planted where another user can write must not be used
    part = _write_archive(class_archive.archive_java_options("local[1]"))
    assert class_archive.archive_java_options("local[1]").startswith("-XX:SharedArchiveFile=")
    [final] = archives.glob("*.jsa")
    os.chmod(final, 0o666)
    assert class_archive.archive_java_options("local[1]").startswith("-XX:ArchiveClassesAtExit=")
    assert not final.exists()  # removed: a checked one takes its place
    os.chmod(archives, 0o777)
    assert class_archive.archive_java_options("local[1]") is None
    assert not os.path.exists(part)


def test_turned_off(archives, monkeypatch):
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, "off")
    assert class_archive.archive_java_options("local[2]") is None


def test_no_archive_where_a_class_path_directory_is_not_empty(archives, monkeypatch, tmp_path):
    # The JDK refuses to write one then ("Cannot have non-empty directory in paths", printed as the JVM exits):
    # a SPARK_CONF_DIR with a spark-defaults.conf, as this test run's
    conf = tmp_path / "conf"
    conf.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    assert class_archive.archive_java_options("local[1]").startswith("-XX:ArchiveClassesAtExit=")
    (conf / "spark-defaults.conf").write_text("spark.ui.enabled false\n")
    assert class_archive.archive_java_options("local[1]") is None
    assert class_archive.write_archive("python-not-run") is None


def test_the_test_sessions_jvm_has_none(spark):
    # tests/conftest.py's SPARK_CONF_DIR holds the run's spark-defaults.conf: no archive written, none mapped
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    assert "Archive" not in options, options
