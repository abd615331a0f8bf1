"""Spark's Python workers run under pyspark_kconnect.daemon: the installed pyspark's compiled modules instead of
pyspark.zip's sources compiled again in every forked worker."""

from __future__ import annotations

import zipfile

from pyspark_kconnect.daemon import redundant_zips


def _package(root, name: str, version: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    (root / name / "version.py").write_text(f'__version__ = "{version}"\n')


def _zip(path, name: str, version: str) -> str:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}/__init__.py", "")
        z.writestr(f"{name}/version.py", f'__version__ = "{version}"\n')
    return str(path)


def test_only_zips_of_an_installed_version_and_jars_without_python_leave_the_path(tmp_path):
    site = tmp_path / "site-packages"
    _package(site, "pyspark", "4.2.0")
    lib = tmp_path / "spark" / "python" / "lib"
    lib.mkdir(parents=True)
    same = _zip(lib / "pyspark.zip", "pyspark", "4.2.0")
    py4j = _zip(lib / "py4j-0.10.9.9-src.zip", "py4j", "0.10.9.9")  # no installed py4j: stays
    core = str(tmp_path / "spark-core_2.13-4.2.0.jar")
    with zipfile.ZipFile(core, "w") as z:
        z.writestr("org/apache/spark/SparkContext.class", "x")
    with_python = _zip(tmp_path / "python-inside.jar", "mod", "1")
    assert redundant_zips([core, same, py4j, with_python, str(site)]) == [core, same]
    other = tmp_path / "other"
    _package(other, "pyspark", "4.3.0")  # a zip of another version than the installed one: stays
    assert redundant_zips([same, str(other)]) == []
    assert redundant_zips([same]) == []  # nothing installed


def test_the_session_s_python_workers_import_the_installed_pyspark(spark):
    assert spark.conf.get("spark.python.daemon.module") == "pyspark_kconnect.daemon"

    def where(_rows):
        import sys

        import pyspark

        yield pyspark.__file__, [p for p in sys.path if p.endswith((".zip", ".jar")) and "pyspark" in p]

    file, zips = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()[0]
    assert ".zip" not in file and file.endswith("pyspark/__init__.py")
    assert zips == []
