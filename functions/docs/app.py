"""The docs the API serves without a key (issue #17): ``GET /openapi.json``, ``/docs/llms.txt``,
``/docs/llms-full.txt``, ``/docs/docs.zip``. The files are built from the code and ``docs/`` by
``make docs`` (tools/build_docs_site.py) into ``site/`` beside this module, and read once per
container."""

# No `from __future__ import annotations`: Powertools reads the route signatures'
# annotations at run time to validate requests and build the OpenAPI document.

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core.runtime import cold_start  # isort: skip

cold_start.pause_collector()

import base64
from functools import cache
from pathlib import Path
from typing import Any, Final

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.types import (
    OpenAPIResponseContentModel,
    OpenAPIResponseContentSchema,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.runtime.http import create_resolver, resolve, responses
from kaibo_core.runtime.observability import logger

SITE: Final = Path(__file__).resolve().parent / "site"
#: Browsers and agents may cache the docs for an hour; a deploy changes them.
CACHE_CONTROL: Final = "public, max-age=3600"
#: The text files' answer, as /openapi.json documents it.
TEXT: Final[dict[str, OpenAPIResponseContentSchema | OpenAPIResponseContentModel]] = {
    "text/plain": {"schema": {"type": "string"}}
}

app = create_resolver()


@cache
def _file(name: str) -> bytes:
    return (SITE / name).read_bytes()


def _serve(name: str, content_type: str) -> Response[str]:
    return Response(
        status_code=200,
        content_type=content_type,
        body=_file(name).decode("utf-8"),
        headers={"Cache-Control": CACHE_CONTROL},
    )


@app.get(
    "/openapi.json",
    summary="The OpenAPI document of this API (no key)",
    responses=responses(200, "OpenAPI 3.1", content={"application/json": {"schema": {"type": "object"}}}),
)
def openapi() -> Response[str]:
    return _serve("openapi.json", "application/json")


@app.get(
    "/docs/llms.txt",
    summary="llms.txt: what Kaibo is, and links (no key)",
    responses=responses(200, "Markdown", content=TEXT),
)
def llms() -> Response[str]:
    return _serve("llms.txt", "text/plain; charset=utf-8")


@app.get(
    "/docs/llms-full.txt",
    summary="Every doc in one text file (no key)",
    responses=responses(200, "Markdown", content=TEXT),
)
def llms_full() -> Response[str]:
    return _serve("llms-full.txt", "text/plain; charset=utf-8")


ZIP_PATH: Final = "/docs/docs.zip"


@app.get(
    ZIP_PATH,
    summary="The Markdown docs as a zip (no key)",
    responses=responses(
        200,
        "A zip of Markdown files",
        content={"application/zip": {"schema": {"contentMediaType": "application/zip"}}},
    ),
)
def docs_zip() -> None:
    """Declared for the OpenAPI document; answered by ``zip_response`` (binary, base64-encoded as
    API Gateway's binary media types need it, which the resolver's validation cannot carry)."""


def zip_response() -> dict[str, Any]:
    return {
        "statusCode": 200,
        "headers": {"Content-Type": "application/zip", "Cache-Control": CACHE_CONTROL},
        "body": base64.b64encode(_file("docs.zip")).decode("ascii"),
        "isBase64Encoded": True,
    }


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if event.get("httpMethod") == "GET" and event.get("resource") == ZIP_PATH:
        return zip_response()
    return resolve(app, event, context)
