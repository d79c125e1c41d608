"""Where an operator tool finds the two resources it works on (``repair_index``,
``reindex_semantic``, ``enroll_projects``): the deployed stack's outputs name them
(``--stack-name``), or the command line does, one option each; ``--endpoint-url`` points the
tool's clients at an emulator instead of AWS.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import boto3


@dataclass(frozen=True)
class StackResource:
    """One resource: the stack output that names it, and the option that names it instead."""

    output: str  # e.g. "MemoriesTableName"
    option: str  # e.g. "--memories-table"
    help: str  # e.g. "the memories table"
    #: What to do when the stack has no such output (it exists only with some parameters).
    missing_hint: str = ""

    @property
    def dest(self) -> str:
        return self.option.removeprefix("--").replace("-", "_")


@dataclass(frozen=True)
class ResourcePair:
    """The two resources a tool needs, both from the stack or both from the command line."""

    first: StackResource
    second: StackResource
    what_the_stack_names: str  # e.g. "the tables"
    endpoint_help: str = "a DynamoDB endpoint (an emulator); default: AWS"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument(
            "--stack-name", help=f"the deployed stack (its outputs name {self.what_the_stack_names})"
        )
        where.add_argument(self.first.option, help=f"{self.first.help} (with {self.second.option})")
        parser.add_argument(self.second.option, help=f"{self.second.help} (with {self.first.option})")
        parser.add_argument("--endpoint-url", help=self.endpoint_help)

    def names(self, parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[str, str]:
        """The two resources' names, from the stack's outputs or the options (a usage error when
        only the first option is given)."""
        if args.stack_name:
            outputs = stack_outputs(args.stack_name)
            return self._output(args.stack_name, outputs, self.first), self._output(
                args.stack_name, outputs, self.second
            )
        first, second = getattr(args, self.first.dest), getattr(args, self.second.dest)
        if not second:
            parser.error(f"{self.first.option} needs {self.second.option}")
        return first, second

    @staticmethod
    def _output(stack_name: str, outputs: dict[str, str], resource: StackResource) -> str:
        if resource.output not in outputs:
            hint = f": {resource.missing_hint}" if resource.missing_hint else ""
            raise SystemExit(f"stack {stack_name} has no {resource.output} output{hint}")
        return outputs[resource.output]


def stack_outputs(stack_name: str) -> dict[str, str]:
    """The deployed stack's outputs by key (CloudFormation in the configured region)."""
    stack = boto3.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    return {output["OutputKey"]: output["OutputValue"] for output in stack.get("Outputs", [])}


#: The memories table and the term index (repair_index, reindex_semantic).
MEMORY_TABLES = ResourcePair(
    StackResource("MemoriesTableName", "--memories-table", "the memories table"),
    StackResource("TermIndexTableName", "--index-table", "the term index table"),
    what_the_stack_names="the tables",
)
