"""The AWS emulator in a process of its own, with the data folder's tables (``make run``).

The local stack's main process runs the HTTP front and hands invocations to the function
containers; every DynamoDB, SQS and KMS call of those containers goes to the emulator (moto) and,
with a data folder, through the journal. In one process they all took turns on one interpreter
lock: the emulator alone kept a core busy while the front waited for it. So the stack starts the
emulator as a child process (``kaibo_local.emulator_process.main``), and the main process
talks to it in two ways:

- AWS calls over HTTP, as before: ``endpoint_url``, the child's moto server on 127.0.0.1;
- a control channel (a socket pair, pickled messages, one request at a time): ``restore`` the
  data folder's tables into the emulator and journal every write from then on
  (kaibo_local.durability, all of it in the child, where the writes happen), ``compact`` the
  folder (after every purge that erased anything), ``call`` a function in the child (what must
  reach into moto's backends, such as giving the KMS keys their kept material), and ``stop``.

What the main process is sure of: a write is journalled and synced by the child before its HTTP
answer leaves, as before (the sync is a group commit shared by concurrent requests, and every
DynamoDB answer waits for the sync of every write journalled before it: kaibo_local.durability). A
journal write or sync that fails ends the child at once, before that answer (the line ``cannot write
to the data folder`` on stderr); any death of the child that the stack did not ask for is reported
to ``on_death`` (the stack then ends, the function containers with it: what it acknowledged is on
disk). The child ignores the stop signals (SIGINT, SIGTERM, SIGHUP: a terminal's Ctrl-C reaches the
whole process group), so that the stack stops it after the containers, in order; and it exits by
itself when its control channel closes (the stack is gone, even by SIGKILL). It is not started by
multiprocessing's spawn: it is no function container.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar

if TYPE_CHECKING:
    from kaibo_local.durability import DurableTables
    from kaibo_local.emulator import Emulator

__all__ = [
    "READY_TIMEOUT_SECONDS",
    "STOP_TIMEOUT_SECONDS",
    "EmulatorProcess",
    "EmulatorProcessError",
    "Restored",
    "create_kms_keys",
    "kill_all",
]

log = logging.getLogger("kaibo_local")

#: How long the emulator may take to import moto and listen.
READY_TIMEOUT_SECONDS: Final = 120.0
#: How long ``stop`` waits for the emulator to stop serving and close the journal before killing it.
STOP_TIMEOUT_SECONDS: Final = 3.0
_STOP_SIGNALS: Final = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
_CHANNEL_FD_VARIABLE: Final = "KAIBO_LOCAL_EMULATOR_CHANNEL_FD"
#: The child's program: this module's ``main`` under its own name (not ``__main__``, so that what it
#: pickles, ``Restored``, unpickles here).
_CHILD_MAIN: Final = "import sys; from kaibo_local.emulator_process import main; sys.exit(main(sys.argv[1:]))"


class EmulatorProcessError(Exception):
    """The emulator process failed a request (``kind``: the child's exception type), or is gone."""

    def __init__(self, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Restored:
    """What ``restore`` found in the data folder and put back."""

    items: int  # items restored
    empty: bool  # nothing stored yet (a new folder)
    journal_writes: int  # complete writes replayed from the journal
    torn_bytes: int  # bytes of a torn last journal record, dropped


_P = ParamSpec("_P")
_R = TypeVar("_R")

_live: set[EmulatorProcess] = set()
_live_lock = threading.Lock()


def kill_all() -> None:
    """SIGKILL every emulator process this process started (the stack's hard exit)."""
    with _live_lock:
        running = list(_live)
    for emulator in running:
        emulator.kill()


@contextlib.contextmanager
def _stop_signals_blocked() -> Iterator[None]:
    """Block the stop signals in this thread, so that a child started from it boots with them held
    (a blocked signal mask survives fork and exec) until it ignores them."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class EmulatorProcess:
    """The stack's end of the emulator process: ``endpoint_url`` for AWS calls, the control
    channel for the rest. ``on_death(status)``: called (from a thread of its own) if the process
    ends without being asked to."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        channel: Connection,
        endpoint_url: str,
        on_death: Callable[[int], None] | None,
    ) -> None:
        self.process = process
        self.endpoint_url = endpoint_url
        self._channel = channel
        self._lock = threading.Lock()  # one request at a time on the channel
        self._stopping = False
        self._on_death = on_death
        with _live_lock:
            _live.add(self)
        threading.Thread(target=self._watch, name="emulator-watch", daemon=True).start()

    @classmethod
    def start(
        cls,
        host: str = "127.0.0.1",
        on_death: Callable[[int], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> EmulatorProcess:
        """Start the emulator and wait until it listens; EmulatorProcessError if it cannot."""
        ours, theirs = socket.socketpair()
        try:
            with _stop_signals_blocked():
                process = subprocess.Popen(  # noqa: S603 - this interpreter, our module
                    [sys.executable, "-c", _CHILD_MAIN, host],
                    env=_child_environment(theirs.fileno()),
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=_stderr_or_nothing(),  # stdout is the stack's KAIBO_* lines: nothing else
                )
        finally:
            theirs.close()
        channel = Connection(ours.detach())
        try:
            endpoint_url = _await_ready(process, channel, cancel)
        except BaseException:
            channel.close()
            with contextlib.suppress(OSError):
                process.kill()
            process.wait()
            raise
        return cls(process, channel, endpoint_url, on_death)

    @property
    def pid(self) -> int:
        return self.process.pid

    # -- requests ----------------------------------------------------------------------------------

    def restore(self, data_dir: Path, table_names: list[str]) -> Restored:
        """Load the folder's tables into the (new, empty) tables and journal every write from now
        on; EmulatorProcessError (kind ``DataDirError``: a message for the user) if it cannot."""
        restored: Restored = self._request("restore", str(data_dir), table_names)
        return restored

    def compact(self) -> None:
        """Rewrite the data folder as one snapshot of the tables now (no-op without a folder)."""
        self._request("compact")

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` in the emulator process (a module-level function; picklable
        arguments and result), for what must reach into moto's backends."""
        return self._request("call", function, args)

    def _request(self, operation: str, *args: Any) -> Any:
        with self._lock:
            try:
                self._channel.send((operation, args))
                answer = self._channel.recv()
            except (EOFError, OSError) as error:
                raise EmulatorProcessError(f"the AWS emulator is gone ({error or 'closed'})") from None
        if answer[0] == "ok":
            return answer[1]
        raise EmulatorProcessError(answer[2], kind=answer[1])

    # -- the end -----------------------------------------------------------------------------------

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        """Stop serving, close the journal (every write it acknowledged is on disk already) and
        end the process; killed if it has not ended within ``timeout``. Idempotent."""
        self._stopping = True
        if self.process.poll() is None and self._lock.acquire(timeout=timeout):
            try:
                self._channel.send(("stop", ()))
                if self._channel.poll(timeout):
                    self._channel.recv()
            except (EOFError, OSError):
                pass
            finally:
                self._lock.release()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._forget()

    def kill(self) -> None:
        """SIGKILL, then reap."""
        self._stopping = True
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        self._forget()

    def _forget(self) -> None:
        with contextlib.suppress(OSError):
            self._channel.close()
        with _live_lock:
            _live.discard(self)

    def _watch(self) -> None:
        status = self.process.wait()
        if not self._stopping and self._on_death is not None:
            self._on_death(status)


def _child_environment(channel_fd: int) -> dict[str, str]:
    """This process's environment, with the channel's descriptor, and this package found first
    (whoever set up this process's ``sys.path``: make's PYTHONPATH, a test runner)."""
    package_root = str(Path(__file__).resolve().parents[1])
    paths = [package_root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), _CHANNEL_FD_VARIABLE: str(channel_fd)}


def _stderr_or_nothing() -> int:
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a replaced stderr (a test's capture)
        return subprocess.DEVNULL


def _await_ready(
    process: subprocess.Popen[bytes], channel: Connection, cancel: threading.Event | None
) -> str:
    """The emulator's endpoint once it listens; EmulatorProcessError if it ends or fails first."""
    waited = 0.0
    while not channel.poll(0.1):
        waited += 0.1
        if cancel is not None and cancel.is_set():
            raise EmulatorProcessError("stopped while the AWS emulator was starting", kind="cancelled")
        if process.poll() is not None:
            raise EmulatorProcessError(f"the AWS emulator ended as it started (status {process.returncode})")
        if waited > READY_TIMEOUT_SECONDS:
            raise EmulatorProcessError(f"the AWS emulator took over {READY_TIMEOUT_SECONDS:.0f} s to start")
    try:
        message = channel.recv()
    except (EOFError, OSError):
        raise EmulatorProcessError(
            f"the AWS emulator ended as it started (status {process.wait()})"
        ) from None
    if message[0] != "ready":
        raise EmulatorProcessError(f"the AWS emulator could not start: {message[1]}")
    return str(message[1])


# -- in the emulator process ---------------------------------------------------------------------


def create_kms_keys(
    endpoint_url: str, template: Mapping[str, Any], kept: Mapping[str, tuple[str, str]]
) -> dict[str, tuple[str, str]]:
    """``kaibo_local.kms_keys.create_keys`` where moto's KMS backend is: run it with ``call``."""
    import boto3  # noqa: PLC0415 - in the emulator process only

    from kaibo_local.kms_keys import create_keys  # noqa: PLC0415

    return create_keys(boto3.client("kms", endpoint_url=endpoint_url), template, kept)


class _Child:
    """The emulator process's state: the server, and the durable tables once restored."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator
        self.tables: DurableTables | None = None

    def restore(self, data_dir: str, table_names: list[str]) -> Restored:
        from kaibo_local.data_dir import DataDir  # noqa: PLC0415
        from kaibo_local.durability import DurableTables, read_stored_tables  # noqa: PLC0415

        folder = DataDir(Path(data_dir))  # locked by the stack's main process
        stored = read_stored_tables(folder)
        tables = DurableTables(folder, self.emulator, table_names)
        items = tables.restore(stored)
        self.tables = tables
        self.emulator.record_writes(_or_exit(tables.write), _barrier_or_exit(tables.sync_barrier))
        return Restored(items, stored.empty, len(stored.journal), stored.torn_bytes)

    def compact(self) -> None:
        if self.tables is not None:
            self.tables.compact()

    def stop(self) -> None:
        self.emulator.stop()
        if self.tables is not None:
            self.tables.close()


def _or_exit(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function``, ending the emulator at once if it fails to write or sync the journal: the write
    it records is in memory but not on disk, and must not be acknowledged (it was not: its answer
    has not left)."""

    def or_exit(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return function(*args, **kwargs)
        except OSError as error:
            reason = error.strerror or str(error)
            sys.stderr.write(
                f"kaibo-local: cannot write to the data folder ({reason}); nothing unsaved was acknowledged\n"
            )
            sys.stderr.flush()
            os._exit(1)

    return or_exit


def _barrier_or_exit(sync_barrier: Callable[[], Callable[[], None]]) -> Callable[[], Callable[[], None]]:
    """``sync_barrier``, whose wait for the sync ends the emulator at once if the sync fails."""

    def barrier_or_exit() -> Callable[[], None]:
        return _or_exit(sync_barrier())

    return barrier_or_exit


def _serve(channel: Connection, child: _Child) -> None:
    """Answer the stack's requests until ``stop`` or until the channel closes."""
    while True:
        try:
            operation, args = channel.recv()
        except (EOFError, OSError):
            os._exit(0)  # the stack is gone: every acknowledged write is on disk already
        try:
            if operation == "stop":
                child.stop()
                channel.send(("ok", None))
                return
            if operation == "restore":
                result: Any = child.restore(*args)
            elif operation == "compact":
                child.compact()
                result = None
            elif operation == "call":
                function, call_args = args
                result = function(*call_args)
            else:
                raise ValueError(f"unknown request {operation!r}")
            answer: tuple[Any, ...] = ("ok", result)
        except Exception as error:
            if type(error).__name__ != "DataDirError":
                log.debug("the emulator failed %s", operation, exc_info=True)
            answer = ("error", type(error).__name__, str(error) or traceback.format_exc(limit=1))
        try:
            channel.send(answer)
        except (pickle.PicklingError, TypeError, AttributeError) as error:
            channel.send(("error", type(error).__name__, f"the answer cannot be returned: {error}"))
        except OSError:
            os._exit(0)


def main(argv: list[str]) -> int:
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)  # the stack stops this process, after its containers
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    logging.basicConfig(level=os.environ.get("KAIBO_LOCAL_LOG_LEVEL", "WARNING"), stream=sys.stderr)
    channel = Connection(int(os.environ.pop(_CHANNEL_FD_VARIABLE)))
    host = argv[0] if argv else "127.0.0.1"
    try:
        from kaibo_local.emulator import start_emulator  # noqa: PLC0415 - moto loads here only

        emulator = start_emulator(host=host)
    except Exception as error:
        channel.send(("failed", f"{type(error).__name__}: {error}"))
        return 1
    channel.send(("ready", emulator.endpoint_url))
    _serve(channel, _Child(emulator))
    sys.stderr.flush()
    os._exit(0)  # stopped: nothing left to tear down (moto's state is thrown away with the process)
