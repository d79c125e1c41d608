"""Unit tests run without the network: no socket of any family, not even loopback or Unix.

A test that needs a socket (a stub server, the emulator, the local stack) is an integration
or end-to-end test and lives in tests/integration/ or tests/e2e/, which keep their sockets.

The block is pytest-socket's, switched on per item by the hooks below rather than by
``--disable-socket``: these hooks are in this directory's conftest, so pytest calls them only
for items under tests/unit/. It covers the item's setup (its fixtures included) and its call,
and is lifted before teardown, because the last unit test's teardown also finalizes session
fixtures other directories started (the emulator of tests/conftest.py closes its server then).
"""

from __future__ import annotations

import pytest
from pytest_socket import disable_socket, enable_socket


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before pytest sets up the item's fixtures (tryfirst), so a fixture cannot open one either.
    disable_socket(allow_unix_socket=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    enable_socket()
