"""Fixtures several integration modules share: one AWS emulator per module and its DynamoDB client.

A module that needs another emulator (other options, its own lifetime) defines its own ``emu``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kaibo_local.emulator import Emulator, start_emulator
from tests.integration.test_emulator import make_client


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with start_emulator() as running:
        yield running


@pytest.fixture(scope="module")
def ddb(emu: Emulator) -> Any:
    return make_client(emu.endpoint_url, "dynamodb")
