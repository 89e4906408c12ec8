"""A configuration with a misspelt plugin name runs as Volcano's does (the plugin is skipped),
and says so where a user looks: once in the log at start, again in the run's summary, and in
`/readyz` (`config_warnings`) for as long as that configuration is in force; `--strict` refuses it."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
from pathlib import Path

from fumarole_e2e_kit import ROOT, run_daemon, start_daemon, write_small_sim

TYPO = "unknown plugin 'proportoin' (not a Volcano plugin; did you mean 'proportion'?); it is skipped"


def _typo_conf(tmp_path: Path) -> Path:
    text = (ROOT / "daemon" / "examples" / "daemon-scheduler.yaml").read_text()
    assert "- name: proportion\n" in text
    conf = tmp_path / "typo.yaml"
    conf.write_text(text.replace("- name: proportion\n", "- name: proportoin\n"))
    return conf


def test_the_summary_repeats_the_configuration_warning_and_the_run_still_exits_0(tmp_path: Path) -> None:
    c, w = write_small_sim(tmp_path, jobs=6)
    conf = _typo_conf(tmp_path)
    done = run_daemon(
        "--data-dir", str(tmp_path / "data"), "--cluster", str(c), "--workload", str(w),
        "--conf", str(conf), "--no-api",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = done.stdout[done.stdout.index("== summary") :]
    assert "1 configuration warning(s): skipped, as Volcano skips them (--strict refuses" in summary
    assert f"warning: {conf}: tiers[1].plugins[3].name: {TYPO}" in summary, summary
    assert done.stderr.count(TYPO) == 1  # the log line at start, once


def test_strict_refuses_the_same_configuration(tmp_path: Path) -> None:
    c, w = write_small_sim(tmp_path, jobs=6)
    done = run_daemon(
        "--data-dir", str(tmp_path / "data"), "--cluster", str(c), "--workload", str(w),
        "--conf", str(_typo_conf(tmp_path)), "--no-api", "--strict",
    )  # fmt: skip
    assert done.returncode == 2 and TYPO in done.stderr and "strict" in done.stderr
    assert not (tmp_path / "data").exists()


def test_readyz_names_the_warnings_of_the_configuration_in_force(tmp_path: Path) -> None:
    c, w = write_small_sim(tmp_path, jobs=4)
    conf = _typo_conf(tmp_path)
    proc = start_daemon(
        "--data-dir", str(tmp_path / "data"), "--cluster", str(c), "--workload", str(w),
        "--conf", str(conf), "--listen", "127.0.0.1:0", "--serve",
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        base = ""
        for line in proc.stdout:
            if line.startswith("REST API on "):
                base = line.split()[-1]
            if "serving the API until SIGTERM" in line:
                break
        assert base
        with urllib.request.urlopen(f"{base}/readyz", timeout=10) as r:
            ready = json.loads(r.read())
        assert ready["ready"] is True
        assert ready["config_warnings"] == [f"{conf}: tiers[1].plugins[3].name: {TYPO}"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def test_readyz_says_no_warning_for_a_clean_configuration(tmp_path: Path) -> None:
    c, w = write_small_sim(tmp_path, jobs=2)
    proc = start_daemon(
        "--data-dir", str(tmp_path / "data"), "--cluster", str(c), "--workload", str(w),
        "--listen", "127.0.0.1:0", "--serve",
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        base = next(line.split()[-1] for line in proc.stdout if line.startswith("REST API on "))
        with urllib.request.urlopen(f"{base}/readyz", timeout=10) as r:
            assert json.loads(r.read())["config_warnings"] == []
    except urllib.error.HTTPError as e:  # 503 while the cache catches up: the field is there too
        assert json.loads(e.read())["config_warnings"] == []
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
