#!/usr/bin/env bash
# What the test suite needs on the machine, installed where it is missing (part of `make test`):
#   - Debian's PostgreSQL and MariaDB server binaries, Mosquitto, RabbitMQ, Redis and NATS (the tests start throwaway instances
#     on 127.0.0.1);
#   - the JVM packages of spark_connect_bridge/jvm/pom.xml (Spark's Delta/Kafka/Avro jars, JDBC drivers, a Kafka
#     broker, and Kafka Connect and Debezium as the differential tests' reference, Hadoop's MiniDFSCluster), resolved
#     with Maven into ~/.m2;
#   - Azurite (npm's azurite, the Azure Blob sink's test server) into ~/.cache/kconnect-test/azurite.
# Nothing is started here, and nothing already installed is changed. Each step prints its time.
set -euo pipefail
PY=${1:-.venv/bin/python}

step() { local name=$1; shift; local t0=$SECONDS; "$@"; echo "setup: $name took $((SECONDS - t0)) s"; }

need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v curl >/dev/null 2>&1 || need+=(curl)  # the README's worker commands
command -v npm >/dev/null 2>&1 || need+=(npm)  # Azurite
# the message brokers of the broker connectors' tests (tests/support/brokers.py starts private instances)
[ -x /usr/sbin/mosquitto ] || command -v mosquitto >/dev/null 2>&1 || need+=(mosquitto)
[ -x /usr/sbin/rabbitmq-server ] || need+=(rabbitmq-server)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v nats-server >/dev/null 2>&1 || need+=(nats-server)

install_packages() {
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then sudo=(sudo -n); else
      echo "setup: missing Debian packages: ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
      exit 1
    fi
  fi
  # Debian's maintainer scripts would start the servers as services: the tests start their own instances.
  local policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod +x "$policy"
  fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  [ -z "$policy" ] || "${sudo[@]}" rm -f "$policy"
}

if [ ${#need[@]} -gt 0 ]; then
  step "apt-get install ${need[*]}" install_packages
fi
step "JVM packages (Maven)" "$PY" -m spark_connect_bridge.jvm spark kafka-broker kafka-connect debezium debezium-jdbc debezium-mariadb hdfs-minicluster iceberg-rest-catalog
step "Azurite (npm)" "$PY" -c "from tests.support.azurite import azurite_blob; azurite_blob()"
