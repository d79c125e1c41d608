"""The local stack's data folder: where what it acknowledged is kept between runs.

``KAIBO_DATA_DIR`` (default ``.kaibo-data/`` at the repository root, ignored by git; ``:memory:``
keeps nothing). Its files:

- ``kaibo-local.json``: the manifest (mode 0600): the tables' name suffix, the admin key, the
  development project and its key, so that the same keys work after a restart;
- ``dynamodb-<generation>.snapshot``: every item of every table at one moment
  (kaibo_local.durability);
- ``dynamodb-<generation>.journal``: every DynamoDB write acknowledged since that snapshot, each
  on disk before its answer;
- ``lock``: held (``flock``) while a stack runs on the folder, so two never share it.

Queues are not kept: their messages are rebuilt at start from the jobs table, which knows every
unfinished job.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final

from kaibo_local.template import REPO_ROOT

__all__ = [
    "DATA_DIR_VARIABLE",
    "DEFAULT_DATA_DIR",
    "IN_MEMORY",
    "DataDir",
    "DataDirError",
    "Manifest",
    "configured_data_dir",
    "reset",
]

DATA_DIR_VARIABLE: Final = "KAIBO_DATA_DIR"
DEFAULT_DATA_DIR: Final = REPO_ROOT / ".kaibo-data"
#: ``KAIBO_DATA_DIR=:memory:``: keep nothing, every run starts empty (as SQLite spells it).
IN_MEMORY: Final = ":memory:"
MANIFEST_NAME: Final = "kaibo-local.json"
LOCK_NAME: Final = "lock"
MANIFEST_VERSION: Final = 1
_GENERATION_FILE: Final = re.compile(r"^dynamodb-(\d{8})\.(snapshot|journal)$")


class DataDirError(Exception):
    """The data folder cannot be used; the message says what and what to do."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """What a restarted stack needs to be the same stack: table names and keys."""

    table_suffix: str
    admin_key: str
    project_id: str
    api_key: str
    #: The emulator's KMS keys: logical id → (key id, material hex) (kaibo_local.kms_keys).
    kms_keys: dict[str, tuple[str, str]] = field(default_factory=dict)


def configured_data_dir(environ: dict[str, str] | None = None) -> Path | None:
    """``KAIBO_DATA_DIR`` as a path (default ``DEFAULT_DATA_DIR``); None for ``:memory:``."""
    value = (os.environ if environ is None else environ).get(DATA_DIR_VARIABLE, "").strip()
    if value == IN_MEMORY:
        return None
    return Path(value).expanduser().absolute() if value else DEFAULT_DATA_DIR


class DataDir:
    """An opened data folder, locked for this process until ``close()``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_fd = -1

    @classmethod
    def open(cls, path: Path) -> DataDir:
        """Create the folder if needed and lock it; DataDirError if it is unusable or in use."""
        where = f"the data folder {path}"
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise DataDirError(f"cannot create {where} ({error.strerror}); set KAIBO_DATA_DIR=...") from None
        if not path.is_dir():
            raise DataDirError(f"{where} is not a folder; set KAIBO_DATA_DIR=... to a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise DataDirError(f"{where} is not writable; fix its permissions or set KAIBO_DATA_DIR=...")
        opened = cls(path)
        try:
            opened._lock_fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(opened._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            opened.close()
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise DataDirError(
                    f"{where} is in use by another kaibo-local; stop it, or set KAIBO_DATA_DIR=... "
                    "to another folder"
                ) from None
            raise DataDirError(f"cannot lock {where} ({error.strerror}); set KAIBO_DATA_DIR=...") from None
        return opened

    def close(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1

    # --- the manifest ---------------------------------------------------------------------------

    def manifest(self) -> Manifest | None:
        """The saved manifest; None in a new folder; DataDirError if it cannot be read."""
        path = self.path / MANIFEST_NAME
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise DataDirError(
                f"{path} cannot be read ({error}); restore it from a backup, or `make reset` to start empty"
            ) from None
        if not isinstance(document, dict) or document.get("version") != MANIFEST_VERSION:
            raise DataDirError(
                f"{path}: not a version {MANIFEST_VERSION} manifest; `make reset` to start empty"
            )
        try:
            return Manifest(
                table_suffix=str(document["tableSuffix"]),
                admin_key=str(document["adminKey"]),
                project_id=str(document["projectId"]),
                api_key=str(document["apiKey"]),
                kms_keys={str(k): (str(v[0]), str(v[1])) for k, v in document.get("kmsKeys", {}).items()},
            )
        except KeyError as missing:
            raise DataDirError(f"{path} lacks {missing}; `make reset` to start empty") from None

    def save_manifest(self, manifest: Manifest) -> None:
        fields = asdict(manifest)
        document = {
            "version": MANIFEST_VERSION,
            "tableSuffix": fields["table_suffix"],
            "adminKey": fields["admin_key"],
            "projectId": fields["project_id"],
            "apiKey": fields["api_key"],
            "kmsKeys": {name: list(value) for name, value in manifest.kms_keys.items()},
        }
        write_atomically(self.path / MANIFEST_NAME, json.dumps(document, indent=1).encode() + b"\n")

    # --- snapshots and journals -------------------------------------------------------------------

    def generations(self) -> list[int]:
        """The generations that have a snapshot, oldest first."""
        found = set()
        for entry in self.path.iterdir():
            match = _GENERATION_FILE.match(entry.name)
            if match and match.group(2) == "snapshot":
                found.add(int(match.group(1)))
        return sorted(found)

    def snapshot_path(self, generation: int) -> Path:
        return self.path / f"dynamodb-{generation:08d}.snapshot"

    def journal_path(self, generation: int) -> Path:
        return self.path / f"dynamodb-{generation:08d}.journal"

    def remove_generations_before(self, generation: int) -> None:
        """Delete every snapshot and journal older than ``generation`` (and stray temporaries)."""
        for entry in self.path.iterdir():
            match = _GENERATION_FILE.match(entry.name)
            if (match and int(match.group(1)) < generation) or entry.name.endswith(".tmp"):
                entry.unlink(missing_ok=True)
        sync_folder(self.path)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old file or the new one, whole."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    temporary.replace(path)
    sync_folder(path.parent)


def sync_folder(path: Path) -> None:
    """fsync a folder, so that the names created or renamed in it survive a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def reset(path: Path) -> list[Path]:
    """Empty a data folder (the stack must not be running on it); the files removed.

    Only the files a stack writes are removed; DataDirError if the folder is in use.
    """
    if not path.exists():
        return []
    opened = DataDir.open(path)
    removed = []
    try:
        for entry in sorted(path.iterdir()):
            if (
                entry.name == MANIFEST_NAME
                or _GENERATION_FILE.match(entry.name)
                or entry.name.endswith(".tmp")
            ):
                entry.unlink()
                removed.append(entry)
        sync_folder(path)
    finally:
        opened.close()
    with contextlib.suppress(OSError):
        (path / LOCK_NAME).unlink()
        path.rmdir()  # only if nothing else was put there
    return removed
