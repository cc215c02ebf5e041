"""Proxy-mode configuration: upstream list, port mapping, store choice, validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.config import Address
from clientmetrics.gateway.config_load import load_config


def test_standalone_by_default_with_sqlite(tmp_path: Path) -> None:
    cfg = load_config(None, data_dir=tmp_path, environ={})
    assert not cfg.proxy
    assert cfg.store_kind == "sqlite"


def test_upstream_list_port_mapping_and_topic_store(tmp_path: Path) -> None:
    cfg = load_config(
        None,
        data_dir=tmp_path,
        overrides={"listen": "0.0.0.0:19092", "upstream": "k1:9092, k2:9093"},
        environ={},
    )
    assert cfg.proxy
    assert cfg.upstream == (Address("k1", 9092), Address("k2", 9093))
    assert cfg.store_kind == "topic"
    assert cfg.broker_port(0) == 19093  # default base: listen port + 1
    assert cfg.broker_port(5) == 19098
    assert cfg.advertised.host == "127.0.0.1"  # a wildcard bind is not advertisable


def test_environment_and_toml_reach_proxy_settings(tmp_path: Path) -> None:
    toml = tmp_path / "gw.toml"
    toml.write_text(
        '[gateway]\nupstream = ["a:1", "b:2"]\nbroker_port_base = 30000\n'
        'advertised_host = "kafka-gw.internal"\nsubscriptions_topic = "subs"\n'
    )
    cfg = load_config(toml, data_dir=tmp_path, environ={"CLIENTMETRICS_GATEWAY_STORE": "sqlite"})
    assert cfg.upstream == (Address("a", 1), Address("b", 2))
    assert cfg.broker_port(7) == 30007
    assert cfg.advertised.host == "kafka-gw.internal"
    assert (cfg.store_kind, cfg.subscriptions_topic) == ("sqlite", "subs")


@pytest.mark.parametrize(
    "overrides",
    [
        {"store": "topic"},  # the topic store needs a cluster
        {"store": "etcd"},
        {"upstream": "k:9092", "workers": 2},
        {"upstream": "nonsense"},
        {"upstream": "k:9092", "broker_port_base": 70000},
    ],
)
def test_invalid_proxy_settings_are_rejected(tmp_path: Path, overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        load_config(None, data_dir=tmp_path, overrides=overrides, environ={})


def test_node_ids_beyond_the_port_range_are_rejected(tmp_path: Path) -> None:
    cfg = load_config(
        None,
        data_dir=tmp_path,
        overrides={"upstream": "k:1", "broker_port_base": 65000},
        environ={},
    )
    with pytest.raises(ConfigurationError):
        cfg.broker_port(1000)
    listen_zero = load_config(
        None, data_dir=tmp_path, overrides={"upstream": "k:1", "listen": "127.0.0.1:0"}, environ={}
    )
    with pytest.raises(ConfigurationError):
        listen_zero.broker_port(1)
