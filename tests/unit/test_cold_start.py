"""The collector pause of a cold start: who ends it, and that it never turns on a collector it
did not turn off. (That every handler pauses and resumes: tests/contract/test_handlers_import.py.)"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from kaibo_core.runtime import cold_start


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    was_enabled = gc.isenabled()
    yield
    cold_start.resume_collector()
    if was_enabled:
        gc.enable()
    else:
        gc.disable()


def test_the_first_invocation_ends_the_pause_even_when_it_raises() -> None:
    gc.enable()
    calls: list[bool] = []

    @cold_start.resume_collector_after_first_invocation
    def handler(fail: bool) -> str:
        calls.append(gc.isenabled())
        if fail:
            raise RuntimeError("first invocation failed")
        return "ok"

    cold_start.pause_collector()
    assert cold_start.is_paused()
    assert not gc.isenabled()
    frozen = gc.get_freeze_count()
    with pytest.raises(RuntimeError):
        handler(True)
    assert gc.isenabled()
    assert not cold_start.is_paused()
    assert gc.get_freeze_count() > frozen  # what existed was frozen
    assert handler(False) == "ok"
    assert calls == [False, True]  # the first ran paused, the second with the collector on


def test_any_wrapped_handler_ends_a_pause_started_by_another_module() -> None:
    gc.enable()
    cold_start.pause_collector()
    cold_start.pause_collector()  # a second handler module, same container: still one pause
    cold_start.resume_collector_after_first_invocation(lambda: None)()
    assert gc.isenabled()
    assert not cold_start.is_paused()


def test_a_collector_turned_off_by_someone_else_stays_off() -> None:
    gc.disable()
    cold_start.pause_collector()
    assert not cold_start.is_paused()
    cold_start.resume_collector_after_first_invocation(lambda: None)()
    assert not gc.isenabled()
