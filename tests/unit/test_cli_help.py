"""The ``kaibo`` command tree, in process and without a server: every command and every
argument and option has help, ``--version`` prints the package version, usage errors exit 2,
and the derived idempotency key of an imported line follows its documented rule."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import pytest
import typer

from kaibo.cli import main
from kaibo.cli._app import app
from kaibo.cli._events_input import derived_key, file_events, json_lines
from kaibo.cli._shared import UsageError


def walk(command: Any, path: str = "kaibo") -> Iterator[tuple[str, Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from walk(sub, f"{path} {name}")


COMMANDS = dict(walk(typer.main.get_command(app)))


def test_the_tree_has_every_documented_command() -> None:
    assert set(COMMANDS) == {
        "kaibo",
        *(
            f"kaibo {name}"
            for name in (
                "keys", "keys create", "keys revoke", "admin-key", "remember", "import", "recall", "memory",
                "explain", "job", "streams", "events", "forget", "ledger", "receipt", "verify", "mcp",
            )
        ),
    }  # fmt: skip


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_and_every_parameter_has_help(path: str) -> None:
    command = COMMANDS[path]
    assert (command.help or "").strip(), f"{path} has no help"
    for param in command.params:
        assert (getattr(param, "help", None) or "").strip(), f"{path}: {param.name} has no help"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_help_page_renders_and_exits_0(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*path.split()[1:], "--help"]) == 0
    assert "Usage: kaibo" in capsys.readouterr().out


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"kaibo {version('kaibo')}\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["recall"],  # no question
        ["recall", "q", "--budget", "0"],
        ["nope"],
        ["forget", "--query", "a"],  # no reason
        ["import", "-", "--stream", "s", "--batch-size", "50"],
        ["mcp", "--transport", "carrier-pigeon"],
    ],
)
def test_given_a_usage_error_then_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().out == ""


def test_given_no_endpoint_then_exit_2_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KAIBO_ENDPOINT", raising=False)
    assert main(["streams", "--api-key", "kb_x"]) == 2
    assert "KAIBO_ENDPOINT" in capsys.readouterr().err


def test_the_derived_key_is_the_documented_digest() -> None:
    event = {"payload": {"text": "hé", "role": "user"}, "kind": "message"}
    canonical = '{"kind":"message","payload":{"role":"user","text":"hé"}}'
    expected = hashlib.sha256(f"chat\n3\n{canonical}\n".encode()).hexdigest()
    assert derived_key("chat", 3, event) == "kaibo-file-" + expected
    assert derived_key("chat", 3, json.loads(json.dumps(event, indent=4))) == derived_key("chat", 3, event)
    assert derived_key("chat", 4, event) != derived_key("chat", 3, event)


def test_json_lines_keep_file_line_numbers_and_name_bad_lines() -> None:
    read = json_lines('{"kind": "a"}\n\n[1]\n{oops\n{"kind": "b"}\n')
    assert [(item.number, item.event is not None) for item in read] == [
        (1, True),
        (3, False),
        (4, False),
        (5, True),
    ]
    assert read[1].problem is not None
    assert "not a JSON object" in read[1].problem


def test_a_line_separator_inside_a_json_string_does_not_split_the_line() -> None:
    read = json_lines('{"text": "a\u2028b"}\n{"text": "c"}\n')
    assert [(item.number, item.event) for item in read] == [(1, {"text": "a\u2028b"}), (2, {"text": "c"})]


def test_a_file_is_one_object_a_list_or_json_lines() -> None:
    assert [item.number for item in file_events('{"kind": "a"}')] == [1]
    assert [item.number for item in file_events('[{"kind": "a"}, {"kind": "b"}]')] == [1, 2]
    assert [item.number for item in file_events('{"kind": "a"}\n{"kind": "b"}')] == [1, 2]
    with pytest.raises(UsageError):
        file_events("[1, 2]")
