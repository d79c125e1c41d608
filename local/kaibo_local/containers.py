"""Function containers: each function invocation runs in a worker process, as on Lambda.

A Lambda container serves one invocation at a time, and concurrent requests get
concurrent containers. Here a pool of worker processes plays the containers:
every worker imports the handler modules the template names (once, then keeps
them warm) and runs one invocation at a time, so requests to the local stack
really overlap — the races that matter on AWS (two remembers on one stream
head) happen locally too, decided by the emulator's serialized DynamoDB.
Workers inherit the environment the stack resolved from the template.
"""

from __future__ import annotations

import importlib
import multiprocessing
import signal
import threading
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from kaibo_local.gateway import Handler, LambdaContext
from kaibo_local.template import FunctionSpec

DEFAULT_CONTAINERS = 4
INVOKE_TIMEOUT_SECONDS = 60

_loaded: dict[str, Handler] = {}


class FunctionError(Exception):
    """A handler's exception, carried back by message (its own type may not unpickle here)."""


def _ignore_stop_signals() -> None:
    """Workers leave when the stack shuts the pool down, not on the terminal's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _ignore_in_main_thread(signals: set[signal.Signals]) -> dict[signal.Signals, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signum: signal.signal(signum, signal.SIG_IGN) for signum in signals}


def _invoke(module: str, name: str, event: dict[str, Any], context: LambdaContext) -> Any:
    """Runs in a worker process."""
    key = f"{module}:{name}"
    if key not in _loaded:
        _loaded[key] = getattr(importlib.import_module(module), name)
    try:
        return _loaded[key](event, context)
    except Exception as exc:
        raise FunctionError(str(exc)) from None


def _warm(modules: list[str]) -> int:
    for module in modules:
        importlib.import_module(module)
    return len(modules)


class ContainerPool:
    def __init__(self, specs: list[FunctionSpec], containers: int = DEFAULT_CONTAINERS) -> None:
        self._modules = sorted({spec.qualified_module for spec in specs})
        # Workers start with Ctrl-C and SIGTERM ignored (an ignored disposition survives exec, and
        # Python then leaves SIGINT alone), so a signal sent to the whole process group — a terminal's
        # Ctrl-C — cannot interrupt them while they boot or serve; the stack stops them itself.
        saved = _ignore_in_main_thread({signal.SIGINT, signal.SIGTERM})
        try:
            self._pool = ProcessPoolExecutor(
                containers, mp_context=multiprocessing.get_context("spawn"), initializer=_ignore_stop_signals
            )
            for _ in range(containers):  # spawns every worker now, and imports the handlers ahead of requests
                self._pool.submit(_warm, self._modules)
        finally:
            for signum, handler in saved.items():
                signal.signal(signum, handler)

    def loader(self, spec: FunctionSpec) -> Handler:
        """A handler that runs ``spec``'s function in a container (drop-in for load_handler)."""

        def invoke(event: dict[str, Any], context: LambdaContext) -> Any:
            future = self._pool.submit(_invoke, spec.qualified_module, spec.handler_name, event, context)
            return future.result(timeout=INVOKE_TIMEOUT_SECONDS)

        return invoke

    def stop(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
