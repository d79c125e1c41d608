"""Train the semantic cells (the inverted file's centroids) once, offline; the result is committed.

    .venv/bin/python tools/train_semantic_cells.py [--cells 256] [--seed 7]

Spherical k-means (k-means++ start, Lloyd's iterations on unit vectors) over the model's vectors of
messages like those users store that are not evaluation data: ``tools/data/cells_training.txt``
(4,580 everyday chat messages generated from templates by a helper that saw no evaluation data;
``tools/data/README.md``) and the structuring tuning set's messages and questions. Never the LoCoMo
conversations, nor the held-out sets: the cells must not be fitted to what the benchmarks measure.
Deterministic for a seed; writes
``layers/kaibo_core/kaibo_core/data/semantic_cells_<model>_c<cells>.npy`` (float16).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "kaibo_core"))

from kaibo_core.adapters.minilm_embedder import MiniLmEmbedder  # noqa: E402
from kaibo_core.adapters.static_embedder import StaticEmbedder  # noqa: E402
from kaibo_core.core.semantic.cells import cells_file_name  # noqa: E402

EMBEDDERS: dict[str, Callable[[], StaticEmbedder | MiniLmEmbedder]] = {
    "wl256": StaticEmbedder.from_package,
    "mini6": MiniLmEmbedder.from_package,
}


def training_sentences() -> list[str]:
    corpus = (ROOT / "tools/data/cells_training.txt").read_text(encoding="utf-8")
    found: list[str] = [line.strip() for line in corpus.splitlines() if line.strip()]
    scenarios = json.loads((ROOT / "tests/data/structuring_tuning.json").read_text(encoding="utf-8"))[
        "scenarios"
    ]
    for scenario in scenarios:
        found.extend(event["text"] for event in scenario["events"])
        found.extend(q["question"] for q in scenario["expect"].get("questions", []))
    return sorted(set(found))


def spherical_kmeans(
    vectors: NDArray[np.float32], cells: int, seed: int, iterations: int = 40
) -> NDArray[np.float32]:
    rng = np.random.default_rng(seed)
    first = int(rng.integers(len(vectors)))
    centroids = [vectors[first]]
    distance = 1.0 - vectors @ vectors[first]
    for _ in range(1, cells):  # k-means++: far points are likelier seeds
        weights = np.clip(distance, 0.0, None) ** 2
        pick = int(rng.choice(len(vectors), p=weights / weights.sum()))
        centroids.append(vectors[pick])
        distance = np.minimum(distance, 1.0 - vectors @ vectors[pick])
    means = np.stack(centroids)
    for _ in range(iterations):
        assignment = np.argmax(vectors @ means.T, axis=1)
        for cell in range(cells):
            members = vectors[assignment == cell]
            if len(members):
                total = members.sum(axis=0)
                means[cell] = total / np.linalg.norm(total)
    return means.astype(np.float32)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=256, help="number of cells (centroids)")
    parser.add_argument(
        "--model", choices=sorted(EMBEDDERS), default="wl256", help="the model whose cells to train"
    )
    parser.add_argument("--out", type=Path, help="write here instead of kaibo_core/data (tests compare)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (k-means++ start)")
    args = parser.parse_args(argv)
    embedder = EMBEDDERS[args.model]()
    sentences = training_sentences()
    vectors = embedder.embed(sentences)
    vectors = vectors[np.any(vectors, axis=1)]
    centroids = spherical_kmeans(vectors, args.cells, args.seed)
    target = args.out or ROOT / "layers/kaibo_core/kaibo_core/data" / cells_file_name(
        embedder.version, args.cells
    )
    np.save(target, centroids.astype(np.float16))
    sizes = np.bincount(np.argmax(vectors @ centroids.T, axis=1), minlength=args.cells)
    print(
        f"{len(sentences)} sentences, {args.cells} cells (members min/median/max "
        f"{sizes.min()}/{int(np.median(sizes))}/{sizes.max()}) -> {target}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
