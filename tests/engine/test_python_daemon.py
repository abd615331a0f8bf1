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


def test_an_installed_pyspark_s_own_zips_and_jar_and_same_version_zips_leave_the_path(tmp_path):
    site = tmp_path / "site-packages"
    _package(site, "pyspark", "4.2.0")
    _package(site, "py4j", "0.10.9.9")
    own = site / "pyspark" / "python" / "lib"
    own.mkdir(parents=True)
    (site / "pyspark" / "jars").mkdir()
    own_zip = _zip(own / "pyspark.zip", "pyspark", "0")  # its own: not opened (the content does not count)
    own_py4j = _zip(own / "py4j-0.10.9.9-src.zip", "py4j", "0")
    core = str(site / "pyspark" / "jars" / "spark-core_2.13-4.2.0.jar")
    with zipfile.ZipFile(core, "w") as z:
        z.writestr("org/apache/spark/SparkContext.class", "x")
    other_jar = str(site / "pyspark" / "jars" / "spark-sql_2.13-4.2.0.jar")
    assert redundant_zips([core, own_zip, own_py4j, other_jar, str(site)]) == [core, own_zip, own_py4j]

    home = tmp_path / "spark" / "python" / "lib"  # a SPARK_HOME elsewhere: its zips compared by version
    home.mkdir(parents=True)
    same = _zip(home / "pyspark.zip", "pyspark", "4.2.0")
    older = _zip(tmp_path / "pyspark.zip", "pyspark", "4.1.0")
    elsewhere_core = _zip(tmp_path / "spark-core_2.13-4.2.0.jar", "x", "0")
    assert redundant_zips([same, older, elsewhere_core, str(site)]) == [same]
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
