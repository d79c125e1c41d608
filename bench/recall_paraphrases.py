"""Recall by meaning on the paraphrase sets, through Kaibo's own remember and recall.

Every memory of a set (the pairs' memories, their lexical lures, the background) is remembered as
one chat message into one project, against the emulator in this process (as
``bench/recall_quality.py``), then every question is recalled at a budget of 300 tokens, once with
words only and once with recall by meaning on (the same stored memories: a recall without the
model ignores the cells). Figures per kind of question:

- ``paraphrase`` (shares no content word with its memory) and ``lexical``: hit@1 (the memory is
  the first item), hit@5 (among the first five), abstain rate;
- ``unanswerable`` (no memory answers it): abstain rate (right) and wrong answers.

The held-out set (``tests/data/paraphrase_heldout.json``) is never tuned on: its figures are
reported beside the tuning set's (``tests/data/paraphrase_tuning.json``), which is what the
parameters were chosen on.

    PYTHONPATH=.:local .venv/bin/python bench/recall_paraphrases.py [--semantic mini6] [--set PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from bench.common import local_tables, machine, markdown_table, progress, semantic_params
from bench.recall_quality import Kaibo, Turn
from kaibo_core.api.mapping import recall_body, recall_query
from kaibo_core.api.models import RecallRequest
from kaibo_core.core.semantic.scoring import SemanticParams
from kaibo_core.runtime.wiring import SEMANTIC_MODELS, build_semantic_channel
from kaibo_core.services.recall import RecallParams, RecallService
from kaibo_core.services.semantic import SemanticChannel

ROOT = Path(__file__).resolve().parent.parent
SETS = {
    "tuning": ROOT / "tests" / "data" / "paraphrase_tuning.json",
    "held-out": ROOT / "tests" / "data" / "paraphrase_heldout.json",
}
BUDGET = 300
KINDS = ("paraphrase", "lexical", "unanswerable")
OCCURRED_AT = "2026-06-02T09:30:00Z"


@dataclass
class Tally:
    questions: int = 0
    hit1: int = 0
    hit5: int = 0
    abstained: int = 0
    items: int = 0
    reasons: dict[str, int] = field(default_factory=dict)

    def add(self, rank: int | None, abstain_reason: str | None, items: int) -> None:
        self.questions += 1
        self.items += items
        self.hit1 += rank == 0
        self.hit5 += rank is not None and rank < 5
        if abstain_reason is not None:
            self.abstained += 1
            self.reasons[abstain_reason] = self.reasons.get(abstain_reason, 0) + 1


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}" if whole else "—"


def load_set(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    pairs: list[dict[str, Any]] = data["pairs"]
    texts: list[str] = [pair["memory"] for pair in pairs if pair.get("memory")]
    for pair in pairs:
        texts.extend(pair.get("distractors", []))
    texts.extend(data.get("background", []))
    return pairs, list(dict.fromkeys(texts))


def remember_all(kaibo: Kaibo, texts: Sequence[str]) -> dict[str, str]:
    """Remember every text; returns event id -> text."""
    turns = [Turn("p", 1, i, f"M{i}", "user", text, None, None, OCCURRED_AT) for i, text in enumerate(texts)]
    kaibo.remember_session("paraphrases", turns)
    text_of_key = {turn.key: turn.text for turn in turns}
    return {event: text_of_key[key] for event, key in kaibo.turn_of_event.items()}


def ranked_texts(
    kaibo: Kaibo, service: RecallService, question: str, text_of_event: dict[str, str]
) -> tuple[list[str], str | None]:
    query = recall_query(RecallRequest.model_validate({"question": question, "budget": BUDGET}))
    answer, _ = service.recall(kaibo.project, query)
    body = recall_body(answer)
    texts = [text_of_event[item["citations"][0]["eventId"]] for item in body["items"]]
    abstain = body["abstain"]
    return texts, (abstain.get("reason") or "abstained") if abstain["abstained"] else None


def evaluate(
    path: Path, semantic: SemanticChannel | None, variants: Sequence[SemanticParams] = ()
) -> dict[str, dict[str, Tally]]:
    pairs, texts = load_set(path)
    progress(f"{path.name}: {len(pairs)} questions, {len(texts)} memories")
    systems: dict[str, dict[str, Tally]] = {}
    with local_tables() as local:
        kaibo = Kaibo(local.client, local.tables, cache_reads=False, semantic=semantic)
        started = time.perf_counter()
        text_of_event = remember_all(kaibo, texts)
        progress(f"  remembered {len(texts)} memories ({time.perf_counter() - started:.0f} s)")
        services = {"words only": kaibo.service(RecallParams(), meaning=False)}
        if semantic is not None:
            services[f"words + meaning ({semantic.version})"] = kaibo.service(RecallParams())
            for params in variants:
                changed = ", ".join(
                    f"{f.name}={getattr(params, f.name)}"
                    for f in fields(params)
                    if getattr(params, f.name) != getattr(semantic.params, f.name)
                )
                services[f"  {changed}"] = RecallService(
                    kaibo.index,
                    kaibo.memories,
                    semantic=replace_params(semantic, params),
                    events=kaibo.events,
                )
        for name, service in services.items():
            tallies = {kind: Tally() for kind in KINDS}
            for pair in pairs:
                kind = pair.get("kind", "paraphrase")
                found, reason = ranked_texts(kaibo, service, pair["question"], text_of_event)
                memory = pair.get("memory") or None
                rank = found.index(memory) if memory in found else None
                tallies[kind].add(rank, reason, len(found))
            systems[name] = tallies
    return systems


def report(name: str, systems: dict[str, dict[str, Tally]]) -> list[str]:
    rows = []
    for system, tallies in systems.items():
        para, lex, none = tallies["paraphrase"], tallies["lexical"], tallies["unanswerable"]
        rows.append(
            [
                system,
                pct(para.hit1, para.questions),
                pct(para.hit5, para.questions),
                pct(para.abstained, para.questions),
                pct(lex.hit1, lex.questions),
                pct(lex.hit5, lex.questions),
                pct(lex.abstained, lex.questions),
                pct(none.abstained, none.questions),
                f"{(para.items + lex.items) / max(1, para.questions + lex.questions):.2f}",
            ]
        )
    counts = {kind: next(iter(systems.values()))[kind].questions for kind in KINDS}
    header = [
        "system",
        f"paraphrase hit@1 (n={counts['paraphrase']})",
        "hit@5",
        "abstain",
        f"lexical hit@1 (n={counts['lexical']})",
        "hit@5",
        "abstain",
        f"unanswerable: abstain, right (n={counts['unanswerable']})",
        "items/q (answerable)",
    ]
    return [f"### {name}", "", *markdown_table(header, rows), ""]


def replace_params(semantic: SemanticChannel, params: SemanticParams) -> SemanticChannel:
    return SemanticChannel(semantic.embedder, semantic.cells, params)


def grid(base: SemanticParams, specs: Sequence[str]) -> list[SemanticParams]:
    axes: list[list[str]] = []
    for spec in specs:
        name, _, values = spec.partition("=")
        axes.append([f"{name}={value}" for value in values.split(",")])
    variants = []
    for combination in itertools.product(*axes):
        params = semantic_params(list(combination))
        if params is not None and params != base:
            variants.append(params)
    return variants


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--semantic", choices=["off", *SEMANTIC_MODELS], default="mini6")
    parser.add_argument("--semantic-param", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument(
        "--set", choices=[*SETS, "both"], default="both", help="which paraphrase set (default: both)"
    )
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="also recall with every combination of these SemanticParams values (tuning set only)",
    )
    args = parser.parse_args(argv)
    semantic = build_semantic_channel(args.semantic, semantic_params(args.semantic_param))
    names = list(SETS) if args.set == "both" else [args.set]
    if args.grid and names != ["tuning"]:
        raise SystemExit("--grid chooses parameters: on the tuning set only (--set tuning)")
    variants = grid(semantic.params, args.grid) if semantic is not None else []
    out = [
        "# Recall by meaning on the paraphrase sets, through Kaibo (budget 300)",
        "",
        f"Machine: {machine('moto', 'numpy', 'tokenizers')}.",
        "Recall by meaning: " + ("off." if semantic is None else f"{semantic.version}, {semantic.params!r}."),
        "",
    ]
    for name in names:
        out += report(f"{name} set ({SETS[name].name})", evaluate(SETS[name], semantic, variants))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
