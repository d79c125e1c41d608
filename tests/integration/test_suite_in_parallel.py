"""The suite's own options (pyproject.toml) on a real pytest-xdist run of two workers, over small
test files written for it: each file runs whole on one worker and each worker keeps the collected
order, so a module's fixtures start once and no file runs after one it followed serially; a test over
its time limit fails the run once, with its thread dump on the terminal, instead of being re-run on
a fresh worker until the restarts run out."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Later files hold more tests: xdist's default reordering (largest first) would show.
TESTS_IN_FILE = (2, 3, 4, 5)
#: Two workers starting, a few trivial tests, a hang of HANG_TIMEOUT_SECONDS: seconds, on a busy machine too.
RUN_TIMEOUT_SECONDS = 180
HANG_TIMEOUT_SECONDS = 2


def run_suite_options(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``pytest -n 2`` over ``directory`` with this repository's configuration and the plugin
    tests/conftest.py registers, as `make test` runs the suite."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(REPO / "pyproject.toml"),
            "--rootdir",
            str(directory),
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.fixtures.worker_timeout",
            "-n",
            "2",
            *args,
            str(directory),
        ],
        cwd=directory,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )


def test_given_two_workers_then_each_file_runs_whole_on_one_worker_in_the_collected_order(
    tmp_path: Path,
) -> None:
    suite, ran = tmp_path / "suite", tmp_path / "ran"
    suite.mkdir()
    ran.mkdir()
    recorder = f"""
        import os
        from pathlib import Path

        def record(name):
            with (Path({str(ran)!r}) / os.environ["PYTEST_XDIST_WORKER"]).open("a") as log:
                log.write(f"{{__name__}}::{{name}}\\n")
        """
    for file, count in enumerate(TESTS_IN_FILE):
        tests = "".join(f"\ndef test_{n}():\n    record('test_{n}')\n" for n in range(count))
        (suite / f"test_file_{file}.py").write_text(textwrap.dedent(recorder) + tests)

    result = run_suite_options(suite)

    assert result.returncode == 0, result.stdout + result.stderr
    collected = [
        f"test_file_{file}::test_{n}" for file, count in enumerate(TESTS_IN_FILE) for n in range(count)
    ]
    by_worker = {log.name: log.read_text().split() for log in ran.iterdir()}
    assert len(by_worker) == 2, by_worker
    assert sorted(test for ran_there in by_worker.values() for test in ran_there) == sorted(collected)
    for worker, ran_there in by_worker.items():
        assert ran_there == [test for test in collected if test in ran_there], f"{worker}: out of order"
        files = {test.split("::")[0] for test in ran_there}
        assert ran_there == [test for test in collected if test.split("::")[0] in files], (
            f"{worker}: part of a file"
        )


def test_given_a_test_over_its_time_limit_then_the_run_fails_once_naming_it_with_its_thread_dump(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_hangs.py").write_text(
        textwrap.dedent(f"""
            import threading
            import pytest

            @pytest.mark.timeout({HANG_TIMEOUT_SECONDS})
            def test_waits_for_what_never_comes():
                threading.Event().wait()

            def test_after_the_hang():
                pass
            """)
    )
    (tmp_path / "test_fine.py").write_text("def test_fine():\n    pass\n")

    result = run_suite_options(tmp_path)

    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    crashed = r"worker 'gw\d' crashed while running 'test_hangs.py::test_waits_for_what_never_comes'"
    assert re.search(crashed, output), output
    assert output.count("node down:") == 1, output  # no worker started again to hang the same way
    assert "1 failed, 1 passed" in result.stdout, output
    assert "Timeout" in result.stderr, output  # pytest-timeout's banner, from the worker
    assert "in test_waits_for_what_never_comes" in result.stderr, output  # the hung test's stack
