"""Daemon settings: layering (defaults < TOML < env < flags) and precise errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from fumarole.daemon.runtime.settings import SettingsError, is_loopback, load_settings, split_listen


def test_defaults_match_design() -> None:
    s = load_settings(env={})
    assert s.data_dir == "fumarole-data"
    assert s.listen == "127.0.0.1:8321"
    assert s.adapter == "simulator"
    assert s.schedule_period == 1.0
    assert s.db_path == Path("fumarole-data") / "fumarole.db"


def test_layers_override_in_order(tmp_path: Path) -> None:
    f = tmp_path / "f.toml"
    f.write_text('[fumarole]\ndata_dir = "from-file"\nschedule_period = 2.0\nlisten = "127.0.0.1:9000"\n')
    s = load_settings(str(f), env={"FUMAROLE_SCHEDULE_PERIOD": "0.25"}, flags={"listen": "127.0.0.1:0"})
    assert s.data_dir == "from-file"
    assert s.schedule_period == 0.25
    assert s.listen == "127.0.0.1:0"


def test_flat_toml_without_section(tmp_path: Path) -> None:
    f = tmp_path / "f.toml"
    f.write_text("serve = true\n")
    assert load_settings(str(f), env={}).serve is True


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("data_dir = 3\n", "$.data_dir"),
        ("nonsense = 1\n", "unknown key 'nonsense'"),
        ("data_dir =\n", "invalid TOML"),
        ('adapter = "mesos"\n', "$.adapter"),
    ],
)
def test_bad_file_names_file_and_key(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(SettingsError) as e:
        load_settings(str(f), env={})
    assert str(f) in str(e.value)
    assert needle in str(e.value)


def test_bad_env_names_variable() -> None:
    with pytest.raises(SettingsError, match="FUMAROLE_SCHEDULE_PERIOD='fast'"):
        load_settings(env={"FUMAROLE_SCHEDULE_PERIOD": "fast"})
    with pytest.raises(SettingsError, match="FUMAROLE_SERVE"):
        load_settings(env={"FUMAROLE_SERVE": "maybe"})


def test_remote_listen_must_be_asked_for() -> None:
    with pytest.raises(SettingsError, match="beyond loopback"):
        load_settings(env={}, flags={"listen": "0.0.0.0:8321"})
    s = load_settings(env={"FUMAROLE_ALLOW_REMOTE": "true"}, flags={"listen": "0.0.0.0:8321"})
    assert s.allow_remote


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read"):
        load_settings(str(tmp_path / "absent.toml"), env={})


def test_listen_parsing() -> None:
    assert split_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert split_listen("[::1]:80") == ("::1", 80)
    assert is_loopback("::1") and is_loopback("localhost") and not is_loopback("10.0.0.1")
    with pytest.raises(SettingsError):
        split_listen("nohost")
    with pytest.raises(SettingsError):
        load_settings(env={}, flags={"schedule_period": 0})


def test_strict_from_file_environment_and_flag(tmp_path: Path) -> None:
    assert load_settings(env={}).strict is False
    f = tmp_path / "f.toml"
    f.write_text("[fumarole]\nstrict = true\n")
    assert load_settings(str(f), env={}).strict is True
    assert load_settings(str(f), env={"FUMAROLE_STRICT": "false"}).strict is False
    assert load_settings(env={"FUMAROLE_STRICT": "1"}).strict is True
    assert load_settings(env={"FUMAROLE_STRICT": "0"}, flags={"strict": True}).strict is True


def test_kubernetes_settings_from_file_env_and_flags(tmp_path: Path) -> None:
    f = tmp_path / "f.toml"
    f.write_text('adapter = "kubernetes"\nscheduler_names = ["volcano", "batch"]\nkube_concurrency = 4\n')
    s = load_settings(str(f), env={}, flags={"kubeconfig": "/k/config"})
    assert (s.adapter, s.scheduler_names, s.kube_concurrency, s.kubeconfig) == (
        "kubernetes",
        ("volcano", "batch"),
        4,
        "/k/config",
    )
    s = load_settings(env={"FUMAROLE_SCHEDULER_NAMES": "a, b,", "FUMAROLE_KUBECONFIG": "/x"})
    assert s.scheduler_names == ("a", "b") and s.kubeconfig == "/x"
    assert load_settings(env={}).scheduler_names == ("volcano",)


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"FUMAROLE_KUBE_CONCURRENCY": "0"}, "kube_concurrency: must be at least 1"),
        ({"FUMAROLE_ADAPTER": "kubernetes", "FUMAROLE_SCHEDULER_NAMES": ""}, "scheduler_names"),
    ],
)
def test_kubernetes_settings_are_checked(env: dict[str, str], needle: str) -> None:
    with pytest.raises(SettingsError, match=needle):
        load_settings(env=env)
