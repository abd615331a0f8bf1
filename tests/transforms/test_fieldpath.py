import pytest

from spark_connect_bridge.transforms.fieldpath import parse_path


@pytest.mark.parametrize("path, steps", [
    ("foo.bar.baz", ["foo", "bar", "baz"]),
    ("`foo.bar`.baz", ["foo.bar", "baz"]),
    ("foo.`bar.baz`", ["foo", "bar.baz"]),
    ("foo.``bar.baz`", ["foo", "`bar.baz"]),
    ("foo.`bar\\`.baz`", ["foo", "bar`.baz"]),
    ("foo`bar`baz", ["foo`bar`baz"]),
    ("..", ["", "", ""]),
])
def test_v2_paths(path, steps):
    assert parse_path(path, "V2") == steps


def test_v1_is_one_step():
    assert parse_path("foo.`bar`", "V1") == ["foo.`bar`"]


def test_unclosed_backtick_message():
    with pytest.raises(ValueError, match=r"Incomplete backtick pair in path: \[`foo.bar.baz\], consider adding a "
                                         r"backslash before backtick at position 0 to escape it"):
        parse_path("`foo.bar.baz", "V2")
