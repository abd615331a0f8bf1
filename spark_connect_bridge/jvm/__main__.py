"""``python -m spark_connect_bridge.jvm [PROFILE ...]``: resolve the JVM packages of ``pom.xml`` profiles into the
local Maven cache (default: ``spark``) and print each profile's classpath size."""

from __future__ import annotations

import sys

from . import classpath, spark_version


def main(argv: list[str]) -> int:
    for profile in argv or ["spark"]:
        jars = classpath(profile)
        print(f"{profile}: {len(jars)} jars resolved for Spark {spark_version()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
