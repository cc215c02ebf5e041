"""Usage layout (jopt-simple), option parsing rules, .properties files, bootstrap lists."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clientmetrics.admin import AdminConfig, generate_name, parse_properties
from clientmetrics.admin.options import OPTIONS, OptionValueError, parse_args
from clientmetrics.admin.properties import parse_bootstrap
from clientmetrics.admin.usage import format_help
from clientmetrics.errors import ConfigurationError

# Kafka 4.4.0's usage, as its kafka-client-metrics.sh prints it (--help).
KAFKA_USAGE = (Path(__file__).parent / "data" / "kafka_usage.txt").read_text()
EXTRAS = {"output", "timeout"}


def test_usage_wraps_every_kafka_option_where_kafka_does() -> None:
    ours = format_help([o for o in OPTIONS if o.name not in EXTRAS])
    assert [line.split() for line in ours.splitlines()] == [
        line.split() for line in KAFKA_USAGE.splitlines()
    ]


def test_usage_columns_are_padded_as_jopt_simple_pads_them() -> None:
    lines = format_help(OPTIONS).splitlines()
    # Option column 37 wide (the widest fitted piece), two blanks, description 39 wide.
    assert {len(line) for line in lines} == {78}
    assert all(line[37:39] == "  " for line in lines)
    assert lines[2].startswith("--alter" + " " * 32 + "Alter the configuration")
    assert lines[3] == " " * 41 + "metrics resource.".ljust(37)
    assert "\tclient_id" in format_help(OPTIONS)  # Kafka indents selectors with a tab


def test_usage_lists_options_sorted_including_the_extras() -> None:
    names = [line.split()[0] for line in format_help(OPTIONS).splitlines()[2:] if line[0] == "-"]
    assert names == sorted(names)
    assert {"--output", "--timeout"} <= set(names)


def test_option_values_follow_jopt_simple() -> None:
    opts = parse_args(
        [
            *("--bootstrap-server=h:1", "--alter", "--name", "n", "--metrics", "a,,b"),
            *("--metrics", "c", "--match", "client_id=x{1,3}", "--interval", "+100"),
        ]
    )
    assert opts.values("metrics") == ("a", "b", "c")  # empty tokens vanish
    assert opts.values("match") == ("client_id=x{1", "3}")  # a comma always splits
    assert opts.integer("interval") == 100
    assert parse_args(
        ["--bootstrap-server", "h:1", "--alter", "--name", "n", "--metrics", ""]
    ).values("metrics") == ("",)
    twice = parse_args(["--bootstrap-server", "h:1", "--delete", "--name", "a", "--name", "b"])
    with pytest.raises(OptionValueError, match="Found multiple arguments for option name"):
        twice.value("name")
    # An option that takes an argument takes the next word, even one that looks like an option.
    assert (
        parse_args(["--bootstrap-server", "h:1", "--alter", "--name", "--list"]).value("name")
        == "--list"
    )


def test_properties_files_follow_java_properties_load() -> None:
    text = (
        "# comment\n! also a comment\n\n"
        "security.protocol = SASL_SSL\n"
        "sasl.mechanism:PLAIN\n"
        "client.id   my-admin\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="a" \\\n    password="b";\n'
        "key\\=with\\:seps=v\\tx\\u0041\n"
        "client.id=later-wins\n"
    )
    assert parse_properties(text) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "client.id": "later-wins",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="a" password="b";',
        "key=with:seps": "v\txA",
    }


def test_bootstrap_lists() -> None:
    assert parse_bootstrap(" a:1, [::1]:9092 ,b.example:65535") == (
        ("a", 1),
        ("::1", 9092),
        ("b.example", 65535),
    )
    for bad in ("nohost", "h:", ":9", "h:0", "h:x", "h:70000", ""):
        with pytest.raises(ConfigurationError):
            parse_bootstrap(bad)


def test_jaas_config_credentials_and_client_id() -> None:
    config = AdminConfig.from_properties(
        "h:1",
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="u\\"x" password="p;w";',
            "client.id": "ops",
        },
    )
    assert config.sasl is not None
    assert (config.sasl.username, config.sasl.password) == ('u"x', "p;w")
    assert config.client_id == "ops"
    assert config.ssl_context is None


def test_generated_names_are_kafka_uuid_strings() -> None:
    names = {generate_name() for _ in range(300)}
    assert len(names) == 300
    for name in names:
        assert len(name) == 22
        assert not name.startswith("-")
        raw = base64.urlsafe_b64decode(name + "==")
        assert len(raw) == 16
        assert int.from_bytes(raw, "big") not in (0, 1)


_SPECIAL = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}


def _escape(text: str, *, key: bool) -> str:
    """``Properties.store`` escaping (keys also escape separators and comment marks)."""
    out = []
    for index, char in enumerate(text):
        if char in _SPECIAL:
            out.append(_SPECIAL[char])
        elif (key and char in "=: #!") or (char == " " and index == 0):
            out.append("\\" + char)
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


@given(
    st.dictionaries(
        st.text(alphabet=st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"])),
        st.text(alphabet=st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"])),
    )
)
def test_properties_round_trip_through_java_escaping(props: dict[str, str]) -> None:
    text = "".join(f"{_escape(k, key=True)}={_escape(v, key=False)}\n" for k, v in props.items())
    assert parse_properties(text) == props
