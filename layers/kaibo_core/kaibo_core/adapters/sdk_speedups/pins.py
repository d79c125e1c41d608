"""What the SDK speed-ups rely on in botocore, pinned by the source hash of each function involved.

The speed-ups replace or hook into these functions (or copy what they do); a botocore release
that changes any of them may change what the speed-ups must do. The layer pins botocore exactly
(``layers/kaibo_core/requirements.txt``), and ``tests/contract/test_sdk_speedups.py`` fails when
the installed botocore is not the pinned one or any function below has changed. To upgrade:
read each changed function, update the speed-up that relies on it (and its tests comparing it
with botocore's own behaviour), then the hashes here (``current_hashes()`` prints them).

Nothing here runs at cold start: inspecting sources costs time, so only the test checks.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from typing import Final

#: The botocore release these hashes were taken from (the layer's exact pin).
BOTOCORE_VERSION: Final = "1.43.11"

#: Dotted name -> sha256 of its source, and which speed-up relies on it.
RELIED_ON: Final[dict[str, tuple[str, str]]] = {
    # service_loader: copies load_service_model without the listing; replaces load_file.
    "botocore.loaders.Loader.load_service_model": (
        "da82cb2bd0e465bd59e865694fb1b03d06084da0f2b15f0d4e438e7ebb040ff3",
        "service_loader",
    ),
    "botocore.loaders.Loader.determine_latest_version": (
        "8160c536b85aecd498200f811c5dba3a013632ed1ab5440910bb878491d7dca8",
        "service_loader",
    ),
    "botocore.loaders.Loader.load_data": (
        "556f11ed15f3eff6e4ef76cc4d4379617edf10ef4ef6efa7b0805f4bf1cc13ca",
        "service_loader",
    ),
    "botocore.loaders.JSONFileLoader.load_file": (
        "4b6735d5cf3c559fb4ddbdea17a93652a6ca1e0da0178132a268821b358b3229",
        "service_loader",
    ),
    "botocore.loaders.create_loader": (
        "89050e30206e5ea77e11b5ea9ceb2337300f9977c4c4cd0768493be451856429",
        "service_loader",
    ),
    "botocore.loaders.ExtrasProcessor.process": (
        "246ca93482b0c57da5952cc96c7c5842e705b5bc848a6eea06432de0179ed042",
        "service_loader",
    ),
    # plain_items: the before-parse event and the merge of its customized response.
    "botocore.endpoint.Endpoint._do_get_response": (
        "e1821119dedea32b2c9c66e821ca171d8200c25336a787430b6740b8e4d925e4",
        "plain_items",
    ),
    # user_agents: the private creator the client asks for each request's header.
    "botocore.client.BaseClient._convert_to_request_dict": (
        "9c9089a6ab3b59d6b5e483987dd814a095bcc085ab1ea9350ef4eca1c895db9e",
        "user_agents",
    ),
    "botocore.useragent.UserAgentString.to_string": (
        "50d24364f32a2d1df1988b5fc2e9ff39cc4a6678258d1e95cd7f95c549de3414",
        "user_agents",
    ),
    # direct_reads: botocore's signature and CA bundle, on requests the direct path builds itself.
    "botocore.auth.SigV4Auth.add_auth": (
        "0a37f12b13c3d758df9c2da72b712444ef4b93e3c0543cd7c499a80726b69a66",
        "direct_reads",
    ),
    "botocore.httpsession.get_cert_path": (
        "142075cf59813df45e3b93fb4780dc80d8612d6a120cdd447357db7cadb6e25b",
        "direct_reads",
    ),
}


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            found = getattr(found, attribute)
        return found
    raise ImportError(dotted)


def _undecorated(function: object, name: str) -> object:
    """The function itself under a decorator: via ``__wrapped__``, or the closure's function of that
    name (botocore's ``instance_cache`` keeps no ``__wrapped__``)."""
    function = inspect.unwrap(function)  # type: ignore[arg-type]
    for cell in getattr(function, "__closure__", None) or ():
        inner = cell.cell_contents
        if getattr(inner, "__name__", None) == name and inspect.isfunction(inner):
            return inner
    return function


def source_sha256(dotted: str) -> str:
    source = inspect.getsource(_undecorated(_resolve(dotted), dotted.rsplit(".", 1)[-1]))  # type: ignore[arg-type]
    return hashlib.sha256(source.encode()).hexdigest()


def current_hashes() -> dict[str, str]:
    return {name: source_sha256(name) for name in RELIED_ON}


def drifted() -> list[str]:
    """The functions whose source differs from the pinned hash (with the speed-up that relies on it)."""
    return [
        f"{name} (relied on by sdk_speedups.{user})"
        for name, (pinned, user) in RELIED_ON.items()
        if source_sha256(name) != pinned
    ]
