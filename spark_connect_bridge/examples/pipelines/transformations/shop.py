"""The shop pipeline's datasets: public.orders' Debezium change events, then the Delta table orders they keep
equal (MERGE by the record key, in source order, deletes from op)."""

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
# Delta Lake 4.4 has none, so here the changes go through our Delta sink's MERGE (a pipeline sink, format
# "kconnect") into the Delta table at ORDERS_DELTA_PATH.
kp.debezium_auto_cdc(spark, "orders", debezium, table="public.orders", apply="merge",
                     delta_path=os.environ.get("ORDERS_DELTA_PATH", "/tmp/kconnect-pipelines/shop_mirror/orders"))
