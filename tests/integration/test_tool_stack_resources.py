"""The operator tools find their resources in the deployed stack's outputs or on the command line
(tools/stack_resources.py, shared by repair_index, reindex_semantic and enroll_projects)."""

from __future__ import annotations

import argparse
import json
import secrets

import boto3
import pytest

from tests.conftest import FAKE_AWS_ENV, AwsStack
from tools.enroll_projects import PROJECTS_AND_PLAN
from tools.stack_resources import MEMORY_TABLES, ResourcePair


@pytest.fixture
def cloudformation(aws_stack: AwsStack, monkeypatch: pytest.MonkeyPatch) -> str:
    """The session's emulator as the tools' AWS, and a stack name no other test uses. Not moto's
    mock_aws: leaving it resets the process's moto backends, the session emulator's tables with them."""
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws_stack.endpoint_url)
    return f"kaibo-{secrets.token_hex(4)}"


def deploy(stack_name: str, outputs: dict[str, str]) -> None:
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    boto3.client("cloudformation").create_stack(StackName=stack_name, TemplateBody=json.dumps(template))


def resolve(pair: ResourcePair, argv: list[str]) -> tuple[str, str]:
    parser = argparse.ArgumentParser()
    pair.add_arguments(parser)
    return pair.names(parser, parser.parse_args(argv))


def test_given_a_stack_name_then_its_outputs_name_the_tables(cloudformation: str) -> None:
    deploy(
        cloudformation, {"MemoriesTableName": "kaibo-Memories-1", "TermIndexTableName": "kaibo-TermIndex-1"}
    )
    assert resolve(MEMORY_TABLES, ["--stack-name", cloudformation]) == (
        "kaibo-Memories-1",
        "kaibo-TermIndex-1",
    )


def test_given_the_tables_by_name_then_no_stack_is_read() -> None:
    argv = ["--memories-table", "m", "--index-table", "i", "--endpoint-url", "http://localhost:1"]
    assert resolve(MEMORY_TABLES, argv) == ("m", "i")


def test_given_the_first_table_alone_then_a_usage_error_names_the_missing_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        resolve(MEMORY_TABLES, ["--memories-table", "m"])
    assert exited.value.code == 2
    assert "--memories-table needs --index-table" in capsys.readouterr().err


def test_given_a_stack_without_the_usage_plan_then_the_tool_says_how_to_deploy_it(
    cloudformation: str,
) -> None:
    deploy(cloudformation, {"ProjectsTableName": "kaibo-Projects-1"})
    with pytest.raises(SystemExit) as exited:
        resolve(PROJECTS_AND_PLAN, ["--stack-name", cloudformation])
    assert exited.value.code == (
        f"stack {cloudformation} has no ProjectUsagePlanId output: deploy with ProjectThrottles=on"
    )
