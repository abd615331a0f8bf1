"""The shop pipeline's datasets: public.orders' Debezium change events, then the orders table they keep equal."""

import os

from spark_connect_bridge import load_config_file
from spark_connect_bridge import pipelines as kp

debezium = {**load_config_file("../postgres-cdc.properties"),          # Debezium's config, as Kafka Connect runs it
            "database.hostname": os.environ.get("PGHOST", "127.0.0.1"),
            "database.port": os.environ.get("PGPORT", "5432"),
            "database.user": os.environ.get("PGUSER", "postgres"),
            "database.password": os.environ.get("PGPASSWORD", ""),
            "database.dbname": os.environ.get("PGDATABASE", "test"),
            "slot.name": "shop_pipeline", "publication.name": "shop_pipeline"}   # this pipeline's own slot
spark = globals()["spark"]                                               # the session spark-pipelines gives the file

# apply="auto_cdc" (the default) needs a target table that supports MERGE in this Spark; Apache Spark 4.2 with
# Delta Lake 4.4 has none, so here the mirror is a materialized view of the last change of each key.
kp.debezium_auto_cdc(spark, "orders", debezium, table="public.orders", apply="materialized_view")
