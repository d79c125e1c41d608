"""The SDK speed-ups (kaibo_core/adapters/sdk_speedups) run on the botocore they were checked against.

They hook into, replace or copy botocore functions; a botocore upgrade that changes any of
them must fail here before it reaches a deployment (as the emulator's pin does for moto).
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

from kaibo_core.adapters.sdk_speedups import pins

REQUIREMENTS = Path(__file__).resolve().parents[2] / "layers" / "kaibo_core" / "requirements.txt"


def test_given_the_layer_pin_then_the_pinned_botocore_is_the_one_the_hashes_came_from() -> None:
    pinned = {
        name: value
        for name, _, value in (line.partition("==") for line in REQUIREMENTS.read_text().splitlines())
        if value
    }
    assert pinned["botocore"] == pins.BOTOCORE_VERSION
    assert version("botocore") == pins.BOTOCORE_VERSION


def test_given_the_pinned_botocore_then_nothing_the_speedups_rely_on_has_changed() -> None:
    assert pins.drifted() == []


def test_given_a_changed_function_then_the_drift_is_reported_with_who_relies_on_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = "botocore.auth.SigV4Auth.add_auth"
    monkeypatch.setitem(pins.RELIED_ON, name, ("0" * 64, "direct_reads"))
    assert pins.drifted() == [f"{name} (relied on by sdk_speedups.direct_reads)"]


def test_given_a_decorated_botocore_method_then_its_own_source_is_hashed() -> None:
    # instance_cache keeps no __wrapped__: two cached methods must not hash as the same wrapper.
    assert pins.source_sha256("botocore.loaders.Loader.load_service_model") != pins.source_sha256(
        "botocore.loaders.Loader.determine_latest_version"
    )
