"""``python -m spark_connect_bridge.jvm [PROFILE ...]``: resolve the JVM packages of ``pom.xml`` profiles into the
local Maven cache (default: ``spark``) and print each profile's classpath size."""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET

from ..errors import ConnectError
from . import _NS, POM, classpath, spark_version


def _profiles() -> list[str]:
    return [p.findtext("m:id", "", _NS) for p in ET.parse(POM).getroot().findall("m:profiles/m:profile", _NS)
            if p.find("m:dependencies", _NS) is not None]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_connect_bridge.jvm",
        description="Resolve the JVM packages of pom.xml profiles into the local Maven cache (ahead of a first "
                    f"session that needs them) and print each profile's classpath size. pom.xml: {POM}")
    parser.add_argument("profile", nargs="*", default=["spark"], choices=_profiles(), metavar="PROFILE",
                        help=f"one of {', '.join(_profiles())} (default: spark)")
    args = parser.parse_args(argv)
    for profile in args.profile:
        try:
            jars = classpath(profile)
        except ConnectError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"{profile}: {len(jars)} jars resolved for Spark {spark_version()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
