"""The structuring scenario sets through the Bedrock structurer: the same harness, the same
figures as ``bench/structuring_eval.py --scenarios-only``, with a model's links. Needs AWS
credentials with Bedrock model access; prints tables; not a test.

Run from the repository root (``make bench-structuring-bedrock``; docs/structuring-bedrock.md)::

    AWS_PROFILE=… AWS_REGION=us-east-1 KAIBO_BEDROCK_MODEL_ID=<model or inference profile id> \\
        PYTHONPATH=.:local .venv/bin/python bench/structuring_bedrock.py \\
        [--sets heldout,heldout2,heldout3,heldout4,heldout5,heldout6] [--limit N] \\
        [--price-input USD --price-output USD]

Every scenario runs once, in a project holding the LoCoMo background (when ``../shared/eval/`` is
there), through ``EmbeddedKaibo(BedrockStructurer(client, model, fallback=RuleStructurer()))``: one
Converse call per event (at most two attempts). An event the model failed on is structured by the
rules (the fallback), and counted: figures with fallbacks are partly the rules'. Spend is read
from the model's own usage counts; with ``--price-input``/``--price-output`` (USD per million
tokens, from your Bedrock price list) it is priced.
"""

# ruff: noqa: E402 - the project imports follow the sys.path set-up below, on purpose.
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "local")) if p not in sys.path]

import boto3

from bench.recall_quality import DEFAULT_DATA
from bench.structuring_eval import (
    HELDOUT2_PATH,
    HELDOUT3_PATH,
    HELDOUT4_PATH,
    HELDOUT5_PATH,
    HELDOUT6_PATH,
    HELDOUT_PATH,
    SCENARIOS_PATH,
    CpuSamples,
    Output,
    section_scenarios,
)
from kaibo_core.adapters.bedrock_structurer import BedrockStructurer, StructurerStats, bedrock_runtime_client
from kaibo_core.core.structuring.rules import RuleStructurer

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient

SETS: Final[dict[str, Path]] = {
    "own": SCENARIOS_PATH,
    "heldout": HELDOUT_PATH,
    "heldout2": HELDOUT2_PATH,
    "heldout3": HELDOUT3_PATH,
    "heldout4": HELDOUT4_PATH,
    "heldout5": HELDOUT5_PATH,
    "heldout6": HELDOUT6_PATH,
    "tuning": ROOT / "tests" / "data" / "structuring_tuning.json",
    "tuning_blind": ROOT / "tests" / "data" / "structuring_tuning_blind.json",
    "tuning_blind2": ROOT / "tests" / "data" / "structuring_tuning_blind2.json",
    "tuning_oneline": ROOT / "tests" / "data" / "structuring_tuning_oneline.json",
    "tuning_oneline2": ROOT / "tests" / "data" / "structuring_tuning_oneline2.json",
    "tuning_distractors": ROOT / "tests" / "data" / "structuring_tuning_distractors.json",
    "tuning_distractors2": ROOT / "tests" / "data" / "structuring_tuning_distractors2.json",
    "tuning_distractors3": ROOT / "tests" / "data" / "structuring_tuning_distractors3.json",
}
HELD_OUT: Final = frozenset({"heldout", "heldout2", "heldout3", "heldout4", "heldout5", "heldout6"})
#: Exit status when the run cannot start (no model id, no credentials): nothing was sent.
CANNOT_START: Final = 2


@dataclass
class Spend:
    """Every BedrockStructurer the run made, for their summed usage."""

    structurers: list[BedrockStructurer] = field(default_factory=list)

    def factory(self, client: BedrockRuntimeClient, model_id: str) -> Callable[[], BedrockStructurer]:
        def make() -> BedrockStructurer:
            structurer = BedrockStructurer(client, model_id, RuleStructurer())
            self.structurers.append(structurer)
            return structurer

        return make

    def total(self) -> StructurerStats:
        summed = StructurerStats()
        for structurer in self.structurers:
            for name in (f.name for f in fields(summed)):
                setattr(summed, name, getattr(summed, name) + getattr(structurer.stats, name))
        return summed


def cannot_start(model_id: str | None) -> str | None:
    """Why the run cannot start, or None."""
    if not model_id:
        return "set KAIBO_BEDROCK_MODEL_ID (or --model-id) to a Bedrock model or inference profile id"

    if boto3.Session().get_credentials() is None:
        return "no AWS credentials found (AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or a role)"
    if not (
        os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or boto3.Session().region_name
    ):
        return "set AWS_REGION to a region where the model is enabled"
    return None


def spend_table(
    out: Output, spend: StructurerStats, price_input: float | None, price_output: float | None
) -> None:
    rows: list[list[object]] = [
        ["events structured", spend.events],
        ["Converse calls (with retries)", spend.calls],
        ["input tokens", spend.input_tokens],
        ["output tokens", spend.output_tokens],
        ["input tokens per event", round(spend.input_tokens / spend.events) if spend.events else 0],
        ["retries", spend.retries],
        ["invalid outputs", spend.invalid_outputs],
        ["events the rules structured (fallback)", spend.fallbacks],
    ]
    if price_input is not None and price_output is not None:
        cost = (spend.input_tokens * price_input + spend.output_tokens * price_output) / 1_000_000
        rows.append(["cost (USD, at the prices given)", f"{cost:.2f}"])
    out("## Bedrock spend", "")
    out.table(["", "value"], rows)
    if spend.fallbacks:
        out(
            f"**{spend.fallbacks} events were structured by the rules** (the model failed or answered "
            "invalid output twice): the figures above are partly the rules'.",
            "",
        )


def run(
    out: Output,
    sets: Sequence[str],
    client: BedrockRuntimeClient,
    model_id: str,
    *,
    data_path: Path,
    limit: int | None = None,
) -> tuple[dict[str, Any], StructurerStats]:
    """Every set through the Bedrock structurer; {set: section 1's results} and the summed usage."""
    spend = Spend()
    results = {
        name: section_scenarios(
            out,
            CpuSamples(),
            data_path,
            SETS[name],
            held_out=name in HELD_OUT,
            make_structurer=spend.factory(client, model_id),
            structurer_label=f"BedrockStructurer({model_id})",
            limit=limit,
        )
        for name in sets
    }
    return results, spend.total()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model-id", default=os.environ.get("KAIBO_BEDROCK_MODEL_ID"), help="model id")
    parser.add_argument(
        "--sets",
        default="heldout,heldout2,heldout3,heldout4,heldout5,heldout6",
        help=f"comma-separated, of {', '.join(SETS)} (default: %(default)s)",
    )
    parser.add_argument("--limit", type=int, default=None, help="the first N scenarios of each set (a trial)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo-dev.json, for the background")
    parser.add_argument("--price-input", type=float, default=None, help="USD per million input tokens")
    parser.add_argument("--price-output", type=float, default=None, help="USD per million output tokens")
    args = parser.parse_args(argv)
    sets = [name.strip() for name in args.sets.split(",") if name.strip()]
    unknown = [name for name in sets if name not in SETS]
    if unknown:
        parser.error(f"unknown set(s) {', '.join(unknown)}; choose from {', '.join(SETS)}")
    reason = cannot_start(args.model_id)
    if reason is not None:
        print(f"bench/structuring_bedrock.py: cannot start: {reason}. Nothing was sent.", file=sys.stderr)
        return CANNOT_START
    out = Output()
    out(f"# Kaibo structuring evaluation through Bedrock ({args.model_id})", "")
    _, spend = run(out, sets, bedrock_runtime_client(), args.model_id, data_path=args.data, limit=args.limit)
    spend_table(out, spend, args.price_input, args.price_output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
