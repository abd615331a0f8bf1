"""Confluent's HTTP Sink (``io.confluent.connect.http.HttpSinkConnector``): its keys over :mod:`.delivery`."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from ...config import CaseInsensitiveValidString, ConfigDef, Importance, Lambda, Range, Type, ValidString
from ...config.common import CONFLUENT_LICENSE_KEYS
from ...errors import ConfigError, ConfigProblem
from .delivery import (
    URL,
    Endpoint,
    HttpSink,
    OAuth2,
    StatusCodes,
    codes_problem,
    pairs,
    secret,
    url_problem,
)

# -- Confluent's HTTP Sink ------------------------------------------------------------------------------------------

_CONFLUENT = "io.confluent.connect.http.HttpSinkConnector"
_PYTHON_TLS = "TLS is Python's ssl module with the system's defaults (no Java security provider)"
_NOT_HERE = "Confluent's reporter produces results and errors to its own topics; here failed records go to the " \
            "dead letter queue (errors.tolerance=all, errors.deadletterqueue.topic.name) and counts to the " \
            "query's progress"


def _confluent_problems(config: Any) -> list[ConfigProblem]:
    problems = []
    auth = str(config["auth.type"])
    if auth == "BASIC" and not config["connection.user"]:
        problems.append(ConfigProblem("connection.user", "auth.type=BASIC needs connection.user"))
    if auth == "OAUTH2":
        for key in ("oauth2.token.url", "oauth2.client.id", "oauth2.client.secret"):
            if not secret(config[key]):
                problems.append(ConfigProblem(key, f"auth.type=OAUTH2 needs {key}"))
    if auth == "THIRD_PARTY":
        problems.append(ConfigProblem("auth.type", "auth.type=THIRD_PARTY (a token from a custom endpoint and "
                                                   "JSON path) is not supported here: use OAUTH2 or "
                                                   "sensitive.headers"))
    patterns = [p for p in str(config["regex.patterns"] or "").split(config["regex.separator"]) if p]
    replacements = [r for r in str(config["regex.replacements"] or "").split(config["regex.separator"])]
    if patterns and len(replacements) != len(patterns):
        problems.append(ConfigProblem("regex.replacements", f"regex.replacements needs one replacement per "
                                                            f"pattern of regex.patterns ({len(patterns)})"))
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as e:
            problems.append(ConfigProblem("regex.patterns", f"Invalid regular expression {pattern!r}: {e}"))
    if config["http.proxy.port"] and not config["http.proxy.host"]:
        problems.append(ConfigProblem("http.proxy.host", "http.proxy.port is set: http.proxy.host is needed"))
    return problems


class HttpSinkConnector(HttpSink):
    """Sends record values to an HTTP API (Confluent's ``HttpSinkConnector``), at least once."""

    kafka_class = _CONFLUENT
    destination_keys: ClassVar[tuple[str, ...]] = ("http.api.url", "oauth2.token.url", "http.proxy.host")
    config_def = (
        ConfigDef()
        .define("http.api.url", Type.STRING, validator=URL, importance=Importance.HIGH,
                doc="The HTTP API URL; ${topic} and ${key} are replaced by the record's topic and key.")
        .define("request.method", Type.STRING, "POST", CaseInsensitiveValidString("POST", "PUT", "PATCH"),
                Importance.HIGH, "The HTTP request method.")
        .define("behavior.on.null.values", Type.STRING, "ignore",
                CaseInsensitiveValidString("ignore", "log", "fail", "delete"), Importance.LOW,
                "Records with a null value (tombstones): ignore, log (their coordinates), fail, or delete (a "
                "DELETE request to the record's URL).")
        .define("behavior.on.error", Type.STRING, "fail", CaseInsensitiveValidString("fail", "ignore", "log"),
                Importance.LOW, "A request that still fails after max.retries: fail the micro-batch (run again "
                                "from the checkpoint), or go on (log names each record); under errors.tolerance=all "
                                "the records go to the dead letter queue.")
        .define("headers", Type.STRING, "", importance=Importance.LOW,
                doc="HTTP headers of every request, name:value separated by header.separator.")
        .define("header.separator", Type.STRING, "|", importance=Importance.LOW,
                doc="Separator character used in headers property.")
        .define("sensitive.headers", Type.PASSWORD, None, importance=Importance.LOW,
                doc="Headers with secrets (eg: Authorization), as headers; masked by the REST API.")
        .define("http.connect.timeout.ms", Type.INT, 30000, Range.at_least(1), Importance.LOW,
                "Time to wait for a connection to be established.")
        .define("http.request.timeout.ms", Type.INT, 30000, Range.at_least(1), Importance.LOW,
                "Time to wait for a request response to arrive.")
        .define("max.retries", Type.INT, 10, Range.at_least(0), Importance.MEDIUM,
                "The maximum number of times to retry on errors before failing the task.")
        .define("retry.backoff.ms", Type.INT, 3000, Range.at_least(0), Importance.MEDIUM,
                "The initial duration in milliseconds to wait following an error before a retry attempt is made.")
        .define("retry.backoff.policy", Type.STRING, "EXPONENTIAL_WITH_JITTER",
                ValidString("CONSTANT_VALUE", "EXPONENTIAL_WITH_JITTER"), Importance.MEDIUM,
                "The backoff policy to use in terms of retry.")
        .define("retry.on.status.codes", Type.STRING, "400-", Lambda(codes_problem, "codes and ranges"),
                Importance.MEDIUM, "The HTTP error codes to retry on: codes and ranges separated by commas "
                                   "(400- is every code from 400).")
        .define("regex.patterns", Type.STRING, "", importance=Importance.LOW,
                doc="Regular expressions replaced in each record's body, separated by regex.separator.")
        .define("regex.replacements", Type.STRING, "", importance=Importance.LOW,
                doc="Regex replacements to use with the patterns in regex.patterns.")
        .define("regex.separator", Type.STRING, "~", importance=Importance.LOW,
                doc="Separator character used in regex.patterns and regex.replacements property.")
        .define("batch.key.pattern", Type.STRING, "someKey", importance=Importance.HIGH,
                doc="The key of a record's batch (${key} and ${topic} replaced): records of different keys are "
                    "never in one request.")
        .define("batch.max.size", Type.INT, 1, Range.at_least(1), Importance.HIGH,
                "The number of records accumulated in a batch before the HTTP API will be invoked.")
        .define("batch.prefix", Type.STRING, "", importance=Importance.HIGH, doc="Prefix added to record batches.")
        .define("batch.suffix", Type.STRING, "", importance=Importance.HIGH, doc="Suffix added to record batches.")
        .define("batch.separator", Type.STRING, ",", importance=Importance.HIGH,
                doc="Separator for records in a batch.")
        .define("batch.json.as.array", Type.BOOLEAN, False, importance=Importance.HIGH,
                doc="Whether a batch is sent as a JSON array of its records (prefix, suffix and separator unused).")
        .define("request.body.format", Type.STRING, "string", CaseInsensitiveValidString("string", "json"),
                Importance.MEDIUM, "string: a string value as it is, bytes as UTF-8, other values as JSON; json: "
                                   "the value as JSON.")
        .define("auth.type", Type.STRING, "NONE", CaseInsensitiveValidString("NONE", "BASIC", "OAUTH2",
                                                                            "THIRD_PARTY"),
                Importance.HIGH, "Authentication type of the endpoint.")
        .define("connection.user", Type.STRING, "", importance=Importance.MEDIUM,
                doc="The username for auth.type=BASIC.")
        .define("connection.password", Type.PASSWORD, "", importance=Importance.MEDIUM,
                doc="The password for auth.type=BASIC.")
        .define("oauth2.token.url", Type.STRING, "", Lambda(lambda v: v and url_problem(v), "an http(s) URL"),
                Importance.MEDIUM, "The URL to be used for fetching the OAuth2 token (client credentials).")
        .define("oauth2.client.id", Type.STRING, "", importance=Importance.MEDIUM,
                doc="The client id used when fetching the OAuth2 token.")
        .define("oauth2.client.secret", Type.PASSWORD, "", importance=Importance.MEDIUM,
                doc="The secret used when fetching the OAuth2 token.")
        .define("oauth2.client.auth.mode", Type.STRING, "header", CaseInsensitiveValidString("header", "url"),
                Importance.MEDIUM, "How the client id and secret are sent to the token URL: a Basic "
                                   "Authorization header, or form fields.")
        .define("oauth2.client.scope", Type.STRING, "any", importance=Importance.LOW,
                doc="The scope used when fetching the OAuth2 token.")
        .define("oauth2.token.property", Type.STRING, "access_token", importance=Importance.LOW,
                doc="The name of the property containing the OAuth2 token in the token URL's answer.")
        .define("http.proxy.host", Type.STRING, "", importance=Importance.LOW,
                doc="The host or ip of the http proxy.")
        .define("http.proxy.port", Type.INT, 0, Range.between(0, 65535), Importance.LOW,
                "The port number of the http proxy.")
        .define("http.proxy.user", Type.STRING, "", importance=Importance.LOW,
                doc="The username to be used when authenticating with the http proxy.")
        .define("http.proxy.password", Type.PASSWORD, "", importance=Importance.LOW,
                doc="The password to be used when authenticating with the http proxy.")
        .define("https.ssl.truststore.location", Type.STRING, "", importance=Importance.LOW,
                doc="The CA certificates (PEM) that validate the server (Confluent's: a Java trust store; convert "
                    "it with keytool -exportcert -rfc). Blank: the system's CAs.")
        .define("https.host.verifier.enabled", Type.BOOLEAN, True, importance=Importance.LOW,
                doc="Only true here: the server's certificate and host name are always verified.")
        .accept(_CONFLUENT, no_effect={
            **CONFLUENT_LICENSE_KEYS,
            "https.ssl.truststore.type": "the trust store is a PEM file here",
            "https.ssl.truststore.password": "the trust store is a PEM file here",
            "https.ssl.protocol": "Python's TLS negotiates TLS 1.2 or 1.3",
            "https.ssl.enabled.protocols": "Python's TLS negotiates TLS 1.2 or 1.3",
            "https.ssl.provider": _PYTHON_TLS, "https.ssl.keymanager.algorithm": _PYTHON_TLS,
            "https.ssl.trustmanager.algorithm": _PYTHON_TLS, "https.ssl.secure.random.implementation": _PYTHON_TLS,
            "https.ssl.endpoint.identification.algorithm": "host names are always verified",
            "oauth2.client.header.separator": "oauth2.client.headers is not supported",
        }, not_supported={
            "report.errors.as": _NOT_HERE, "reporter.bootstrap.servers": _NOT_HERE,
            "reporter.result.topic.name": _NOT_HERE, "reporter.result.topic.replication.factor": _NOT_HERE,
            "reporter.result.topic.partitions": _NOT_HERE, "reporter.error.topic.name": _NOT_HERE,
            "reporter.error.topic.replication.factor": _NOT_HERE, "reporter.error.topic.partitions": _NOT_HERE,
            "https.ssl.cipher.suites": "Python's TLS chooses its ciphers",
        }, refused={
            "https.ssl.keystore.location": "TLS client certificates are not supported by this sink yet",
            "https.ssl.keystore.password": "TLS client certificates are not supported by this sink yet",
            "https.ssl.keystore.type": "TLS client certificates are not supported by this sink yet",
            "https.ssl.key.password": "TLS client certificates are not supported by this sink yet",
            "oauth2.client.headers": "extra headers to the token URL are not supported",
        })
        .check(_confluent_problems)
    )

    def endpoint(self) -> Endpoint:
        c = self.config
        auth = str(c["auth.type"])
        separator = c["regex.separator"]
        patterns = [p for p in str(c["regex.patterns"] or "").split(separator) if p]
        replacements = str(c["regex.replacements"] or "").split(separator)
        proxy = None
        if c["http.proxy.host"]:
            user = c["http.proxy.user"]
            credentials = f"{user}:{secret(c['http.proxy.password']) or ''}@" if user else ""
            proxy = f"http://{credentials}{c['http.proxy.host']}:{c['http.proxy.port'] or 80}"
        if not c["https.host.verifier.enabled"]:
            raise ConfigError([ConfigProblem("https.host.verifier.enabled", "https.host.verifier.enabled=false is "
                                             "refused: the server's host name is always verified")])
        return Endpoint(
            url=c["http.api.url"], method=str(c["request.method"]),
            headers=pairs(c["headers"], c["header.separator"], "headers"),
            secret_headers=pairs(secret(c["sensitive.headers"]) or "", c["header.separator"], "sensitive.headers"),
            basic=(c["connection.user"], secret(c["connection.password"]) or "") if auth == "BASIC" else None,
            oauth2=OAuth2(c["oauth2.token.url"], c["oauth2.client.id"], secret(c["oauth2.client.secret"]) or "",
                          str(c["oauth2.client.auth.mode"]) == "header", c["oauth2.client.scope"] or None,
                          c["oauth2.token.property"]) if auth == "OAUTH2" else None,
            batch_max=c["batch.max.size"], prefix=c["batch.prefix"] or "", separator=c["batch.separator"] or "",
            suffix=c["batch.suffix"] or "", json_array=bool(c["batch.json.as.array"]),
            batch_key=c["batch.key.pattern"] or "", json_body=str(c["request.body.format"]) == "json",
            max_retries=c["max.retries"], backoff_ms=c["retry.backoff.ms"],
            exponential=str(c["retry.backoff.policy"]) == "EXPONENTIAL_WITH_JITTER",
            retry_codes=StatusCodes.parse(c["retry.on.status.codes"]),
            connect_timeout=c["http.connect.timeout.ms"] / 1000, read_timeout=c["http.request.timeout.ms"] / 1000,
            on_error=str(c["behavior.on.error"]), on_null=str(c["behavior.on.null.values"]),
            replacements=tuple(zip(patterns, replacements)),
            verify=c["https.ssl.truststore.location"] or True, proxy=proxy)

    @classmethod
    def json_body(cls, settings: Any) -> bool:
        return str(settings.request_body_format) == "json"
