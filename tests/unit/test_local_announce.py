"""What ``make run`` prints (``LocalStack.announce``): ``export KAIBO_…`` lines a shell can ``eval``,
values quoted where they need it, and ``parse_announcement`` reading back exactly what was meant."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kaibo_local.stack import LocalStack, parse_announcement

NAMES = [
    "KAIBO_ENDPOINT",
    "KAIBO_API_KEY",
    "KAIBO_ADMIN_KEY",
    "KAIBO_AWS_ENDPOINT",
    "KAIBO_PROJECT_ID",
    "KAIBO_DATA_DIR",
]


def announced(data_dir: Path | None) -> str:
    fake: Any = SimpleNamespace
    stack = LocalStack(
        emulator=fake(endpoint_url="http://127.0.0.1:40001"),
        front=fake(url="http://127.0.0.1:3000"),
        containers=fake(),
        admin_key="kb_admin_Ab-9_z",
        api_key="kb_0123456789abcdef_Xy-_z",
        project_id="prj_01ABC",
        store=None if data_dir is None else fake(path=data_dir),
    )
    out = io.StringIO()
    stack.announce(out)
    return out.getvalue()


def evaluated(printed: str) -> dict[str, str]:
    """The variables a shell has after ``eval "$(grep '^export KAIBO_' …)"`` of ``printed``."""
    script = "eval \"$(printf '%s' \"$1\" | grep '^export KAIBO_')\" && env -0"
    clean = {name: value for name, value in os.environ.items() if not name.startswith("KAIBO_")}
    shown = subprocess.run(
        ["bash", "-c", script, "announce", f"make: exec env …\n{printed}"],
        env=clean,
        capture_output=True,
        check=True,
    ).stdout.decode()
    variables = dict(entry.split("=", 1) for entry in shown.split("\0") if entry)
    return {name: value for name, value in variables.items() if name.startswith("KAIBO_")}


def test_given_a_stack_then_every_line_is_an_export_of_one_kaibo_variable() -> None:
    lines = announced(None).splitlines()
    assert [line.split("=", 1)[0] for line in lines] == [f"export {name}" for name in NAMES]
    assert "export KAIBO_API_KEY=kb_0123456789abcdef_Xy-_z" in lines  # plain values stay unquoted
    assert "export KAIBO_DATA_DIR=:memory:" in lines


def test_given_a_data_dir_a_shell_would_split_then_eval_and_the_parser_both_get_it_whole(
    tmp_path: Path,
) -> None:
    awkward = tmp_path / "my data $HOME `id` it's; rm -rf x"
    printed = announced(awkward)
    expected = {
        "KAIBO_ENDPOINT": "http://127.0.0.1:3000",
        "KAIBO_API_KEY": "kb_0123456789abcdef_Xy-_z",
        "KAIBO_ADMIN_KEY": "kb_admin_Ab-9_z",
        "KAIBO_AWS_ENDPOINT": "http://127.0.0.1:40001",
        "KAIBO_PROJECT_ID": "prj_01ABC",
        "KAIBO_DATA_DIR": str(awkward),
    }
    assert parse_announcement(printed) == expected
    assert evaluated(printed) == expected


def test_given_other_lines_and_a_line_still_being_written_then_the_parser_reads_only_whole_exports() -> None:
    printed = (
        'make: exec env …\n{"level":"WARNING"}\nexport KAIBO_ENDPOINT=http://127.0.0.1:3000\nexport KAIBO_API'
    )
    assert parse_announcement(printed) == {"KAIBO_ENDPOINT": "http://127.0.0.1:3000"}
