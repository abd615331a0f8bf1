"""Aiven's HTTP sink (``io.aiven.kafka.connect.http.HttpSinkConnector``): its keys over :mod:`.delivery`."""

from __future__ import annotations

from typing import Any, ClassVar

from ...config import CaseInsensitiveValidString, ConfigDef, Importance, Lambda, Range, Type, ValidString
from ...errors import ConfigProblem
from .delivery import (
    URL,
    Endpoint,
    HttpSink,
    OAuth2,
    StatusCodes,
    pairs,
    secret,
    url_problem,
)

# -- Aiven's HTTP sink ----------------------------------------------------------------------------------------------

_AIVEN = "io.aiven.kafka.connect.http.HttpSinkConnector"


def _aiven_problems(config: Any) -> list[ConfigProblem]:
    problems = []
    auth = str(config["http.authorization.type"])
    if auth == "static" and not secret(config["http.headers.authorization"]):
        problems.append(ConfigProblem("http.headers.authorization",
                                      "Must be present when http.authorization.type = static"))
    if auth == "none" and secret(config["http.headers.authorization"]):
        problems.append(ConfigProblem("http.headers.authorization",
                                      "Must not be present when http.authorization.type != static"))
    if auth == "oauth2":
        for key in ("oauth2.access.token.url", "oauth2.client.id", "oauth2.client.secret"):
            if not secret(config[key]):
                problems.append(ConfigProblem(key, f"Must be present when http.authorization.type = {auth}"))
    if auth == "apikey":
        problems.append(ConfigProblem("http.authorization.type", "http.authorization.type=apikey is not "
                                                                 "supported here: use static or oauth2"))
    if config["batching.enabled"] and str(config["errors.tolerance"]) == "all":
        problems.append(ConfigProblem("errors.tolerance", "Cannot use errors.tolerance when batching is enabled"))
    return problems


class AivenHttpSinkConnector(HttpSink):
    """Sends record values to an HTTP API (Aiven's ``HttpSinkConnector``), at least once."""

    kafka_class = _AIVEN
    destination_keys: ClassVar[tuple[str, ...]] = ("http.url", "oauth2.access.token.url")
    config_def = (
        ConfigDef()
        .define("http.url", Type.STRING, validator=URL, importance=Importance.HIGH,
                doc="The URL to send data to.")
        .define("http.authorization.type", Type.STRING, validator=ValidString("none", "oauth2", "static", "apikey"),
                importance=Importance.HIGH, doc="The HTTP authorization type.")
        .define("http.headers.authorization", Type.PASSWORD, None, importance=Importance.MEDIUM,
                doc="The static content of Authorization header (http.authorization.type=static).")
        .define("http.headers.content.type", Type.STRING, None, importance=Importance.LOW,
                doc="The value of Content-Type that will be send with each request.")
        .define("http.headers.additional", Type.LIST, [], importance=Importance.LOW,
                doc="Additional headers in the format header:value separated by a comma.")
        .define("oauth2.access.token.url", Type.STRING, None, Lambda(lambda v: v and url_problem(v), "a URL"),
                Importance.HIGH, "The URL to be used for fetching an access token (client credentials).")
        .define("oauth2.client.id", Type.STRING, None, importance=Importance.HIGH,
                doc="The client id used for fetching an access token.")
        .define("oauth2.client.secret", Type.PASSWORD, None, importance=Importance.HIGH,
                doc="The secret used for fetching an access token.")
        .define("oauth2.client.authorization.mode", Type.STRING, "HEADER",
                CaseInsensitiveValidString("HEADER", "URL"), Importance.MEDIUM,
                "header: client id and secret as a Basic Authorization header; url: as form fields.")
        .define("oauth2.client.scope", Type.STRING, None, importance=Importance.LOW,
                doc="The scope used for fetching an access token.")
        .define("oauth2.response.token.property", Type.STRING, "access_token", importance=Importance.LOW,
                doc="The name of the JSON property containing the access token returned by the OAuth2 provider.")
        .define("batching.enabled", Type.BOOLEAN, False, importance=Importance.HIGH,
                doc="Whether to enable batching multiple records in a single HTTP request.")
        .define("batch.max.size", Type.INT, 500, Range.between(1, 1_000_000), Importance.MEDIUM,
                "The maximum size of a record batch to be sent in a single HTTP request.")
        .define("batch.prefix", Type.STRING, "", importance=Importance.HIGH, doc="Prefix added to record batches.")
        .define("batch.suffix", Type.STRING, "\n", importance=Importance.HIGH,
                doc="Suffix added to record batches (default a newline).")
        .define("batch.separator", Type.STRING, "\n", importance=Importance.HIGH,
                doc="Separator for records in a batch (default a newline).")
        .define("max.retries", Type.INT, 1, Range.at_least(0), Importance.MEDIUM,
                "The maximum number of times to retry on errors when sending a batch before failing the task.")
        .define("retry.backoff.ms", Type.INT, 3000, Range.at_least(0), Importance.MEDIUM,
                "The time in milliseconds to wait following an error before a retry attempt is made.")
        .define("http.timeout", Type.INT, 30, Range.at_least(1), Importance.LOW,
                "HTTP Response timeout (seconds).")
        .accept(_AIVEN, no_effect={
            "kafka.retry.backoff.ms": "a failed micro-batch is run again by Spark from its checkpoint"})
        .check(_aiven_problems)
    )

    def endpoint(self) -> Endpoint:
        c = self.config
        auth = str(c["http.authorization.type"])
        headers = list(pairs(",".join(c["http.headers.additional"]), ",", "http.headers.additional"))
        if c["http.headers.content.type"]:
            headers.append(("Content-Type", c["http.headers.content.type"]))
        token = secret(c["http.headers.authorization"])
        batching = bool(c["batching.enabled"])
        return Endpoint(
            url=c["http.url"], headers=tuple(headers),
            secret_headers=(("Authorization", token),) if auth == "static" and token else (),
            oauth2=OAuth2(c["oauth2.access.token.url"], c["oauth2.client.id"],
                          secret(c["oauth2.client.secret"]) or "",
                          str(c["oauth2.client.authorization.mode"]) == "HEADER", c["oauth2.client.scope"],
                          c["oauth2.response.token.property"]) if auth == "oauth2" else None,
            batch_max=c["batch.max.size"] if batching else 1,
            prefix=c["batch.prefix"] if batching else "", suffix=c["batch.suffix"] if batching else "",
            separator=c["batch.separator"], max_retries=c["max.retries"], backoff_ms=c["retry.backoff.ms"],
            exponential=False, retry_codes=StatusCodes(((300, 999),)),
            connect_timeout=float(c["http.timeout"]), read_timeout=float(c["http.timeout"]))
