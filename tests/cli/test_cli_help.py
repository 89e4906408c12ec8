"""Every subcommand has a description and every option a help text; `fumarole --version`."""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from fumarole.daemon.cli import build_parser, main

FUMAROLE = str(Path(sys.executable).parent / "fumarole")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_the_subcommands_walked_are_all_there() -> None:
    assert {"schedule", "run", "replay", "explain", "events", "migrate", "serve"} <= set(_subcommands())


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_subcommand_has_a_description_and_every_option_a_help(name: str) -> None:
    parser = _subcommands()[name]
    assert (parser.description or "").strip(), f"fumarole {name}: no description"
    missing = [
        "/".join(a.option_strings) or a.dest
        for a in parser._actions
        if a.help != argparse.SUPPRESS and not (a.help or "").strip()
    ]
    assert not missing, f"fumarole {name}: options without help: {missing}"


def test_version_is_the_installed_distribution_version() -> None:
    p = subprocess.run([FUMAROLE, "--version"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"fumarole {version('fumarole')}\n"


def test_replay_help_says_from_and_to_take_event_sequence_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--from SEQ" in out and "--to SEQ" in out
    assert out.count("not a cycle number") == 2
