"""What the benchmark scripts share: progress lines, reports and their tables, percentiles, the
machine line, the fake AWS environment and the local emulator's tables.

Nothing here imports moto or the emulator at module level: ``bench/recall_cost.py`` keeps them out
of its measuring process (its CPU figures include every full garbage collection, which walks all
the objects the process holds), so the helpers that need them import them when called.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import math
import os
import platform
import secrets
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Literal

from kaibo_core.adapters.dynamodb_values import item_size
from kaibo_core.core.semantic.scoring import SemanticParams

if TYPE_CHECKING:
    from moto.dynamodb.models import DynamoDBBackend
    from mypy_boto3_dynamodb import DynamoDBClient


#: moto's default account, and the region every benchmark runs in.
MOTO_ACCOUNT: Final = "123456789012"
REGION: Final = "us-east-1"
#: Fake credentials, always: requests go to the local emulator only, and no real ones are needed.
FAKE_AWS: Final = {
    "AWS_ACCESS_KEY_ID": "kaibo-bench",
    "AWS_SECRET_ACCESS_KEY": "kaibo-bench",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}
#: Attributes the StreamHeads index projects (its keys, the table's keys, INCLUDE attributes).
GSI_ATTRIBUTES: Final = frozenset({"headsPk", "headsSk", "pk", "seq", "headSeq", "headHash", "stream"})

_STARTED: Final = time.perf_counter()


def progress(text: str) -> None:
    """A progress line on stderr, with the seconds since the benchmark started."""
    sys.stderr.write(f"[{time.perf_counter() - _STARTED:6.1f} s] {text}\n")
    sys.stderr.flush()


# --- Figures --------------------------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (0.0 of no values)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)] if ordered else 0.0


def total(counts: dict[str, float], prefix: str) -> float:
    """The sum of the counters whose names start with ``prefix``."""
    return sum(value for name, value in counts.items() if name.startswith(prefix))


def machine(*packages: str) -> str:
    """Cores, CPU model, system, Python and the versions of ``packages``: a report's machine line."""
    cpu = "unknown CPU"
    with contextlib.suppress(OSError), Path("/proc/cpuinfo").open() as info:
        cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    versions = ", ".join(f"{name} {importlib.metadata.version(name)}" for name in packages)
    system = f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    return f"{os.cpu_count()} cores ({cpu}), {system}, {versions}"


def process_memory_mb(pid: int | str = "self") -> tuple[float, float]:
    """A process's resident set size and its peak (VmRSS, VmHWM), in MB."""
    found: dict[str, float] = {}
    with Path(f"/proc/{pid}/status").open() as status:
        for line in status:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(rest.split()[0]) / 1024
    return found.get("VmRSS", 0.0), found.get("VmHWM", 0.0)


# --- DynamoDB's billing, as the meters count it --------------------------------------------------


def read_units(size: int, consistent: bool) -> float:
    """One read of ``size`` bytes: 1 unit per started 4 KB (strongly consistent), half otherwise;
    never less than one unit (a read of nothing is billed the minimum)."""
    return max(1, math.ceil(size / 4096)) * (1.0 if consistent else 0.5)


def write_units(size: int, transactional: bool) -> int:
    """One item written: 1 unit per started KB, twice that inside a transaction."""
    return max(1, math.ceil(size / 1024)) * (2 if transactional else 1)


def update_size(spec: dict[str, Any]) -> int:
    """An Update's item as the meters estimate it: its key plus the attributes it sets."""
    names = spec.get("ExpressionAttributeNames", {})
    values = spec.get("ExpressionAttributeValues", {})
    return item_size(spec["Key"]) + sum(
        item_size({names.get(name, name.lstrip(":")): value}) for name, value in values.items()
    )


def heads_index_units(item: dict[str, Any]) -> int:
    """Write units of a stream head's StreamHeads index entry (a standard write of what it projects)."""
    return write_units(item_size({k: v for k, v in item.items() if k in GSI_ATTRIBUTES}), transactional=False)


# --- Reports --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellStyle:
    """How a report's tables write values: floats with ``small`` digits below ``small_below`` and
    ``large`` ones above; ``zero`` and ``none``, when set, for 0.0 and None."""

    small_below: float = 100
    small: str = ",.2f"
    large: str = ",.0f"
    zero: str | None = None
    none: str | None = None


def cell(value: object, style: CellStyle = CellStyle()) -> str:
    if value is None and style.none is not None:
        return style.none
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == 0 and style.zero is not None:
            return style.zero
        return f"{value:{style.small if abs(value) < style.small_below else style.large}}"
    return str(value)


def _widths(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], padded: bool = True) -> list[str]:
    """A markdown table (first column left-aligned, the others right), cells padded or not."""
    if not padded:
        return [
            "| " + " | ".join(headers) + " |",
            "| " + " | ".join("---" if i == 0 else "---:" for i in range(len(headers))) + " |",
            *("| " + " | ".join(row) + " |" for row in rows),
        ]
    widths = _widths(headers, rows)

    def line(cells: Sequence[str]) -> str:
        padded_cells = [
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded_cells) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|"
    return [line(headers), rule, *(line(row) for row in rows)]


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A plain-text table: columns two spaces apart, the first left-aligned, the others right."""
    widths = _widths(headers, rows)

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return [line(headers), "  ".join("-" * w for w in widths), *(line(row) for row in rows)]


TableLayout = Literal["markdown", "padded markdown", "text"]


class Report:
    """A benchmark's report: lines written to ``out`` (stdout at the time of writing, unless given)
    and flushed as they come, and kept in ``lines``.

    ``layout``: markdown tables, their cells padded to the column width or not, under ``#`` titles;
    or plain-text tables under underlined titles. ``cells``: how values are written in tables.
    """

    def __init__(
        self,
        out: IO[str] | None = None,
        *,
        layout: TableLayout = "markdown",
        cells: CellStyle = CellStyle(),
    ) -> None:
        self._out = out
        self.layout = layout
        self.cells = cells
        self.lines: list[str] = []

    def line(self, text: str = "") -> None:
        out = self._out or sys.stdout
        self.lines.append(text)
        out.write(text + "\n")
        out.flush()

    def __call__(self, *lines: str) -> None:
        for text in lines:
            self.line(text)

    def title(self, text: str, level: int = 2) -> None:
        if self.layout == "text":
            self("", text, "=" * len(text))
        else:
            self("", "#" * level + " " + text, "")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        cells = [[cell(value, self.cells) for value in row] for row in rows]
        if self.layout == "text":
            self(*text_table(headers, cells))
        else:
            self(*markdown_table(headers, cells, padded=self.layout == "padded markdown"))


@contextlib.contextmanager
def real_stdout_only() -> Iterator[IO[str]]:
    """Send file descriptor 1 to /dev/null and yield a stream on the real stdout.

    The handlers print their CloudWatch metrics (EMF) and logs to stdout, as on Lambda, in this
    process and in the stack's worker processes (which inherit descriptor 1): keep them out of
    the tables. stderr is left alone, so errors still show.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    real = os.fdopen(os.dup(saved), "w", encoding="utf-8")
    with Path(os.devnull).open("w") as sink:
        os.dup2(sink.fileno(), 1)
        try:
            yield real
        finally:
            real.flush()
            os.dup2(saved, 1)
            os.close(saved)
            real.close()


# --- The local emulator ---------------------------------------------------------------------------


def use_fake_aws() -> None:
    """Point this process's AWS environment at fake credentials (never a real session or profile)."""
    os.environ.update(FAKE_AWS)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):
        os.environ.pop(name, None)


def moto_dynamodb_backend() -> DynamoDBBackend:
    """moto's DynamoDB backend of this process (the emulator's, when it runs here)."""
    from moto.dynamodb.models import dynamodb_backends  # noqa: PLC0415 - moto only where it runs

    backend: DynamoDBBackend = dynamodb_backends[MOTO_ACCOUNT][REGION]
    return backend


def emulator_speedups() -> str:
    """What the emulator's moto speed-ups do, for a report (``kaibo_local.moto_speedups``)."""
    from kaibo_local.moto_speedups import SPEEDUPS  # noqa: PLC0415 - moto only where it runs

    return "; ".join(patch.summary for patch in SPEEDUPS)


@dataclass(frozen=True)
class LocalTables:
    client: DynamoDBClient
    tables: dict[str, str]  # logical name in template.yaml -> table name


@contextlib.contextmanager
def local_tables() -> Iterator[LocalTables]:
    """The emulator in this process with the template's tables (fresh names), and the shared
    DynamoDB client (``kaibo_core.adapters.aws.dynamodb_client``) pointed at it; fake credentials."""
    from kaibo_core.adapters.aws import dynamodb_client  # noqa: PLC0415 - moto only where it runs
    from kaibo_local.emulator import start_emulator  # noqa: PLC0415
    from kaibo_local.template import create_tables, load_template  # noqa: PLC0415

    use_fake_aws()
    with start_emulator() as emulator:
        os.environ["AWS_ENDPOINT_URL"] = emulator.endpoint_url
        dynamodb_client.cache_clear()
        client = dynamodb_client()
        yield LocalTables(client, create_tables(client, load_template(), secrets.token_hex(4)))


def semantic_params(overrides: Sequence[str]) -> SemanticParams | None:
    """``SemanticParams`` with ``NAME=VALUE`` overrides (``--semantic-param``); None without any."""
    if not overrides:
        return None
    types = {field.name: field.type for field in fields(SemanticParams)}
    changes: dict[str, float | int] = {}
    for override in overrides:
        name, _, value = override.partition("=")
        if name not in types:
            raise SystemExit(
                f"--semantic-param: no SemanticParams field {name!r} (fields: {', '.join(types)})"
            )
        changes[name] = int(value) if types[name] in {"int", int} else float(value)
    return replace(SemanticParams(), **changes)  # type: ignore[arg-type]
