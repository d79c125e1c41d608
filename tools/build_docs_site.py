"""Build what the API serves without a key: ``/openapi.json``, ``/docs/llms.txt``,
``/docs/llms-full.txt`` and ``/docs/docs.zip`` (``make docs``; issue #17).

Everything comes from the code and ``docs/``: the OpenAPI document merges the routes every
function's resolver declares (their pydantic models, their error responses), the text files and
the zip are the Markdown of ``docs/`` and the README. The output goes to ``functions/docs/site/``,
which DocsFunction serves and which is committed; ``tests/contract/test_docs_site.py`` builds it
again and fails on any difference, so the served docs never drift from the code.

The zip is deterministic (sorted names, a fixed timestamp), so that the same docs give the same
bytes.
"""

from __future__ import annotations

import importlib
import io
import json
import sys
import zipfile
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
SITE: Final = ROOT / "functions" / "docs" / "site"
DOCS: Final = ROOT / "docs"
#: Handler modules whose routes make the API (template.yaml's API functions; docs serves itself).
API_FUNCTIONS: Final = ("remember", "events", "recall", "memories", "forget", "admin", "docs", "webhooks")
TITLE: Final = "Kaibo"
SUMMARY: Final = (
    "A memory service for AI agents: remember raw events into hash-chained streams, recall the "
    "smallest cited set of memories that answers a question within a token budget (or an explicit "
    "abstain), explain a memory's history, forget with a verifiable receipt."
)
API_VERSION: Final = "1"
ZIP_TIME: Final = (2026, 1, 1, 0, 0, 0)
PUBLIC_PATHS: Final = ("/openapi.json", "/docs/llms.txt", "/docs/llms-full.txt", "/docs/docs.zip")


def openapi() -> dict[str, Any]:
    """One OpenAPI 3.1 document: every function's paths and schemas, merged."""
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": f"{TITLE} API", "version": API_VERSION, "description": SUMMARY},
        "paths": {},
        "components": {"schemas": {}},
    }
    for name in API_FUNCTIONS:
        app = importlib.import_module(f"functions.{name}.app").app
        part = app.get_openapi_schema(title=TITLE, version=API_VERSION).model_dump(
            by_alias=True, exclude_none=True, mode="json"
        )
        for path, operations in part.get("paths", {}).items():
            document["paths"].setdefault(path, {}).update(operations)
        document["components"]["schemas"].update(part.get("components", {}).get("schemas", {}))
    document["paths"] = dict(sorted(document["paths"].items()))
    document["components"]["schemas"] = dict(sorted(document["components"]["schemas"].items()))
    document["components"]["securitySchemes"] = {
        "apiKey": {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer <api key>"}
    }
    document["security"] = [{"apiKey": []}]
    for path in PUBLIC_PATHS:  # served without a key
        for operation in document["paths"].get(path, {}).values():
            operation["security"] = []
    return document


def markdown_files() -> list[Path]:
    """The README, then every Markdown file of docs/, by name."""
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def title_of(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def llms_txt(files: list[Path]) -> str:
    """The llms.txt convention: a title, a summary, then links with a line each."""
    lines = [f"# {TITLE}", "", f"> {SUMMARY}", ""]
    lines += [
        "Every document below is also in one file, `/docs/llms-full.txt`, and as Markdown files in "
        "`/docs/docs.zip`; the HTTP API is described by `/openapi.json`. None of these needs a key.",
        "",
        "## Docs",
        "",
    ]
    lines += [f"- [{title_of(path)}]({path.relative_to(ROOT).as_posix()})" for path in files]
    lines += ["", "## API", "", "- [OpenAPI document](/openapi.json)", ""]
    return "\n".join(lines)


def llms_full_txt(files: list[Path]) -> str:
    parts = [f"# {TITLE}: every document\n\n> {SUMMARY}\n"]
    for path in files:
        parts.append(f"\n\n<!-- file: {path.relative_to(ROOT).as_posix()} -->\n\n")
        parts.append(path.read_text(encoding="utf-8").strip() + "\n")
    return "".join(parts)


def docs_zip(files: list[Path]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            info = zipfile.ZipInfo(f"kaibo-docs/{path.relative_to(ROOT).as_posix()}", date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def build() -> dict[str, bytes]:
    """The site's files, by name."""
    files = markdown_files()
    return {
        "openapi.json": (json.dumps(openapi(), indent=1, sort_keys=False) + "\n").encode(),
        "llms.txt": llms_txt(files).encode(),
        "llms-full.txt": llms_full_txt(files).encode(),
        "docs.zip": docs_zip(files),
    }


def main() -> int:
    SITE.mkdir(parents=True, exist_ok=True)
    for name, data in build().items():
        (SITE / name).write_bytes(data)
        sys.stdout.write(f"{(SITE / name).relative_to(ROOT)}: {len(data):,} bytes\n")
    return 0


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "kaibo_core")]
    raise SystemExit(main())
