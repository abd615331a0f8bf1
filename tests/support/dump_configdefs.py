"""Regenerate ``spark_connect_bridge/config/declared/*.json``: the keys each original class declares.

Runs ``tests/support/configdefs/DumpConfigDefs.java`` (java source-file mode) on the classpath of each
``spark_connect_bridge/jvm/pom.xml`` profile (Maven Central artifacts, resolved into ``~/.m2``) and writes one data
file per class, with the Maven coordinates of the artifact it came from. The checked-in files are what the tests
and the runtime read; no JVM is needed after this step.

    python -m tests.support.dump_configdefs            # every class below
    python -m tests.support.dump_configdefs --check    # exit 1 when a checked-in file differs from the originals

Classes that are not on Maven Central (Confluent's JDBC connectors, datagen, Avro and JSON Schema converters) are
written from their GitHub sources: see ``spark_connect_bridge/config/declared/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from spark_connect_bridge.config.declared_keys import DECLARED_DIR
from spark_connect_bridge.jvm import classpath

_KAFKA = "org.apache.kafka.connect"
_SMTS = ["Cast", "DropHeaders", "ExtractField", "Filter", "Flatten", "HeaderFrom", "HoistField", "InsertField",
         "InsertHeader", "MaskField", "RegexRouter", "ReplaceField", "SetSchemaMetadata", "TimestampConverter",
         "TimestampRouter", "ValueToKey"]
_KEY_VALUE = {"Cast", "ExtractField", "Flatten", "HeaderFrom", "HoistField", "InsertField", "MaskField",
              "ReplaceField", "SetSchemaMetadata", "TimestampConverter"}

#: pom.xml profile (beside kafka-connect) -> the classes dumped from it. An SMT with Key and Value variants is
#: dumped as its Value variant: both declare the same keys.
CLASSES: dict[str, list[str]] = {
    "kafka-connect": [
        f"{_KAFKA}.runtime.standalone.StandaloneConfig", f"{_KAFKA}.runtime.distributed.DistributedConfig",
        f"{_KAFKA}.runtime.ConnectorConfig", f"{_KAFKA}.runtime.SinkConnectorConfig",
        f"{_KAFKA}.runtime.SourceConnectorConfig",
        f"{_KAFKA}.file.FileStreamSourceConnector", f"{_KAFKA}.file.FileStreamSinkConnector",
        *[f"{_KAFKA}.transforms.{name}" + ("$Value" if name in _KEY_VALUE else "") for name in _SMTS],
        *[f"{_KAFKA}.transforms.predicates.{name}" for name in ("TopicNameMatches", "HasHeaderKey",
                                                                 "RecordIsTombstone")],
        f"{_KAFKA}.json.JsonConverter", f"{_KAFKA}.storage.StringConverter",
        f"{_KAFKA}.storage.SimpleHeaderConverter", f"{_KAFKA}.converters.ByteArrayConverter",
        *[f"{_KAFKA}.converters.{name}Converter" for name in ("Boolean", "Double", "Float", "Integer", "Long",
                                                                "Short")],
    ],
    "debezium": ["io.debezium.connector.postgresql.PostgresConnector",
                 "io.debezium.transforms.ExtractNewRecordState", "io.debezium.transforms.ExtractChangedRecordState",
                 "io.debezium.transforms.outbox.EventRouter", "io.debezium.transforms.ByLogicalTableRouter"],
    "debezium-mysql": ["io.debezium.connector.mysql.MySqlConnector"],
    "debezium-mariadb": ["io.debezium.connector.mariadb.MariaDbConnector"],
    "debezium-jdbc": ["io.debezium.connector.jdbc.JdbcSinkConnector"],
    "iceberg-kafka-connect": ["org.apache.iceberg.connect.IcebergSinkConnector"],
}
_JAVA_SOURCE = Path(__file__).parent / "configdefs" / "DumpConfigDefs.java"
_M2_JAR = re.compile(r"/repository/(?P<group>.+)/(?P<artifact>[^/]+)/(?P<version>[^/]+)/[^/]+\.jar$")


def dump(profile: str, classes: list[str]) -> dict[str, dict]:
    """The declared keys of ``classes``, read from the jars of ``profile`` (plus Kafka Connect's runtime)."""
    jars = classpath("kafka-connect") + ([] if profile == "kafka-connect" else classpath(profile))
    java = os.environ.get("JAVA", shutil.which("java") or "java")
    done = subprocess.run([java, "-cp", os.pathsep.join(jars), str(_JAVA_SOURCE), *classes],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"DumpConfigDefs failed for {profile}:\n{done.stderr[-4000:]}")
    out = {}
    for cls, entry in json.loads(done.stdout).items():
        m = _M2_JAR.search(entry["source"])
        if not m:
            raise RuntimeError(f"{cls} was not loaded from a Maven artifact: {entry['source']}")
        out[cls] = {"class": cls, "source": f"{m['group'].replace('/', '.')}:{m['artifact']}:{m['version']} "
                                           "(Maven Central), ConfigDef dumped by tests/support/dump_configdefs.py",
                    "keys": entry["keys"]}
    return out


def file_of(cls: str) -> Path:
    return DECLARED_DIR / f"{cls.replace('$Value', '')}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the checked-in files, write nothing")
    parser.add_argument("profiles", nargs="*", help=f"profiles to dump (default: all of {sorted(CLASSES)})")
    args = parser.parse_args(argv)
    differ = []
    for profile in args.profiles or CLASSES:
        for cls, data in dump(profile, CLASSES[profile]).items():
            text = json.dumps(data, indent=1) + "\n"
            path = file_of(cls)
            if args.check:
                if not path.exists() or path.read_text() != text:
                    differ.append(path.name)
            else:
                path.write_text(text)
                print(f"{path.name}: {len(data['keys'])} keys")
    if differ:
        print("differ from the originals: " + ", ".join(differ), file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
