"""daemon.gc_pause.collector_paused: the collector is off inside and its previous state comes back."""

from __future__ import annotations

import gc

import pytest

from fumarole.daemon.gc_pause import collector_paused


def test_collector_is_off_inside_and_restored_after_an_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_already_off_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
