"""ConfigDef: typed parsing, every problem at once, suggestions, secrets never echoed."""

from __future__ import annotations

import enum

import pytest

from spark_connect_bridge.config import CaseInsensitiveValidString, ConfigDef, Password, Range, Type, ValidString
from spark_connect_bridge.config.definition import is_misspelling
from spark_connect_bridge.errors import ConfigError


def _def() -> ConfigDef:
    return (ConfigDef()
            .define("file", Type.STRING, doc="File.")
            .define("batch.size", Type.INT, 2000, Range.at_least(1))
            .define("ratio", Type.DOUBLE, 0.5)
            .define("enabled", Type.BOOLEAN, False)
            .define("fields", Type.LIST, [])
            .define("offset", Type.LONG, 0)
            .define("mode", Type.STRING, "bulk", ValidString("bulk", "incrementing"))
            .define("connection.password", Type.PASSWORD, None))


def test_values_are_parsed_once_into_types():
    cfg = _def().parse({"file": "a", "batch.size": "10", "ratio": "1.5", "enabled": "TRUE",
                        "fields": " a , b ,c", "offset": "9000000000", "connection.password": "s3cret"})
    assert (cfg["batch.size"], cfg["ratio"], cfg["enabled"], cfg["fields"], cfg["offset"]) == \
        (10, 1.5, True, ("a", "b", "c"), 9000000000)
    assert isinstance(cfg["connection.password"], Password)
    assert cfg.password("connection.password") == "s3cret"


def test_defaults_apply_and_python_values_are_accepted():
    cfg = _def().parse({"file": "a", "fields": ["x", "y"], "enabled": True, "batch.size": 3})
    assert cfg["mode"] == "bulk" and cfg["fields"] == ("x", "y") and cfg["enabled"] is True


def test_empty_list_string_is_an_empty_list():
    assert _def().parse({"file": "a", "fields": ""})["fields"] == ()


def test_settings_are_typed_read_only_and_read_as_attributes():
    import pickle

    cfg = _def().parse({"file": "a", "batch.size": "7", "fields": "x,y", "mode": "bulk", "connection.password": "pw"})
    assert cfg.batch_size == 7 and cfg.fields == ("x", "y") and cfg.file == "a"
    assert cfg.mode == "bulk" and isinstance(cfg.mode, enum.Enum) and cfg.mode.name == "BULK"
    with pytest.raises(TypeError):
        cfg.parsed["file"] = "b"  # type: ignore[index]
    with pytest.raises(AttributeError, match="no configuration key is read as file_name"):
        _ = cfg.file_name
    again = pickle.loads(pickle.dumps(cfg))  # executors get the config pickled
    assert again.batch_size == 7 and again.mode == "bulk" and dict(again) == dict(cfg)
    assert isinstance(cfg.connection_password, Password) and repr(cfg.connection_password) == "[hidden]"


def test_two_keys_read_as_one_attribute_fail_at_declaration():
    with pytest.raises(ValueError, match="would both be read as a_b"):
        ConfigDef().define("a.b", Type.STRING, "").define("a-b", Type.STRING, "")


@pytest.mark.parametrize("props, key, text", [
    ({}, "file", 'Missing required configuration "file" which has no default value.'),
    ({"file": "a", "batch.size": "0"}, "batch.size", "Invalid value 0 for configuration batch.size: Value must "
                                                     "be at least 1"),
    ({"file": "a", "batch.size": "x"}, "batch.size", "Not a number of type INT"),
    ({"file": "a", "batch.size": "3000000000"}, "batch.size", "out of range"),
    ({"file": "a", "enabled": "yes"}, "enabled", "Expected value to be either true or false"),
    ({"file": "a", "mode": "Bulk"}, "mode", "String must be one of: bulk, incrementing"),
    ({"file": "a", "ratio": "fast"}, "ratio", "Not a number of type DOUBLE"),
    ({"file": "a", "batch.sise": "1"}, "batch.sise", 'did you mean "batch.size"?'),
])
def test_each_bad_value_names_key_value_and_what_is_allowed(props, key, text):
    with pytest.raises(ConfigError) as info:
        _def().parse(props)
    assert info.value.keys == [key]
    assert text in str(info.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as info:
        _def().parse({"batch.size": "-1", "enabled": "maybe", "modee": "x"})
    assert sorted(info.value.keys) == ["batch.size", "enabled", "file", "modee"]
    assert "4 problems" in str(info.value)


def test_password_is_never_echoed():
    d = ConfigDef().define("connection.password", Type.PASSWORD, None, ValidString("ok"))
    with pytest.raises(ConfigError) as info:
        d.parse({"connection.password": "hunter2"})
    assert "hunter2" not in str(info.value) and "[hidden]" in str(info.value)
    cfg = d.parse({"connection.password": "ok"})
    assert "ok" not in repr(cfg).replace("Config(", "") and cfg.masked() == {"connection.password": "[hidden]"}


def test_keys_match_case_insensitively_because_spark_lowercases_options():
    d = ConfigDef().define("maxRows", Type.INT, 1)
    assert d.parse({"maxrows": "5"})["maxRows"] == 5


def test_caller_dict_is_not_mutated():
    props = {"file": "a", "fields": "x,y"}
    before = dict(props)
    _def().parse(props)
    assert props == before


def test_allowed_prefixes_belong_to_other_plugins():
    cfg = _def().parse({"file": "a", "transforms.x.type": "Filter"}, allowed_prefixes=("transforms.",))
    assert "transforms.x.type" not in cfg and cfg.with_prefix("transforms.") == {"x.type": "Filter"}


def test_docs_are_generated_from_the_declaration():
    md = _def().to_markdown()
    assert "| `batch.size` | int | `2000` | [1,...] |" in md
    rest = {k["name"]: k for k in _def().to_rest()}
    assert rest["file"]["required"] is True and rest["batch.size"]["default_value"] == "2000"
    assert rest["connection.password"]["type"] == "PASSWORD"


def test_credentials_in_urls_are_masked_in_listings_and_errors():
    d = ConfigDef().define("connection.url", Type.STRING, validator=ValidString("x"))
    for url in ("jdbc:postgresql://db:5432/shop?user=app&password=s3cret", "http://app:s3cret@registry:8081"):
        with pytest.raises(ConfigError) as info:
            d.parse({"connection.url": url})
        assert "s3cret" not in str(info.value) and "[hidden]" in str(info.value)
    cfg = ConfigDef().define("connection.url", Type.STRING).parse(
        {"connection.url": "jdbc:mysql://db/shop?password=s3cret&ssl=true"})
    assert cfg.masked()["connection.url"] == "jdbc:mysql://db/shop?password=[hidden]&ssl=true"
    assert "s3cret" not in repr(cfg)


def test_case_insensitive_choices_are_parsed_to_their_declared_spelling():
    cd = ConfigDef().define("errors.tolerance", Type.STRING, "none", CaseInsensitiveValidString("none", "all"))
    assert cd.parse({"errors.tolerance": "ALL"})["errors.tolerance"] == "all"
    assert cd.parse({})["errors.tolerance"] == "none"
    with pytest.raises(ConfigError, match=r"Invalid value some for configuration errors.tolerance"):
        cd.parse({"errors.tolerance": "some"})


def test_unknown_key_warns_without_its_value_and_cannot_forge_log_lines(caplog):
    """A REST user's unknown key is logged: never its value (it may be a secret), and a newline in the key is
    escaped so that it cannot start a forged log line."""
    cd = ConfigDef().define("file", Type.STRING)
    cfg = cd.parse({"file": "a", "vault.token": "s3cr3t-value", "x\nWARNING forged": "1"})
    assert [w.key for w in cfg.warnings] == ["vault.token", "x\nWARNING forged"]
    assert "s3cr3t-value" not in caplog.text
    assert 'Unknown configuration "x\\nWARNING forged"' in caplog.text and "\nWARNING forged" not in caplog.text


@pytest.mark.parametrize("key, known", [("batch.sise", "batch.size"), ("fiel", "file"), ("delimeter", "delimiter"),
                                        ("topic.fromat", "topic.format")])
def test_a_likely_misspelling_still_fails(key, known):
    assert is_misspelling(key, known)


@pytest.mark.parametrize("key, known", [("topic.heartbeat.prefix", "heartbeat.topics.prefix"), ("x", "file"),
                                        ("vault.token", "batch.size")])
def test_another_unknown_key_is_not_a_misspelling(key, known):
    assert not is_misspelling(key, known)


_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


def test_accepted_keys_refuse_warn_or_pass_as_declared(caplog):
    cd = ConfigDef().accept(_SINK, refused={"file": "files are not written here (test)"})
    assert cd.parse({}).file is None and cd.parse({"file": ""}).warnings == ()
    with pytest.raises(ConfigError) as e:
        cd.parse({"file": "/tmp/x"})
    assert e.value.keys == ["file"] and "only its default () is supported here: files are not written" in str(e.value)
    warned = ConfigDef().accept(_SINK, not_supported={"file": "why not"}).parse({"file": "/tmp/x"})
    assert [w.key for w in warned.warnings] == ["file"] and "file=/tmp/x is not supported here" in caplog.text
    quiet = ConfigDef().accept(_SINK, no_effect={"file": "how Spark does it"}).parse({"file": "/tmp/x"})
    assert quiet.warnings == () and quiet.file == "/tmp/x"


def test_accepting_a_key_the_original_does_not_declare_fails_at_declaration():
    with pytest.raises(ValueError, match="declares no configuration 'topic'"):
        ConfigDef().accept(_SINK, no_effect={"topic": "x"})


def test_old_spelling_and_new_one_together_fail():
    cd = ConfigDef().define("include", Type.LIST, []).renamed("whitelist", "include", "Kafka 3.x")
    with pytest.raises(ConfigError) as e:
        cd.parse({"whitelist": "a", "include": "b"})
    assert e.value.keys == ["whitelist"]


def test_a_huge_unknown_key_is_warned_about_shortened():
    """A REST body may carry a megabyte key: the misspelling check skips it by length alone (two edits cannot
    bridge it), and the warning shows its first 200 characters."""
    key = "k" * 1_000_000
    cfg = ConfigDef().define("file", Type.STRING, "").parse({key: "1"})
    assert [w.key for w in cfg.warnings] == [key]
    assert cfg.warnings[0].message.startswith('Unknown configuration "' + "k" * 200 + '..."')
