"""Function containers: each function invocation runs in a worker process, as on Lambda.

A Lambda container serves one invocation at a time, and concurrent requests get
concurrent containers. Here ``containers`` worker processes play the containers:
every worker imports the handler modules the template names (once, then keeps
them warm) and runs one invocation at a time, so requests to the local stack
really overlap — the races that matter on AWS (two remembers on one stream
head) happen locally too, decided by the emulator's serialized DynamoDB.
Workers inherit the environment the stack resolved from the template.

Each worker has a thread of its own in the stack's process (its "slot") and a pipe: the slot
takes the next invocation from the pool's queue, sends it down the pipe and waits for the
answer or for the worker's death, whichever comes first. A worker that dies — it crashed, was
killed (``kill -9``), ran out of memory, or its handler called ``exit`` — fails only the
invocation it was running, with ``FunctionCrashError`` (the HTTP front answers 502, as API
Gateway does when a function crashes), and its slot starts a new worker, warms it and serves
on; the other workers never notice. A replacement that dies before it is warm (a handler module
that cannot be imported) is retried after a pause that doubles up to ``REPLACE_BACKOFF_MAX_SECONDS``.

Event streams (kaibo_core.runtime.streaming) cross the process boundary while the handler runs:
for an invocation whose context carries a response stream, the worker's context gets a stand-in
that sends ``("start", status, headers)`` and ``("chunk", bytes)`` up the same pipe; the slot
hands them to the caller's thread, which forwards them to the real stream as they arrive.

Time limits, as on AWS. A function's ``Timeout`` (the template's, else Lambda's 3 s) counts
from when its handler starts in a worker, not from when the invocation was queued for a free
one: the worker arms an alarm, and a handler still running when it rings is stopped by a
``FunctionTimeout`` raised where it is (a BaseException, so that the handler's own ``except
Exception`` cannot swallow it) and the invocation fails with Lambda's "Task timed out after
N.NN seconds". As on Lambda, that worker is then replaced, not reused. The caller waits as
long as the loader was told (``wait_seconds``): the HTTP front, as API Gateway, 29 s
(``INTEGRATION_TIMEOUT_SECONDS``), then ``IntegrationTimeoutError`` (an invocation still queued
then is dropped; one already running runs on); queue pollers and schedules until the function
has answered, as Lambda's event source mappings do.

Signals and stopping. Workers ignore SIGINT and SIGTERM (they are started with both blocked,
then ignore them), so a terminal's Ctrl-C, which reaches the whole process group, cannot
interrupt them while they boot or serve: ``stop`` ends them. It fails every queued invocation
(``ContainerPoolStoppedError``), closes the idle workers' pipes (they exit at once), gives the
busy ones ``STOP_GRACE_SECONDS`` to finish, kills (SIGKILL) whatever is left and reaps every
worker, so it returns within a few seconds whatever state the workers are in. A worker whose
stack vanished without stopping it (killed with SIGKILL) exits when it next reads its pipe.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import importlib
import logging
import multiprocessing
import multiprocessing.connection
import pickle
import queue
import signal
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from types import FrameType
from typing import Any

from kaibo_core.runtime.streaming import ResponseStream
from kaibo_local.gateway import FunctionCrashError, Handler, IntegrationTimeoutError, LambdaContext
from kaibo_local.template import FunctionSpec

log = logging.getLogger("kaibo_local.containers")

DEFAULT_CONTAINERS = 4
WARM_TIMEOUT_SECONDS = 120
#: At ``stop``, how long a worker still running an invocation may finish before it is killed.
STOP_GRACE_SECONDS = 1.0
#: How long ``stop`` waits for a killed worker's slot to notice (it is woken by the death itself).
STOP_JOIN_SECONDS = 5.0
#: How often an idle container checks that its worker is still there (to replace it before a request).
IDLE_CHECK_SECONDS = 0.5
#: The first pause before replacing a worker that died before it was warm; it doubles up to the max.
REPLACE_BACKOFF_SECONDS = 0.5
REPLACE_BACKOFF_MAX_SECONDS = 30.0
_STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})
_SPAWN = multiprocessing.get_context("spawn")

_loaded: dict[str, Handler] = {}


class FunctionError(Exception):
    """A handler's exception, carried back by message (its own type may not unpickle here)."""


class ContainerPoolStoppedError(FunctionCrashError):
    """The pool was stopped before (or while) this invocation ran."""


class FunctionTimeout(BaseException):
    """Raised in a worker's running handler when its function's Timeout has passed."""


# -- in the worker process -------------------------------------------------------------------------


def _ignore_stop_signals() -> None:
    """Workers leave when the stack stops them, not on the terminal's Ctrl-C."""
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)  # ignored now: nothing left to defer


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


@contextlib.contextmanager
def _alarm_deferred() -> Iterator[None]:
    """Hold the Timeout's alarm while a message is written: one cut in half would break the pipe."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # a pending alarm rings here


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


class _PipeStream:
    """A worker's response stream: its messages go up the worker's pipe, between the answers."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._started = False

    def start(self, status: int, headers: Mapping[str, str]) -> None:
        if self._started:
            raise RuntimeError("the response stream is already started")
        self._started = True
        self._send(("start", int(status), dict(headers)))

    def write(self, data: bytes) -> None:
        if not self._started:
            raise RuntimeError("write before start")
        self._send(("chunk", bytes(data)))

    def _send(self, message: tuple[Any, ...]) -> None:
        with _alarm_deferred():
            self._connection.send(message)


def _reply(connection: Connection, message: tuple[Any, ...]) -> None:
    try:
        connection.send(message)  # pickled whole before a byte is written
    except (pickle.PicklingError, TypeError, AttributeError, ValueError) as error:
        connection.send(("error", f"the function's answer cannot be returned: {error}"))


def _warm(modules: list[str]) -> None:
    for module in modules:
        importlib.import_module(module)


def _worker_main(connection: Connection, modules: list[str]) -> None:
    """A worker process: import the handlers, say so, then run invocations until the pipe closes."""
    _ignore_stop_signals()
    try:
        _warm(modules)
    except BaseException as error:
        connection.send(("failed", f"{type(error).__name__}: {error}"))
        return
    connection.send(("ready",))
    while True:
        try:
            module, name, event, context, streaming = connection.recv()
        except (EOFError, OSError):
            return  # the stack closed the pipe (stop), or is gone
        if streaming:
            context = dataclasses.replace(context, kaibo_response_stream=_PipeStream(connection))
        try:
            message: tuple[Any, ...] = ("result", _invoke(module, name, event, context))
        except FunctionError as error:
            message = ("error", str(error))
        try:
            _reply(connection, message)
        except OSError:
            return  # the stack is gone


# -- in the stack's process ------------------------------------------------------------------------


@dataclass(eq=False)
class _Invocation:
    module: str
    name: str
    event: dict[str, Any]
    context: LambdaContext  # without its stream: the worker gets a stand-in
    #: Stream messages for the caller when it offered a stream (None: it did not), then ``("end",)``.
    messages: queue.Queue[tuple[Any, ...]] | None
    future: Future[Any] = field(default_factory=Future)

    def settle(self, *, result: Any = None, error: BaseException | None = None) -> None:
        if not self.future.done():
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(result)
        if self.messages is not None:
            self.messages.put(("end",))


def _timed_out(invocation: _Invocation) -> bool:
    error = invocation.future.exception() if invocation.future.done() else None
    return isinstance(error, FunctionError) and str(error).startswith("Task timed out after ")


class _WorkerGoneError(Exception):
    """The worker process died (or broke its pipe)."""


class _NotDeliveredError(_WorkerGoneError):
    """The worker died before it got the invocation: it can run on another."""


def _describe_exit(process: SpawnProcess) -> str:
    process.join(timeout=1)
    code = process.exitcode
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class _Worker:
    """The stack's end of one worker process."""

    def __init__(self, modules: list[str], name: str) -> None:
        ours, theirs = _SPAWN.Pipe(duplex=True)
        self.process = _SPAWN.Process(target=_worker_main, args=(theirs, modules), name=name)
        self.process.start()
        theirs.close()  # ours alone now: the worker's death reads as the end of the pipe
        self._connection = ours

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def _receive(self, timeout: float | None = None) -> tuple[Any, ...] | None:
        """The worker's next message (None: none within ``timeout``); ``_WorkerGoneError`` if it died."""
        ready = multiprocessing.connection.wait([self._connection, self.process.sentinel], timeout)
        if not ready:
            return None
        if self._connection in ready:
            try:
                message = self._connection.recv()
            except Exception as error:  # EOF, a broken pipe, a message cut short
                raise _WorkerGoneError from error
            if isinstance(message, tuple) and message:
                return message
        raise _WorkerGoneError

    def wait_ready(self, timeout: float) -> None:
        """Until the worker has imported the handlers: ``_WorkerGoneError`` if it died first,
        RuntimeError if an import failed or it took longer than ``timeout``."""
        message = self._receive(timeout)
        if message is None:
            raise RuntimeError(f"a function container took over {timeout:.0f} s to load the handlers")
        if message[0] == "failed":
            raise RuntimeError(f"a function container could not load the handlers: {message[1]}")
        if message[0] != "ready":
            raise _WorkerGoneError

    def run(self, invocation: _Invocation) -> None:
        """Run one invocation: its stream messages to the caller, then its answer to its future.

        ``_WorkerGoneError`` (the invocation left unsettled) if the worker died before answering.
        """
        try:
            self._connection.send(
                (
                    invocation.module,
                    invocation.name,
                    invocation.event,
                    invocation.context,
                    invocation.messages is not None,
                )
            )
        except OSError as error:
            raise _NotDeliveredError from error
        except Exception as error:  # the event or context cannot be pickled: nothing was sent
            invocation.settle(error=FunctionError(f"the invocation cannot be sent to a container: {error}"))
            return
        while True:
            message = self._receive()
            assert message is not None
            kind = message[0]
            if kind in ("start", "chunk"):
                if invocation.messages is not None:
                    invocation.messages.put(message)
            elif kind == "result":
                invocation.settle(result=message[1])
                return
            elif kind == "error":
                invocation.settle(error=FunctionError(message[1]))
                return
            else:
                raise _WorkerGoneError

    def alive(self) -> bool:
        return self.process.is_alive()

    def how_it_ended(self) -> str:
        return _describe_exit(self.process)

    def close(self, grace: float) -> None:
        """End the worker: close its pipe (an idle worker exits at once), kill it after ``grace``."""
        self._connection.close()
        self.process.join(timeout=grace)
        self.kill()

    def kill(self) -> None:
        """SIGKILL (if still running), then reap it."""
        if self.process.exitcode is None:
            self.process.kill()
        self.process.join(timeout=STOP_JOIN_SECONDS)
        with contextlib.suppress(OSError):
            self._connection.close()


@contextlib.contextmanager
def _stop_signals_blocked() -> Iterator[None]:
    """Block SIGINT/SIGTERM in this thread, so that a worker started from it boots with them held
    (a blocked signal mask survives fork and exec) until it ignores them."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


_live_pools: weakref.WeakSet[ContainerPool] = weakref.WeakSet()


@atexit.register
def _stop_live_pools() -> None:
    """A pool nobody stopped is stopped at exit (before multiprocessing joins its workers forever)."""
    for pool in list(_live_pools):
        pool.stop()


class ContainerPool:
    def __init__(self, specs: list[FunctionSpec], containers: int = DEFAULT_CONTAINERS) -> None:
        if containers < 1:
            raise ValueError(f"at least one container, not {containers}")
        self._modules = sorted({spec.qualified_module for spec in specs})
        self._work: queue.Queue[_Invocation | None] = queue.Queue()
        self._lock = threading.Lock()
        self._stopping = False
        self._stopped = threading.Event()  # wakes replacement back-offs at stop
        self._workers: dict[int, _Worker] = {}  # slot → its current worker
        self._warm: list[Future[None]] = [Future() for _ in range(containers)]
        self._spawned = 0
        self._slots = [
            threading.Thread(target=self._serve, args=(slot,), name=f"container-{slot}", daemon=True)
            for slot in range(containers)
        ]
        _live_pools.add(self)
        for thread in self._slots:
            thread.start()  # each starts its worker, which imports the handlers ahead of requests

    # -- public -----------------------------------------------------------------------------------

    def wait_warm(self, timeout: float = WARM_TIMEOUT_SECONDS, cancel: threading.Event | None = None) -> None:
        """Until every worker has imported the handlers: the stack is ready (and a stop right
        after start does not wait for imports still running). RuntimeError if a worker cannot
        load them or ``timeout`` passes; ``ContainerPoolStoppedError`` once ``cancel`` is set."""
        deadline = time.monotonic() + timeout
        for warm in self._warm:
            while True:
                if cancel is not None and cancel.is_set():
                    raise ContainerPoolStoppedError("stopped while the containers were starting")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RuntimeError(f"the function containers took over {timeout:.0f} s to start")
                try:
                    warm.result(timeout=min(remaining, 0.1))
                    break
                except TimeoutError:
                    continue

    def worker_pids(self) -> list[int]:
        """The process ids of the current workers (started, not necessarily warm yet)."""
        with self._lock:
            return [pid for worker in self._workers.values() if (pid := worker.pid) is not None]

    def loader(self, spec: FunctionSpec, wait_seconds: float | None = None) -> Handler:
        """A handler that runs ``spec``'s function in a container (drop-in for load_handler).

        It waits ``wait_seconds`` at most for the answer (None: until the function answers or
        its Timeout stops it), then raises ``IntegrationTimeoutError``. A worker that dies while
        it runs the function raises ``FunctionCrashError``; a stopped pool,
        ``ContainerPoolStoppedError``.
        """

        def invoke(event: dict[str, Any], context: LambdaContext) -> Any:
            deadline = None if wait_seconds is None else time.monotonic() + wait_seconds
            stream = context.kaibo_response_stream
            invocation = _Invocation(
                spec.qualified_module,
                spec.handler_name,
                event,
                dataclasses.replace(
                    context, timeout_seconds=spec.timeout_seconds, kaibo_response_stream=None
                ),
                None if stream is None else queue.Queue(),
            )
            self._submit(invocation)
            try:
                if stream is not None:
                    assert invocation.messages is not None
                    _forward(invocation.messages, invocation.future, stream, deadline)
                return _result(invocation.future, deadline)
            except IntegrationTimeoutError:
                invocation.future.cancel()  # still queued: never run it (running: it runs on)
                raise

        return invoke

    def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """Fail what is queued, end every worker (idle ones at once, busy ones after ``grace``,
        killed if need be) and reap them. Idempotent."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            while True:
                try:
                    queued = self._work.get_nowait()
                except queue.Empty:
                    break
                if queued is not None and queued.future.set_running_or_notify_cancel():
                    queued.settle(error=ContainerPoolStoppedError("the stack is stopping"))
            for _ in self._slots:
                self._work.put(None)
        self._stopped.set()
        _live_pools.discard(self)
        deadline = time.monotonic() + grace
        for thread in self._slots:  # idle slots close their workers and leave
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._lock:
            left = list(self._workers.values())
        for worker in left:  # busy (or still booting) past the grace: killed; their slots see it
            worker.kill()
        for thread in self._slots:
            thread.join(timeout=STOP_JOIN_SECONDS)
            if thread.is_alive():
                log.error("container slot %s did not stop", thread.name)

    # -- internals --------------------------------------------------------------------------------

    def _submit(self, invocation: _Invocation) -> None:
        with self._lock:
            if self._stopping:
                raise ContainerPoolStoppedError("the stack is stopping")
            self._work.put(invocation)

    def _start_worker(self, slot: int) -> _Worker | None:
        """A new worker for ``slot`` (None once the pool stops)."""
        with self._lock:
            if self._stopping:
                return None
            self._spawned += 1
            with _stop_signals_blocked():
                worker = _Worker(self._modules, name=f"kaibo-container-{slot}.{self._spawned}")
            self._workers[slot] = worker
            return worker

    def _forget(self, slot: int, worker: _Worker) -> None:
        with self._lock:
            if self._workers.get(slot) is worker:
                del self._workers[slot]

    def _warm_worker(self, slot: int) -> _Worker | None:
        """Start and warm a worker for ``slot``, retrying (with a growing pause) while they die
        or fail to import; None once the pool stops."""
        backoff = REPLACE_BACKOFF_SECONDS
        while True:
            try:
                worker = self._start_worker(slot)
            except OSError as error:  # no process could be started (out of memory, too many processes)
                worker, reason = None, f"no process: {error}"
            else:
                if worker is None:
                    return None
                try:
                    worker.wait_ready(WARM_TIMEOUT_SECONDS)
                    reason = ""
                except (_WorkerGoneError, RuntimeError) as error:
                    reason = str(error) if isinstance(error, RuntimeError) else f"it {worker.how_it_ended()}"
                    worker.kill()
                    self._forget(slot, worker)
            if reason:
                if self._stopping:
                    return None
                if not self._warm[slot].done():
                    self._warm[slot].set_exception(RuntimeError(reason))
                log.error("container %d could not start (%s); trying again in %.1f s", slot, reason, backoff)
                if self._stopped.wait(backoff):
                    return None
                backoff = min(backoff * 2, REPLACE_BACKOFF_MAX_SECONDS)
                continue
            if not self._warm[slot].done():
                self._warm[slot].set_result(None)
            return worker

    def _replace(self, slot: int, worker: _Worker, when: str) -> _Worker | None:
        """End ``worker`` (dead, or as good as) and warm a new one for ``slot`` (None: stopping)."""
        how = worker.how_it_ended()
        worker.kill()
        self._forget(slot, worker)
        if self._stopping:
            return None
        log.warning("container %d %s %s; replacing it", slot, how, when)
        return self._warm_worker(slot)

    def _run(self, slot: int, worker: _Worker, invocation: _Invocation) -> _Worker | None:
        """Run ``invocation`` on the slot's worker — on a new one if it died before it got the
        invocation — and settle it; the worker to go on with (None: the pool is stopping)."""
        while True:
            try:
                if not worker.alive():
                    raise _NotDeliveredError
                worker.run(invocation)
                if not _timed_out(invocation):
                    return worker
                # As Lambda does: the environment a handler timed out in is not reused (the
                # handler was stopped anywhere, its module state may be half-changed).
                worker.kill()
                self._forget(slot, worker)
                log.warning("container %d: %s timed out; replacing it", slot, invocation.module)
                return None if self._stopping else self._warm_worker(slot)
            except _NotDeliveredError:
                replacement = self._replace(slot, worker, "while idle")
                if replacement is None:
                    invocation.settle(error=ContainerPoolStoppedError("the stack is stopping"))
                    return None
                worker = replacement
                continue
            except _WorkerGoneError:
                how = worker.how_it_ended()
            except BaseException as error:  # a fault of this code: fail the invocation, not the slot
                log.exception("container %d failed an invocation of %s", slot, invocation.module)
                how = f"was lost ({error!r})"
            worker.kill()
            self._forget(slot, worker)
            if self._stopping:
                invocation.settle(error=ContainerPoolStoppedError("the stack stopped while it ran"))
                return None
            invocation.settle(error=FunctionCrashError(f"the container running {invocation.module} {how}"))
            log.warning("container %d %s while it ran %s; replacing it", slot, how, invocation.module)
            return self._warm_worker(slot)

    def _serve(self, slot: int) -> None:
        """A slot's thread: keep a warm worker, run the queue's invocations on it one at a time."""
        with _stop_signals_blocked():  # signals are the main thread's business
            worker = self._warm_worker(slot)
            while worker is not None:
                try:
                    invocation = self._work.get(timeout=IDLE_CHECK_SECONDS)
                except queue.Empty:
                    if not worker.alive():  # died idle: replaced before a request has to wait for it
                        worker = self._replace(slot, worker, "while idle")
                    continue
                if invocation is None:  # stop: an idle worker
                    worker.close(STOP_GRACE_SECONDS)
                    self._forget(slot, worker)
                    return
                if invocation.future.set_running_or_notify_cancel():  # else its caller gave up on it
                    worker = self._run(slot, worker, invocation)


def _forward(
    messages: queue.Queue[tuple[Any, ...]],
    future: Future[Any],
    stream: ResponseStream,
    deadline: float | None,
) -> None:
    """Send the worker's stream messages to ``stream`` as they come, until the invocation ends.

    A message ``stream`` refuses fails the invocation once the worker is done, as it would
    have failed the handler in-process. ``deadline``: ``time.monotonic()`` after which the caller
    stops waiting (None: never).
    """
    refused: Exception | None = None
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise IntegrationTimeoutError("the function gave no answer in time")
        try:
            message = messages.get(timeout=remaining)
        except queue.Empty:
            raise IntegrationTimeoutError("the function gave no answer in time") from None
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
