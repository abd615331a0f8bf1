"""Where a JVM's CPU went, from a Java Flight Recorder file: threads, top self and inclusive frames, and the
stacks under a frame (issue #38's profiles).

Record the Spark driver's JVM (local mode: the executors are its threads) of any benchmark, e.g.

    PYSPARK_SUBMIT_ARGS="--driver-java-options '-XX:StartFlightRecording=filename=/tmp/ours.jfr,settings=profile' \
pyspark-shell" .venv/bin/python bench/bench_vs_kafka_connect.py jdbc-sink 100000
    .venv/bin/python bench/jfr_top.py /tmp/ours.jfr                      # threads, self, inclusive
    .venv/bin/python bench/jfr_top.py /tmp/ours.jfr --under subStringIndex  # who calls it
    .venv/bin/python bench/jfr_top.py /tmp/ours.jfr --threads Executor    # the executors' samples only

Sample shares are only as good as the machine is idle: under load the JIT's compiler threads fall behind and
interpreted frames swell (a load of 25 made one search loop 16% of the samples; compiled it costs ~1 us a record).
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess


def samples(path: str, threads: str | None) -> list[tuple[str, list[str]]]:
    """``(thread, frames innermost first)`` of each ``jdk.ExecutionSample`` in ``path`` (``jfr print``)."""
    out = subprocess.run(["jfr", "print", "--json", "--stack-depth", "512", "--events", "jdk.ExecutionSample",
                          path],
                         capture_output=True, text=True, check=True).stdout
    found = []
    for e in json.loads(out)["recording"]["events"]:
        thread = e["values"]["sampledThread"]["javaName"] or "?"
        if threads and threads not in thread:
            continue
        trace = e["values"].get("stackTrace") or {"frames": []}
        found.append((thread, [f'{f["method"]["type"]["name"].replace("/", ".")}.{f["method"]["name"]}'
                               for f in trace["frames"]]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jfr")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--threads", help="only threads whose name contains this")
    parser.add_argument("--under", help="the commonest stacks from the first frame containing this outwards")
    args = parser.parse_args()
    found = samples(args.jfr, args.threads)
    total = max(len(found), 1)
    if args.under:
        stacks = collections.Counter()
        for _, frames in found:
            hit = next((i for i, f in enumerate(frames) if args.under in f), None)
            if hit is not None:
                stacks[" <- ".join(frames[hit:hit + 8])] += 1
        for stack, n in stacks.most_common(args.top):
            print(f"{n / total:6.1%}  {stack}\n")
        return
    by_thread = collections.Counter(t for t, _ in found)
    own = collections.Counter(frames[0] for _, frames in found if frames)
    inclusive = collections.Counter(f for _, frames in found for f in set(frames))
    print(f"{len(found)} samples")
    for title, counter in (("threads", by_thread), ("self", own), ("inclusive", inclusive)):
        print(f"-- {title}")
        for name, n in counter.most_common(args.top):
            print(f"{n / total:6.1%}  {name}")


if __name__ == "__main__":
    main()
