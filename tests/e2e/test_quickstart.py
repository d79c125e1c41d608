"""The README's quickstart, run as a new user runs it: ``make run`` once, its ``export KAIBO_…``
lines taken with ``eval``, then every sample of docs/quickstart/ (curl, Python, JavaScript, the MCP
client configurations); each must print what the README says it prints."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from kaibo.mcp_server import DATA_NOTICE
from tests.e2e.test_local_stack import STOP_DEADLINE_SECONDS, RunningStack, start_make_run, stop

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "quickstart"
README = (ROOT / "README.md").read_text()
#: A sample answers within this (remember waits for structuring; the first call warms a container).
SAMPLE_SECONDS = 60
#: What the README's placeholder path in the MCP configurations stands for.
PLACEHOLDER_CHECKOUT = "/path/to/kaibo"


def readme_block(language: str, first_line: str) -> str:
    """The README's fenced ``language`` block that starts with ``first_line``."""
    pattern = rf"```{language}\n({re.escape(first_line)}.*?)```"
    found = re.search(pattern, README, re.DOTALL)
    assert found, f"README.md has no ```{language} block starting with {first_line!r}"
    return found.group(1)


#: What the README says every sample prints.
PRINTED = readme_block("text", "recall: ")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_make_run(tmp_path_factory.mktemp("quickstart"))
    yield running
    assert stop(running, signal.SIGTERM), f"the stack outlived its tests by {STOP_DEADLINE_SECONDS} s"


def user_environment(stack: RunningStack) -> dict[str, str]:
    """A shell's environment after the README's ``eval "$(grep '^export KAIBO_' …)"``."""
    clean = {name: value for name, value in os.environ.items() if not name.startswith("KAIBO_")}
    keep = ("KAIBO_ENDPOINT", "KAIBO_API_KEY", "KAIBO_PROJECT_ID")
    return {**clean, **{name: stack.values[name] for name in keep}}


def run_sample(command: list[str], env: dict[str, str]) -> str:
    result = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=SAMPLE_SECONDS, check=False
    )
    assert result.returncode == 0, f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def remembered(stack: RunningStack) -> None:
    """The quickstart's two messages remembered (every sample remembers the same, idempotently)."""
    run_sample([sys.executable, str(QUICKSTART / "quickstart.py")], user_environment(stack))


def test_given_the_readme_then_its_curl_sample_is_the_file_verbatim_and_says_what_is_printed() -> None:
    assert readme_block("sh", "#!/usr/bin/env bash\n") == (QUICKSTART / "quickstart.sh").read_text()
    assert "recall: The release target is July 17" in PRINTED
    lines = PRINTED.splitlines()
    superseded = lines.index("  superseded: The release target is July 13, 2026")
    assert lines.index("  active: The release target is July 17, 2026.") > superseded


@pytest.mark.skipif(shutil.which("jq") is None, reason="the curl sample needs jq, and jq is not installed")
def test_given_make_run_eval_then_the_curl_sample_prints_what_the_readme_says(stack: RunningStack) -> None:
    announced = stack.log.with_name("stdout.txt")  # what make run printed
    script = 'eval "$(grep \'^export KAIBO_\' "$1")" && bash docs/quickstart/quickstart.sh'
    env = {name: value for name, value in os.environ.items() if not name.startswith("KAIBO_")}
    assert run_sample(["bash", "-c", script, "quickstart", str(announced)], env) == PRINTED


def test_given_the_python_sample_then_it_prints_what_the_readme_says(stack: RunningStack) -> None:
    printed = run_sample([sys.executable, str(QUICKSTART / "quickstart.py")], user_environment(stack))
    assert printed == PRINTED


@pytest.mark.skipif(shutil.which("node") is None, reason="the JavaScript sample needs node, not installed")
def test_given_the_javascript_sample_then_it_prints_what_the_readme_says(stack: RunningStack) -> None:
    node = shutil.which("node")
    assert node is not None
    printed = run_sample([node, str(QUICKSTART / "quickstart.mjs")], user_environment(stack))
    assert printed == PRINTED


def configured_server(name: str) -> dict[str, Any]:
    server: dict[str, Any] = json.loads((QUICKSTART / name).read_text())["mcpServers"]["kaibo"]
    return server


async def recall_over_mcp(server: StdioServerParameters | str) -> str:
    async with Client(server) as client:
        result = await client.call_tool("recall", {"question": "When is the release target?", "budget": 100})
    assert not result.is_error
    return "".join(getattr(block, "text", "") for block in result.content)


def assert_recalled_as_data(text: str) -> None:
    assert text.startswith(DATA_NOTICE)
    data = json.loads(text.split("\n", 2)[2].rsplit("\n", 1)[0])  # between the two markers
    assert data["items"][0]["text"] == "The release target is July 17, 2026."


@pytest.mark.usefixtures("remembered")
def test_given_the_stdio_mcp_configuration_then_an_agent_recalls_july_17_as_data(stack: RunningStack) -> None:
    configured = configured_server("mcp.json")
    assert set(configured["env"]) == {"KAIBO_ENDPOINT", "KAIBO_API_KEY", "KAIBO_PROJECT_ID"}
    server = StdioServerParameters(
        command=configured["command"].replace(PLACEHOLDER_CHECKOUT, str(ROOT)),
        args=configured["args"],
        env={name: stack.values[name] for name in configured["env"]},
    )
    assert_recalled_as_data(asyncio.run(recall_over_mcp(server)))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def kaibo_mcp_http(stack: RunningStack, tmp_path: Path) -> Iterator[int]:
    """``kaibo mcp --transport streamable-http --port N``, as docs/mcp.md starts it; its port."""
    port, log = free_port(), tmp_path / "mcp.log"
    command = [str(ROOT / ".venv" / "bin" / "kaibo"), "mcp", "--transport", "streamable-http"]
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*command, "--port", str(port)],
            env=user_environment(stack),
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + SAMPLE_SECONDS
        while process.poll() is None and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)  # polling the port, bounded by the deadline
        else:
            raise AssertionError(f"kaibo mcp did not listen on {port}:\n{log.read_text()}")
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.usefixtures("remembered")
def test_given_the_url_mcp_configuration_then_an_agent_recalls_july_17_as_data(kaibo_mcp_http: int) -> None:
    url: str = configured_server("mcp-http.json")["url"]
    assert url == "http://127.0.0.1:8765/mcp"  # kaibo mcp's defaults
    assert_recalled_as_data(asyncio.run(recall_over_mcp(url.replace(":8765", f":{kaibo_mcp_http}"))))
