"""The ``kaibo`` command line: keys, remember, recall, forget, streams, events, the deletion
ledger and verify (docs/cli.md).

Exit codes: 0 success (for ``verify``: everything checked verified); 1 ``verify`` found a
broken chain or a receipt that does not hold, or ``forget`` was not confirmed; 2 a usage or
configuration error, or the API refused or could not be reached.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
import urllib.parse
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from kaibo import __version__
from kaibo.client import KaiboAPIError, KaiboClient, KaiboConnectionError, KaiboError
from kaibo.ledger_verify import LedgerReport, ReceiptReport, parse_project_id, verify_ledger, verify_receipt
from kaibo.verify import StreamReport, iter_verify_all, parse_head, verify_stream
from kaibo_core.core.api_keys import issue_admin_key

EXIT_OK = 0
EXIT_CHAIN_FAILURE = 1
EXIT_NOT_CONFIRMED = 1
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2

ENV_ENDPOINT = "KAIBO_ENDPOINT"
ENV_API_KEY = "KAIBO_API_KEY"
ENV_ADMIN_KEY = "KAIBO_ADMIN_KEY"
ENV_PROJECT_ID = "KAIBO_PROJECT_ID"

DEFAULT_SCOPES = "read,write"
#: How much of a memory's content a forget's dry run shows per line.
PREVIEW_CHARS = 60


class UsageError(Exception):
    """A command line or configuration problem (exit 2)."""


def _global_options(default: Any) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection")
    group.add_argument("--endpoint", default=default, help=f"API base URL (default: ${ENV_ENDPOINT})")
    group.add_argument("--api-key", default=default, help=f"project API key (default: ${ENV_API_KEY})")
    group.add_argument(
        "--admin-key", default=default, help=f"admin key, for `keys` commands (default: ${ENV_ADMIN_KEY})"
    )
    return parent


def _add_memory_commands(commands: Any, subparser_globals: argparse.ArgumentParser) -> None:
    memory = commands.add_parser("memory", parents=[subparser_globals], help="one memory by id, as JSON")
    memory.add_argument("memory_id", metavar="MEMORY_ID", help="the memory's id (mem_...)")
    memory.set_defaults(handler=_memory)

    explain = commands.add_parser(
        "explain", parents=[subparser_globals], help="why a memory is believed: its versions, oldest first"
    )
    explain.add_argument("memory_id", metavar="MEMORY_ID", help="the memory's id (mem_...)")
    explain.set_defaults(handler=_explain)

    job = commands.add_parser("job", parents=[subparser_globals], help="a structuring job's status, as JSON")
    job.add_argument("job_id", metavar="JOB_ID", help="the job's id (job_...), as remember returned it")
    job.set_defaults(handler=_job)


def build_parser() -> argparse.ArgumentParser:
    # The connection options work before or after the command; values are never
    # shown as defaults in --help (they may be keys).
    subparser_globals = _global_options(argparse.SUPPRESS)
    parser = argparse.ArgumentParser(
        prog="kaibo",
        description="Kaibo client: manage keys, remember and forget, verify the hash chains and the ledger.",
        parents=[_global_options(None)],
    )
    parser.add_argument("--version", action="version", version=f"kaibo {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_key_commands(commands, subparser_globals)
    _add_event_commands(commands, subparser_globals)
    _add_recall_command(commands, subparser_globals)
    _add_memory_commands(commands, subparser_globals)
    _add_forget_commands(commands, subparser_globals)
    _add_verify_command(commands, subparser_globals)
    mcp = commands.add_parser(
        "mcp",
        parents=[subparser_globals],
        help="serve Kaibo's tools to an agent over MCP on stdio (needs: pip install 'kaibo[mcp]')",
    )
    mcp.set_defaults(handler=_mcp)
    return parser


def _add_key_commands(commands: Any, subparser_globals: argparse.ArgumentParser) -> None:
    keys = commands.add_parser("keys", help="create or revoke API keys (admin key)")
    key_commands = keys.add_subparsers(dest="keys_command", required=True, metavar="SUBCOMMAND")
    create = key_commands.add_parser(
        "create", parents=[subparser_globals], help="a new project and its first key, or another key"
    )
    target = create.add_mutually_exclusive_group(required=True)
    target.add_argument("--name", help="create a new project with this name, and its first key")
    target.add_argument("--project", help="create another key for this project id (prj_...)")
    create.add_argument(
        "--time-zone", help="with --name: the project's default time zone (IANA, e.g. Europe/Berlin)"
    )
    create.add_argument(
        "--scopes",
        help=f"comma-separated scopes for --project: read,write,forget,admin (default: {DEFAULT_SCOPES})",
    )
    create.set_defaults(handler=_keys_create)
    revoke = key_commands.add_parser("revoke", parents=[subparser_globals], help="revoke an API key")
    revoke.add_argument("key_id", metavar="KEY_ID", help="the key's id (the keyId keys create printed)")
    revoke.set_defaults(handler=_keys_revoke)

    admin_key = commands.add_parser(
        "admin-key", parents=[subparser_globals], help="offline: a new admin key and its AdminKeyHash"
    )
    admin_key.set_defaults(handler=_admin_key)


def _add_event_commands(commands: Any, subparser_globals: argparse.ArgumentParser) -> None:
    remember = commands.add_parser(
        "remember", parents=[subparser_globals], help="append one event to a stream"
    )
    remember.add_argument("--stream", required=True, help="the stream to append to (created on first use)")
    body = remember.add_mutually_exclusive_group(required=True)
    body.add_argument("--text", help='a message event: payload {"role": ROLE, "text": TEXT}')
    body.add_argument("--event-json", help="the whole event as a JSON object (kind, payload, ...)")
    remember.add_argument("--role", help="role of a --text message (default: user)")
    remember.add_argument("--key", help="idempotency key (default: a random UUID)")
    remember.add_argument("--occurred-at", help="RFC 3339 timestamp with offset (default: now)")
    remember.add_argument("--wait", action="store_true", help="wait until the memories are structured")
    remember.set_defaults(handler=_remember)

    streams = commands.add_parser(
        "streams", parents=[subparser_globals], help="list streams: stream seq hash"
    )
    streams.set_defaults(handler=_streams)

    events = commands.add_parser(
        "events", parents=[subparser_globals], help="a stream's events as JSON lines"
    )
    events.add_argument("--stream", required=True, help="the stream to list")
    events.add_argument("--from-seq", type=_positive_int, default=1, help="first seq to list (default 1)")
    events.set_defaults(handler=_events)


def _add_recall_command(commands: Any, subparser_globals: argparse.ArgumentParser) -> None:
    recall = commands.add_parser(
        "recall", parents=[subparser_globals], help="ask a question: cited memories as JSON, or abstain"
    )
    recall.add_argument("question", help="the question, in plain words")
    recall.add_argument("--budget", type=_positive_int, default=300, help="token budget (default 300)")
    recall.add_argument("--as-of", help="RFC 3339 instant: answer from what was valid then (default: now)")
    recall.add_argument("--stream", action="append", dest="streams", help="only this stream (repeatable)")
    recall.add_argument("--type", action="append", dest="types", help="only this memory type (repeatable)")
    recall.add_argument("--include-superseded", action="store_true", help="also ended memories (audits)")
    recall.set_defaults(handler=_recall)


def _add_verify_command(commands: Any, subparser_globals: argparse.ArgumentParser) -> None:
    verify = commands.add_parser(
        "verify",
        parents=[subparser_globals],
        help="recompute the hash chains (all streams, or one), the deletion ledger, or check a receipt",
    )
    target = verify.add_mutually_exclusive_group()
    target.add_argument("--stream", help="verify only this stream")
    target.add_argument(
        "--ledger", action="store_true", help="verify the project's deletion ledger instead of its streams"
    )
    target.add_argument(
        "--receipt",
        metavar="RECEIPT_ID",
        help="check one forget's receipt (rcpt_...): in the ledger, its memories without content, "
        "its events without payload once purged",
    )
    verify.add_argument(
        "--expect-head",
        type=_head,
        metavar="SEQ:HASH",
        help="a head printed by an earlier verify: the chain must still contain it (needs --stream)",
    )
    verify.add_argument(
        "--pin",
        type=_head,
        metavar="SEQ:HASH",
        help="a ledger head kept from before (an earlier verify --ledger, or a receipt's ledgerSeq:hash): "
        "the ledger must still contain it (needs --ledger)",
    )
    verify.add_argument(
        "--project",
        metavar="PRJ",
        help=f"the project id (prj_...) the ledger's hashes cover, for --ledger and --receipt "
        f"(default: ${ENV_PROJECT_ID})",
    )
    verify.set_defaults(handler=_verify)


def _add_forget_commands(commands: Any, subparser_globals: argparse.ArgumentParser) -> None:
    forget = commands.add_parser(
        "forget",
        parents=[subparser_globals],
        help="erase memories for good: a dry run, your confirmation, then a receipt",
        description="Shows what would be forgotten (a dry run), asks for confirmation, then forgets "
        "exactly that set and prints the receipt. There is no undo. Needs the forget scope.",
    )
    selector = forget.add_mutually_exclusive_group(required=True)
    selector.add_argument(
        "--memory",
        metavar="MEMORY_ID",
        help="forget this memory, its older versions and what shares its source events",
    )
    selector.add_argument(
        "--query", metavar="TEXT", help="forget every memory that holds all the words of TEXT"
    )
    selector.add_argument("--stream", metavar="NAME", help="forget everything remembered in this stream")
    forget.add_argument(
        "--reason",
        required=True,
        metavar="TEXT",
        help="why (required): the ledger keeps only a salted digest of it, never the text",
    )
    forget.add_argument(
        "--yes", action="store_true", help="do not ask for confirmation (for scripts); the dry run still runs"
    )
    forget.add_argument(
        "--max-memories",
        type=_positive_int,
        metavar="N",
        help="allow a set of up to N memories (default limit 100, at most 1000)",
    )
    forget.add_argument(
        "--json",
        action="store_true",
        help="print the API's answer as JSON on stdout (the set and the question go to stderr)",
    )
    forget.set_defaults(handler=_forget)

    ledger = commands.add_parser(
        "ledger", parents=[subparser_globals], help="the deletion ledger's entries as JSON lines"
    )
    ledger.add_argument(
        "--from-seq", type=_positive_int, default=1, help="first ledger seq to list (default 1)"
    )
    ledger.set_defaults(handler=_ledger)

    receipt = commands.add_parser(
        "receipt", parents=[subparser_globals], help="one forget's receipt and its state, as JSON"
    )
    receipt.add_argument(
        "receipt_id", metavar="RECEIPT_ID", help="the receipt's id (rcpt_...), as forget printed it"
    )
    receipt.set_defaults(handler=_receipt)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def _head(text: str) -> tuple[int, str]:
    try:
        return parse_head(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# -- configuration -------------------------------------------------------------------------------


def _setting(args: argparse.Namespace, attribute: str, env: str) -> str | None:
    value = getattr(args, attribute, None) or os.environ.get(env)
    return value.strip() if value and value.strip() else None


def _client(args: argparse.Namespace, *, admin: bool = False) -> KaiboClient:
    endpoint = _setting(args, "endpoint", ENV_ENDPOINT)
    if endpoint is None:
        raise UsageError(f"no endpoint: pass --endpoint URL or set {ENV_ENDPOINT}")
    if admin:
        key = _setting(args, "admin_key", ENV_ADMIN_KEY)
        if key is None:
            raise UsageError(f"no admin key: pass --admin-key or set {ENV_ADMIN_KEY}")
    else:
        key = _setting(args, "api_key", ENV_API_KEY)
        if key is None:
            raise UsageError(f"no API key: pass --api-key or set {ENV_API_KEY}")
    try:
        client = KaiboClient(endpoint, key)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _warn_if_cleartext(endpoint)
    return client


def _warn_if_cleartext(endpoint: str) -> None:
    parts = urllib.parse.urlsplit(endpoint)
    host = parts.hostname or ""
    if parts.scheme != "http" or host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    print(f"warning: {host} is plain http; the key travels unencrypted", file=sys.stderr)


def _print_json(value: Any, out: TextIO | None = None) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False), file=out or sys.stdout)


# -- commands ------------------------------------------------------------------------------------


def _keys_create(args: argparse.Namespace) -> int:
    client = _client(args, admin=True)
    if args.name is not None:
        if args.scopes is not None:
            raise UsageError(
                "--scopes goes with --project; a new project's first key gets the server's default scopes"
            )
        created = client.create_project(args.name, args.time_zone)
    else:
        scopes = [s.strip() for s in (args.scopes or DEFAULT_SCOPES).split(",") if s.strip()]
        if not scopes:
            raise UsageError("--scopes needs at least one scope")
        created = client.create_key(args.project, scopes)
    _print_json(created)
    print(
        "warning: the API key above is shown once; Kaibo keeps only a salted hash of it. Store it now.",
        file=sys.stderr,
    )
    return EXIT_OK


def _keys_revoke(args: argparse.Namespace) -> int:
    _client(args, admin=True).revoke_key(args.key_id)
    print(f"revoked {args.key_id}")
    return EXIT_OK


def _admin_key(_args: argparse.Namespace) -> int:
    key, key_hash = issue_admin_key()
    _print_json({"adminKey": key, "adminKeyHash": key_hash})
    print(
        "Deploy with the parameter AdminKeyHash set to adminKeyHash (e.g. sam deploy "
        "--parameter-overrides AdminKeyHash=<adminKeyHash>) and keep adminKey secret: "
        "it is shown once and not stored anywhere.",
        file=sys.stderr,
    )
    return EXIT_OK


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (and has no canonical form)")


def _remember_event(args: argparse.Namespace) -> dict[str, Any]:
    if args.event_json is not None:
        if args.role is not None:
            raise UsageError("--role goes with --text")
        try:
            event = json.loads(args.event_json, parse_constant=_reject_constant)
        except ValueError as exc:
            raise UsageError(f"--event-json is not valid JSON: {exc}") from None
        if not isinstance(event, dict):
            raise UsageError("--event-json must be a JSON object (an event with kind and payload)")
    else:
        event = {"kind": "message", "payload": {"role": args.role or "user", "text": args.text}}
    for field, value in (("idempotencyKey", args.key), ("occurredAt", args.occurred_at)):
        if value is None:
            continue
        if field in event and event[field] != value:
            raise UsageError(f"--event-json has {field} {event[field]!r}, the option says {value!r}")
        event[field] = value
    event.setdefault("idempotencyKey", str(uuid.uuid4()))
    return event


def _remember(args: argparse.Namespace) -> int:
    event = _remember_event(args)
    _print_json(_client(args).remember(args.stream, [event], wait=args.wait))
    return EXIT_OK


def _mcp(args: argparse.Namespace) -> int:
    try:
        from kaibo.mcp_server import build_server  # noqa: PLC0415 - the MCP SDK only here

        server = build_server(_client(args), os.environ.get(ENV_PROJECT_ID) or None)
    except ImportError:
        print("kaibo: error: the MCP server needs the mcp package: pip install 'kaibo[mcp]'", file=sys.stderr)
        return EXIT_USAGE
    server.run("stdio")
    return EXIT_OK


def _recall(args: argparse.Namespace) -> int:
    answer = _client(args).recall(
        args.question,
        args.budget,
        as_of=args.as_of,
        streams=args.streams,
        types=args.types,
        include_superseded=args.include_superseded,
    )
    _print_json(answer)
    return EXIT_OK


def _memory(args: argparse.Namespace) -> int:
    _print_json(_client(args).memory(args.memory_id))
    return EXIT_OK


def _explain(args: argparse.Namespace) -> int:
    _print_json(_client(args).explain(args.memory_id))
    return EXIT_OK


def _job(args: argparse.Namespace) -> int:
    _print_json(_client(args).job(args.job_id))
    return EXIT_OK


def _streams(args: argparse.Namespace) -> int:
    for head in _client(args).streams():
        print(f"{head.get('stream')} {head.get('seq')} {head.get('hash')}")
    return EXIT_OK


def _events(args: argparse.Namespace) -> int:
    printed = 0
    for event in _client(args).events(args.stream, from_seq=args.from_seq):
        print(json.dumps(event, ensure_ascii=False))
        printed += 1
    if printed == 0 and args.from_seq == 1:  # a stream exists once it has an event
        print(f"kaibo: no stream {args.stream!r} in this project (it has no event)", file=sys.stderr)
        return EXIT_NOT_FOUND
    return EXIT_OK


def _report_line(report: StreamReport) -> str:
    if report.problem is None:
        return (
            f"ok {report.stream}: {report.events_checked} events, "
            f"{report.payloads_checked} payloads checked, head {report.head.seq}:{report.head.hash}"
        )
    problem = report.problem
    return f"FAIL {report.stream} seq {problem.seq}: {problem.code}: {problem.detail}"


def _verify(args: argparse.Namespace) -> int:
    if args.expect_head is not None and args.stream is None:
        raise UsageError("--expect-head needs --stream (a head belongs to one stream)")
    if args.pin is not None and not args.ledger:
        raise UsageError("--pin needs --ledger (a receipt is checked against its own seq and hash)")
    if args.ledger:
        return _verify_ledger(args)
    if args.receipt is not None:
        return _verify_receipt(args)
    if args.project is not None:
        raise UsageError("--project goes with --ledger or --receipt")
    client = _client(args)
    checked = failed = 0
    try:
        reports = (
            iter([verify_stream(client, args.stream, args.expect_head)])
            if args.stream is not None
            else iter_verify_all(client)
        )
        for report in reports:
            checked += 1
            failed += 0 if report.ok else 1
            print(_report_line(report), flush=True)
    except KaiboError as exc:
        _print_error(exc)
        if failed:
            print(f"FAILED: {failed} of {checked} streams checked so far failed verification")
            return EXIT_CHAIN_FAILURE
        return EXIT_USAGE
    if failed:
        print(f"FAILED: {failed} of {checked} streams failed verification")
        return EXIT_CHAIN_FAILURE
    noun = "stream" if checked == 1 else "streams"
    print(f"verified: {checked} {noun} ok" if checked else "verified: no streams yet")
    return EXIT_OK


def _project(args: argparse.Namespace) -> str:
    value = _setting(args, "project", ENV_PROJECT_ID)
    if value is None:
        raise UsageError(
            f"no project id: the ledger's hashes cover it; pass --project prj_... or set {ENV_PROJECT_ID} "
            "(`make run` and `kaibo keys create` print it)"
        )
    try:
        return parse_project_id(value)
    except ValueError as exc:
        raise UsageError(f"--project: {exc}") from None


def _ledger_line(report: LedgerReport) -> str:
    if report.problem is not None:
        problem = report.problem
        return f"FAIL ledger seq {problem.seq}: {problem.code}: {problem.detail}"
    if report.head.seq == 0:
        return "ok ledger: 0 entries (no forget yet)"
    return f"ok ledger: {report.entries_checked} entries, head {report.head.seq}:{report.head.hash}"


def _hint_project(report: LedgerReport) -> None:
    problem = report.problem
    if problem is not None and problem.seq == 1 and problem.code == "hash_mismatch":
        print(
            f"hint: every entry's hash covers the project id; check that {report.project_id} is the "
            f"project of the API key (--project, ${ENV_PROJECT_ID})",
            file=sys.stderr,
        )


def _verify_ledger(args: argparse.Namespace) -> int:
    project = _project(args)
    report = verify_ledger(_client(args), project, args.pin)
    print(_ledger_line(report))
    if report.ok:
        print("verified: ledger ok")
        return EXIT_OK
    _hint_project(report)
    print("FAILED: the ledger failed verification")
    return EXIT_CHAIN_FAILURE


def _receipt_summary(report: ReceiptReport) -> str:
    counts = ", ".join(f"{n} {status}" for status, n in sorted(report.memory_statuses.items()))
    noun = "memory" if report.memories_checked == 1 else "memories"
    memories = f"{report.memories_checked} {noun} without content" + (f" ({counts})" if counts else "")
    if report.state == "purged":
        events = f"{report.events_checked} {_events_noun(report.events_checked)} without payload or salt"
    elif report.purge_due:
        events = "its events not checked (purge pending)"
    else:
        events = f"its events are purged after {report.purge_after}"
    return f"verified: receipt {report.receipt_id}: state {report.state}; {memories}; {events}"


def _verify_receipt(args: argparse.Namespace) -> int:
    project = _project(args)
    report = verify_receipt(_client(args), project, args.receipt)
    ledger = report.ledger
    if ledger is not None and ledger.ok:
        head = f"{ledger.head.seq}:{ledger.head.hash}"
        print(f"ok ledger: {ledger.entries_checked} entries up to the receipt, head {head}")
    for failure in report.failures:
        print(f"FAIL {failure}")
    for note in report.notes:
        print(f"note: {note}")
    if report.ok:
        print(_receipt_summary(report))
        return EXIT_OK
    if ledger is not None:
        _hint_project(ledger)
    noun = "check" if len(report.failures) == 1 else "checks"
    print(f"FAILED: receipt {report.receipt_id}: {len(report.failures)} {noun} failed")
    return EXIT_CHAIN_FAILURE


def _ledger(args: argparse.Namespace) -> int:
    for entry in _client(args).ledger(from_seq=args.from_seq):
        print(json.dumps(entry, ensure_ascii=False))
    return EXIT_OK


def _receipt(args: argparse.Namespace) -> int:
    _print_json(_client(args).receipt(args.receipt_id))
    return EXIT_OK


# -- forget --------------------------------------------------------------------------------------


def _plain(value: Any) -> str:
    """A served value safe to print on a terminal: no control characters (escape sequences)."""
    return "".join(char if char.isprintable() else "?" for char in str(value))


def _preview(content: Any) -> str:
    if not isinstance(content, str):
        return "(no content)"
    text = " ".join(content.split())
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1] + "…"
    return json.dumps(text, ensure_ascii=False)  # quoted, control characters escaped


def _forget_set(answer: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    memories, event_ids = answer.get("memories"), answer.get("eventIds", [])
    if not isinstance(memories, list) or not all(isinstance(m, dict) for m in memories):
        raise KaiboAPIError(200, "invalid_response", "POST /v1/forget: 'memories' is not a list of objects")
    if not isinstance(event_ids, list):
        raise KaiboAPIError(200, "invalid_response", "POST /v1/forget: 'eventIds' is not a list")
    return memories, event_ids


def _memories_noun(count: int) -> str:
    return "memory" if count == 1 else "memories"


def _events_noun(count: int) -> str:
    return "event" if count == 1 else "events"


def _print_forget_set(memories: list[dict[str, Any]], event_ids: list[Any], out: TextIO) -> None:
    for memory in memories:
        print(
            f"{_plain(memory.get('id'))}  {_plain(memory.get('status')):<11} {_plain(memory.get('why')):<17} "
            f"{_preview(memory.get('content'))}",
            file=out,
        )
    events = (
        f", and the payloads of {len(event_ids)} {_events_noun(len(event_ids))} purged" if event_ids else ""
    )
    print(f"{len(memories)} {_memories_noun(len(memories))} would be forgotten{events}.", file=out)


def _confirmed(count: int) -> bool:
    this = "this" if count == 1 else "these"
    print(
        f"Forget {this} {count} {_memories_noun(count)}? This cannot be undone. [y/N] ",
        end="",
        file=sys.stderr,
        flush=True,
    )
    answer = sys.stdin.readline()
    if not answer.endswith("\n") or not sys.stdin.isatty():
        print(file=sys.stderr)  # end the question's line: the answer was not typed (and echoed) there
    return answer.strip().lower() in ("y", "yes")


def _forget(args: argparse.Namespace) -> int:
    client = _client(args)
    selector: dict[str, Any] = {"memory_id": args.memory, "query": args.query, "stream": args.stream}
    out = sys.stderr if args.json else sys.stdout  # for people; --json keeps stdout for the answer
    try:
        preview = client.forget(**selector, reason=args.reason, dry_run=True, max_memories=args.max_memories)
    except KaiboAPIError as exc:
        if exc.code == "forget_set_too_large":
            _print_error(exc)
            print("hint: narrow the selection, or allow a larger set with --max-memories N", file=sys.stderr)
            return EXIT_USAGE
        raise
    memories, event_ids = _forget_set(preview)
    if not memories and not event_ids:
        print("nothing to forget", file=out)
        if args.json:
            _print_json(preview)
        return EXIT_OK
    _print_forget_set(memories, event_ids, out)
    if not args.yes and not _confirmed(len(memories)):
        print("not confirmed: nothing was forgotten", file=sys.stderr)
        return EXIT_NOT_CONFIRMED
    token = preview.get("previewToken")
    if not isinstance(token, str):
        raise KaiboAPIError(200, "invalid_response", "POST /v1/forget: the dry run answered no previewToken")
    try:
        answer = client.forget(
            **selector, reason=args.reason, preview_token=token, max_memories=args.max_memories
        )
    except KaiboAPIError as exc:
        if exc.code == "preview_changed":
            print(
                "error: preview_changed: the set changed since the dry run (memories were remembered, "
                "structured or forgotten meanwhile), so nothing was forgotten. Run the command again "
                "to see the new set.",
                file=sys.stderr,
            )
            return EXIT_USAGE
        raise
    return _print_forgotten(answer, args.json)


def _print_forgotten(answer: dict[str, Any], as_json: bool) -> int:
    receipt, salt = answer.get("receipt"), answer.get("reasonSalt")
    if as_json:
        _print_json(answer)
    if not isinstance(receipt, dict):
        print("nothing was forgotten: the set was empty by the time of the call", file=sys.stderr)
        return EXIT_OK
    if not as_json:
        memories, event_ids = _forget_set(answer)
        purge = f"after {_plain(receipt.get('purgeAfter'))}"
        count = f"{len(event_ids)} {_events_noun(len(event_ids))}"
        events = f"; the payloads of {count} are purged {purge}" if event_ids else ""
        print(f"forgotten: {len(memories)} {_memories_noun(len(memories))} tombstoned{events}")
        print("receipt:")
        _print_json(receipt)
        print(f"reasonSalt: {_plain(salt)}")
    print(
        "warning: the reasonSalt is shown once and Kaibo does not keep it: with the reason, it "
        "reproduces the receipt's reasonDigest. Store it now, with the receipt.",
        file=sys.stderr,
    )
    print(f"check the erasure any time: kaibo verify --receipt {_plain(receipt.get('id'))}", file=sys.stderr)
    return EXIT_OK


# -- entry point ---------------------------------------------------------------------------------


def _print_error(exc: KaiboError) -> None:
    if isinstance(exc, KaiboAPIError):
        print(f"error: {exc.code}: {exc.message} (HTTP {exc.status})", file=sys.stderr)
    elif isinstance(exc, KaiboConnectionError):
        print(f"error: connection_failed: {exc}", file=sys.stderr)
    else:
        print(f"error: {exc}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 after --help
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except UsageError as exc:
        print(f"kaibo: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KaiboError as exc:
        _print_error(exc)
        return EXIT_USAGE
    except BrokenPipeError:  # `kaibo events ... | head`: stop quietly, but do not claim success
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_USAGE


if __name__ == "__main__":
    raise SystemExit(main())
