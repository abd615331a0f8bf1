# The two commands of the README (make demo, make test). Both create .venv and install what they need on first use.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python

.PHONY: demo test test-compat install clean bench

$(VENV)/.installed: setup.cfg constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# What the demo needs, far less than the dev extra: the package with its delta extra (deltalake: the topic store's
# Delta tables). make test adds the rest to the same venv.
$(VENV)/.demo-installed: setup.cfg constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[delta]'
	touch $@

# The main job: datagen "orders" -> the topic store (a Delta table per topic under work/topics), until caught up.
demo: $(VENV)/.demo-installed
	$(VENV)/bin/kconnect run conf/demo/datagen-orders.properties --topics-dir work/topics \
	    --checkpoint-dir work/checkpoints --once

# The whole test suite: first what it needs on the machine (Debian's server packages where missing, the JVM
# packages from Maven Central), then pytest, which starts throwaway servers on 127.0.0.1 and stops them, with the
# compatibility jobs (tests/compat/run_compat.py: pyspark 4.3 and Spark Connect) running beside it.
test: $(VENV)/.installed
	bash tests/support/setup_machine.sh $(PY)
	$(PY) tests/support/run_suite.py

# The contract tests and README examples on the other supported pyspark versions (.venv-pyspark-X.Y, built on
# first use) and through a Spark Connect session to a local server.
test-compat: $(VENV)/.installed
	$(PY) tests/compat/run_compat.py

clean:
	rm -rf work spark-warehouse

# Every side-by-side benchmark (issue #38: vs Kafka Connect, Debezium, a bare Spark read), each twice, and their table
# in bench/TABLE.md (docs/benchmarks.md includes it); each row's full benchmark runs twice, which takes long.
# BENCH_ARGS="--quick --runs 1" is a smoke run at small sizes, BENCH_ARGS="--only jdbc" one row.
bench: $(VENV)/.installed
	$(PY) bench/run_all.py --out bench/TABLE.md $(BENCH_ARGS)
