"""HTTP sinks with the keys of Confluent's HTTP Sink (``io.confluent.connect.http.HttpSinkConnector``) and Aiven's
(``io.aiven.kafka.connect.http.HttpSinkConnector``), on requests.

Each record's value becomes a request body, or ``batch.max.size`` consecutive records of one URL become one body:
``batch.prefix`` + the values joined by ``batch.separator`` + ``batch.suffix`` (Confluent's
``batch.json.as.array=true``: a JSON array). Confluent's ``http.api.url`` may name ``${topic}`` and ``${key}``.
A request that fails (no answer, or a status of ``retry.on.status.codes``: 5xx and 429 for Aiven's) is sent
again up to ``max.retries`` times, ``retry.backoff.ms`` apart (doubled each time with jitter under Confluent's
``EXPONENTIAL_WITH_JITTER``; a 429's ``Retry-After`` is honoured). When the retries are spent,
``behavior.on.error=fail`` (the default) fails the micro-batch, which Spark runs again from its checkpoint;
``log`` and ``ignore`` go on, and under ``errors.tolerance=all`` the records of the failed request go to the dead
letter queue. Delivery is at least once: a micro-batch that fails half way sends its first requests again.

Bodies are built from the value as the converters left it: ``request.body.format=string`` sends a string value as
it is, bytes as UTF-8 text and anything else as JSON; ``json`` sends the value as JSON (a string quoted, as
Kafka's JsonConverter writes it). Credentials (``connection.password``, ``oauth2.client.secret``,
``sensitive.headers``, Aiven's ``http.headers.authorization``) go only to ``http.api.url``/``http.url`` and the
token URL, and never into an error message.

>>> df.writeStream.format("kconnect").options(**{"connector.class": "io.confluent.connect.http.HttpSinkConnector",
...     "http.api.url": "https://api.example.com/events", "request.body.format": "json",
...     "batch.max.size": "100", "batch.json.as.array": "true"}).start()          # doctest: +SKIP
"""

from .aiven import AivenHttpSinkConnector
from .confluent import HttpSinkConnector

__all__ = ["HttpSinkConnector", "AivenHttpSinkConnector"]
