"""Function containers: each function invocation runs in a worker process, as on Lambda.

A Lambda container serves one invocation at a time, and concurrent requests get
concurrent containers. Here a pool of worker processes plays the containers:
every worker imports the handler modules the template names (once, then keeps
them warm) and runs one invocation at a time, so requests to the local stack
really overlap — the races that matter on AWS (two remembers on one stream
head) happen locally too, decided by the emulator's serialized DynamoDB.
Workers inherit the environment the stack resolved from the template.

Event streams (kaibo_core.runtime.streaming) cross the process boundary while the
handler runs: for an invocation whose context carries a response stream, the
worker gets a picklable stand-in that puts ``("start", status, headers)`` and
``("chunk", bytes)`` messages on a queue of a multiprocessing manager (started
once per pool, at the first such invocation), and the caller's thread forwards
them to the real stream as they arrive, until the worker's ``("end",)``. Other
invocations never touch the manager.

Time limits, as on AWS. A function's ``Timeout`` (the template's, else Lambda's 3 s) counts
from when its handler starts in a worker, not from when the invocation was queued for a free
one: the worker arms an alarm, and a handler still running when it rings is stopped by a
``FunctionTimeout`` raised where it is (a BaseException, so that the handler's own ``except
Exception`` cannot swallow it) and the invocation fails with Lambda's "Task timed out after
N.NN seconds". Unlike Lambda, the worker is then reused, not replaced. The caller waits as
long as the loader was told (``wait_seconds``): the HTTP front, as API Gateway, 29 s
(``INTEGRATION_TIMEOUT_SECONDS``), then ``IntegrationTimeoutError``; queue pollers and schedules
until the function has answered, as Lambda's event source mappings do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import multiprocessing
import queue
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing.managers import SyncManager
from types import FrameType
from typing import Any

from kaibo_core.runtime.streaming import ResponseStream
from kaibo_local.gateway import Handler, IntegrationTimeoutError, LambdaContext
from kaibo_local.template import FunctionSpec

DEFAULT_CONTAINERS = 4
WARM_TIMEOUT_SECONDS = 120
#: How often a streaming invocation that hears nothing checks whether its worker is still there.
STREAM_POLL_SECONDS = 0.5

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


class FunctionTimeout(BaseException):
    """Raised in a worker's running handler when its function's Timeout has passed."""


def _on_alarm(_signum: int, _frame: FrameType | None) -> None:
    raise FunctionTimeout


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise FunctionTimeout in this (the worker's main) thread once ``seconds`` have passed."""
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _invoke(module: str, name: str, event: dict[str, Any], context: LambdaContext) -> Any:
    """Runs in a worker process: the handler, within its function's Timeout (its import is not
    counted: on Lambda, a container's init has a limit of its own)."""
    key = f"{module}:{name}"
    if key not in _loaded:
        _loaded[key] = getattr(importlib.import_module(module), name)
    context.start_clock()
    try:
        with _time_limit(context.timeout_seconds):
            return _loaded[key](event, context)
    except FunctionTimeout:
        raise FunctionError(f"Task timed out after {context.timeout_seconds:.2f} seconds") from None
    except Exception as exc:
        raise FunctionError(str(exc)) from None


class _QueueStream:
    """A worker's response stream: messages on a manager queue (a picklable proxy)."""

    def __init__(self, messages: queue.Queue[Any]) -> None:
        self._messages = messages
        self._started = False

    def start(self, status: int, headers: Mapping[str, str]) -> None:
        if self._started:
            raise RuntimeError("the response stream is already started")
        self._started = True
        self._messages.put(("start", int(status), dict(headers)))

    def write(self, data: bytes) -> None:
        if not self._started:
            raise RuntimeError("write before start")
        self._messages.put(("chunk", bytes(data)))

    def end(self) -> None:
        self._messages.put(("end",))


def _invoke_streaming(module: str, name: str, event: dict[str, Any], context: LambdaContext) -> Any:
    """Runs in a worker process: ``_invoke``, then the end of the stream's messages."""
    stream = context.kaibo_response_stream
    assert isinstance(stream, _QueueStream)
    try:
        return _invoke(module, name, event, context)
    finally:
        stream.end()


def _forward(
    messages: queue.Queue[Any], future: Future[Any], stream: ResponseStream, deadline: float | None
) -> None:
    """Send the worker's stream messages to ``stream`` as they come, until its end (or its death).

    A message ``stream`` refuses fails the invocation once the worker is done, as it would
    have failed the handler in-process. ``deadline``: ``time.monotonic()`` after which the caller
    stops waiting (None: never).
    """
    refused: Exception | None = None
    while True:
        finished = future.done()  # then all its messages are queued: take them, don't wait
        remaining = STREAM_POLL_SECONDS if deadline is None else deadline - time.monotonic()
        if remaining <= 0 and not finished:
            raise IntegrationTimeoutError("the function gave no answer in time")
        try:
            message = messages.get(timeout=0 if finished else min(remaining, STREAM_POLL_SECONDS))
        except queue.Empty:
            if finished:
                break  # the worker died before its end message
            continue
        if message[0] == "end":
            break
        if refused is not None:
            continue
        try:
            if message[0] == "start":
                stream.start(message[1], message[2])
            else:
                stream.write(message[1])
        except Exception as error:
            refused = error
    if refused is not None:
        _result(future, deadline)  # the handler's own error first
        raise FunctionError(f"response stream: {refused}") from refused


def _result(future: Future[Any], deadline: float | None) -> Any:
    """The invocation's answer, waiting until ``deadline`` (None: as long as it takes)."""
    try:
        return future.result(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        raise IntegrationTimeoutError("the function gave no answer in time") from None


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
            # Spawns every worker now, and imports the handlers ahead of requests.
            self._warming = [self._pool.submit(_warm, self._modules) for _ in range(containers)]
        finally:
            for signum, handler in saved.items():
                signal.signal(signum, handler)
        self._manager: SyncManager | None = None
        self._manager_lock = threading.Lock()
        self._stopped = False

    def wait_warm(self, timeout: float = WARM_TIMEOUT_SECONDS) -> None:
        """Until every worker has imported the handlers: the stack is ready (and a stop right
        after start does not wait for imports still running)."""
        deadline = time.monotonic() + timeout
        for future in self._warming:
            future.result(timeout=max(0.0, deadline - time.monotonic()))

    def loader(self, spec: FunctionSpec, wait_seconds: float | None = None) -> Handler:
        """A handler that runs ``spec``'s function in a container (drop-in for load_handler).

        It waits ``wait_seconds`` at most for the answer (None: until the function answers or
        its Timeout stops it), then raises ``IntegrationTimeoutError``.
        """

        def invoke(event: dict[str, Any], context: LambdaContext) -> Any:
            deadline = None if wait_seconds is None else time.monotonic() + wait_seconds
            context = dataclasses.replace(context, timeout_seconds=spec.timeout_seconds)
            stream = context.kaibo_response_stream
            if stream is not None:
                return self._invoke_streaming(spec, event, context, stream, deadline)
            future = self._pool.submit(_invoke, spec.qualified_module, spec.handler_name, event, context)
            return _result(future, deadline)

        return invoke

    def _invoke_streaming(
        self,
        spec: FunctionSpec,
        event: dict[str, Any],
        context: LambdaContext,
        stream: ResponseStream,
        deadline: float | None,
    ) -> Any:
        messages = self._queues().Queue()
        sent = dataclasses.replace(context, kaibo_response_stream=_QueueStream(messages))
        future = self._pool.submit(_invoke_streaming, spec.qualified_module, spec.handler_name, event, sent)
        _forward(messages, future, stream, deadline)
        return _result(future, deadline)

    def _queues(self) -> SyncManager:
        """The manager that holds the stream queues, started at the first streaming invocation."""
        with self._manager_lock:
            if self._stopped:
                raise RuntimeError("the container pool is stopped")
            if self._manager is None:
                manager = SyncManager(ctx=multiprocessing.get_context("spawn"))
                manager.start(_ignore_stop_signals)
                self._manager = manager
            return self._manager

    def stop(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._manager_lock:
            self._stopped = True
            if self._manager is not None:
                self._manager.shutdown()
                self._manager = None
