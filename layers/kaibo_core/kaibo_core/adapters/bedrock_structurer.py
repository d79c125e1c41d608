"""A structurer that asks a Bedrock model (Converse API, forced tool use) for drafts.

The model only proposes: ``kaibo_core.core.structuring.model_output`` validates its answer
and applies the safety rules. Any failure the model cannot fix by being asked again
ends in the fallback structurer (the rules), so an event is always structured.

Each call ends before the invocation's deadline (``core/deadline.py``): its read timeout is the
longest of ``READ_TIMEOUTS_SECONDS`` that fits in the time left (a client per timeout, made once),
and no call or retry starts without one that fits. Out of time, or cut short by such a shorter
timeout, the structurer raises ``OutOfTimeError`` instead of falling back: the job fails and SQS
redelivers it, so the model answers the event in a later invocation (the first plan stored for an
event is kept, so the rules would answer it for good).
Never log event or memory text here: only ids, counts and error codes.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final, cast

from aws_lambda_powertools import Logger
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError, ReadTimeoutError
from botocore.exceptions import ConnectionError as BotoConnectionError
from pydantic import ValidationError

from kaibo_core.adapters.aws import botocore_session
from kaibo_core.core import deadline as invocation
from kaibo_core.core.deadline import OutOfTimeError
from kaibo_core.core.structuring.drafts import (
    MAX_CANDIDATES,
    CandidateSearch,
    EventToStructure,
    MemoryDraft,
)
from kaibo_core.core.structuring.model_output import (
    OUTPUT_SCHEMA,
    SYSTEM_PROMPT,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    ModelOutput,
    UnusableOutputError,
    accepted_drafts,
    build_user_message,
    new_nonce,
)
from kaibo_core.ports import Structurer

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient
    from mypy_boto3_bedrock_runtime.type_defs import ConverseRequestTypeDef, ConverseResponseTypeDef

#: Error codes worth asking again; anything else (ValidationException, AccessDeniedException,
#: ResourceNotFoundException, ...) will not change on a second call.
#: A child of the functions' logger (runtime/observability.py): same JSON lines, same keys.
logger = Logger(service="kaibo", child=True)

RETRYABLE_ERROR_CODES: Final = frozenset(
    {
        "ThrottlingException",
        "ModelTimeoutException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelNotReadyException",
    }
)
#: The search query is the event's text, cut to this many characters.
MAX_QUERY_CHARS: Final = 1000
#: A call's connect timeout, and the read timeouts it may have, longest first: generation of a few
#: thousand tokens can take tens of seconds; a call near the deadline gets the longest that fits.
CONNECT_TIMEOUT_SECONDS: Final = 2
READ_TIMEOUTS_SECONDS: Final = (60, 30, 15, 8, 4, 2)

#: A bedrock-runtime client whose read timeout is the given seconds (one of READ_TIMEOUTS_SECONDS).
ClientWithReadTimeout = Callable[[int], "BedrockRuntimeClient"]


@dataclass(slots=True)
class StructurerStats:
    """What the structurer spent, for benchmarks and metrics (per instance, cumulative)."""

    events: int = 0
    calls: int = 0  # Converse calls made, including failed ones
    input_tokens: int = 0
    output_tokens: int = 0
    retries: int = 0
    invalid_outputs: int = 0  # answers that failed validation
    fallbacks: int = 0  # events the fallback structurer answered


class BedrockStructurer:
    """``Structurer`` backed by a Bedrock model; falls back to another structurer on failure."""

    def __init__(
        self,
        client: BedrockRuntimeClient,
        model_id: str,
        fallback: Structurer,
        *,
        max_attempts: int = 2,
        max_tokens: int = 2048,
        candidates_per_event: int = MAX_CANDIDATES,
        retry_delay: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
        client_with_read_timeout: ClientWithReadTimeout | None = None,
    ) -> None:
        """``client`` has the longest read timeout; ``client_with_read_timeout`` gives one with a
        shorter timeout, for the calls near the deadline (without it, ``client`` makes them)."""
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self._client = client
        self._model_id = model_id
        self._fallback = fallback
        self._max_attempts = max_attempts
        self._max_tokens = max_tokens
        self._candidates_per_event = max(0, min(candidates_per_event, MAX_CANDIDATES))
        self._retry_delay = retry_delay
        self._sleep = sleep
        self._client_with_read_timeout = client_with_read_timeout
        self.stats = StructurerStats()

    @property
    def name(self) -> str:
        return "bedrock"

    @property
    def fallbacks(self) -> int:
        """Events the fallback structurer answered so far (``FallingBackStructurer``)."""
        return self.stats.fallbacks

    def structure(self, event: EventToStructure, search: CandidateSearch) -> list[MemoryDraft]:
        self.stats.events += 1
        candidates = list(search(event.text.strip()[:MAX_QUERY_CHARS]))[: self._candidates_per_event]
        request = self._request(build_user_message(event, candidates, new_nonce(event.text)))
        for attempt in range(1, self._max_attempts + 1):
            if attempt > 1:
                self.stats.retries += 1
            client, shortened = self._client_in_time()
            try:
                response = self._converse(client, request)
            except (ClientError, BotoCoreError) as exc:
                if shortened and isinstance(exc, ReadTimeoutError):
                    raise OutOfTimeError("the invocation's deadline cut the Bedrock call short") from exc
                code, retryable = _failure(exc)
                if not retryable:
                    return self._fall_back(event, search, reason=code)
                logger.info("bedrock call failed", extra={"eventId": event.event_id, "code": code})
                self._back_off(attempt)
                continue
            try:
                return accepted_drafts(_model_output(response), event, candidates)
            except ValueError as exc:  # pydantic's ValidationError, bad JSON, UnusableOutputError
                # The message of a ValidationError quotes the model's output: log its size only.
                self.stats.invalid_outputs += 1
                errors = exc.error_count() if isinstance(exc, ValidationError) else 1
                logger.info("bedrock output invalid", extra={"eventId": event.event_id, "errors": errors})
        return self._fall_back(event, search, reason="attempts exhausted")

    def _request(self, user_message: str) -> ConverseRequestTypeDef:
        return {
            "modelId": self._model_id,
            "system": [{"text": SYSTEM_PROMPT}],
            "messages": [{"role": "user", "content": [{"text": user_message}]}],
            "toolConfig": {
                "tools": [
                    {
                        "toolSpec": {
                            "name": TOOL_NAME,
                            "description": TOOL_DESCRIPTION,
                            "inputSchema": {"json": OUTPUT_SCHEMA},
                        }
                    }
                ],
                "toolChoice": {"tool": {"name": TOOL_NAME}},
            },
            "inferenceConfig": {"maxTokens": self._max_tokens, "temperature": 0},
        }

    def _client_in_time(self) -> tuple[BedrockRuntimeClient, bool]:
        """The client for the next call, and whether its read timeout is shorter than the longest
        (for the call to end before the deadline). OutOfTimeError when none fits."""
        left = invocation.seconds_within(CONNECT_TIMEOUT_SECONDS + READ_TIMEOUTS_SECONDS[0])
        fits = [timeout for timeout in READ_TIMEOUTS_SECONDS if CONNECT_TIMEOUT_SECONDS + timeout <= left]
        if not fits:
            raise OutOfTimeError("too little of the invocation is left for a Bedrock call")
        if fits[0] == READ_TIMEOUTS_SECONDS[0] or self._client_with_read_timeout is None:
            return self._client, False
        return self._client_with_read_timeout(fits[0]), True

    def _converse(
        self, client: BedrockRuntimeClient, request: ConverseRequestTypeDef
    ) -> ConverseResponseTypeDef:
        self.stats.calls += 1
        response = client.converse(**request)
        usage = response.get("usage")
        if usage:
            self.stats.input_tokens += int(usage.get("inputTokens", 0))
            self.stats.output_tokens += int(usage.get("outputTokens", 0))
        return response

    def _back_off(self, attempt: int) -> None:
        if attempt < self._max_attempts and self._retry_delay > 0:
            wait = self._retry_delay * attempt * (0.5 + random.random())
            if not invocation.time_for(wait):
                raise OutOfTimeError("too little of the invocation is left to ask Bedrock again")
            self._sleep(wait)

    def _fall_back(self, event: EventToStructure, search: CandidateSearch, reason: str) -> list[MemoryDraft]:
        self.stats.fallbacks += 1
        logger.warning(
            "bedrock structurer fell back",
            extra={"eventId": event.event_id, "reason": reason, "fallback": self._fallback.name},
        )
        return self._fallback.structure(event, search)


def _failure(exc: ClientError | BotoCoreError) -> tuple[str, bool]:
    """The error's code, and whether another attempt may succeed."""
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", "Unknown"))
        return code, code in RETRYABLE_ERROR_CODES
    # Connection failures and timeouts are transient; bad parameters or credentials are not.
    return type(exc).__name__, isinstance(exc, (BotoConnectionError, HTTPClientError))


def _model_output(response: ConverseResponseTypeDef) -> ModelOutput:
    """The tool input of the response; a JSON text block if the model answered in text."""
    content = response.get("output", {}).get("message", {}).get("content", [])
    for block in content:
        tool_use = block.get("toolUse")
        if tool_use and tool_use.get("name") == TOOL_NAME:
            return ModelOutput.model_validate(tool_use.get("input"))
    for block in content:
        text = block.get("text")
        if text:
            return ModelOutput.model_validate(_json_object(text))
    raise UnusableOutputError("the response has neither the tool's input nor a JSON text")


def _json_object(text: str) -> Mapping[str, Any]:
    """The outermost JSON object of a text, ignoring any prose or code fence around it."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise UnusableOutputError("no JSON object in the text")
    parsed = json.loads(text[start : end + 1])  # JSONDecodeError is a ValueError
    if not isinstance(parsed, dict):
        raise UnusableOutputError("the JSON is not an object")
    return parsed


#: One attempt per botocore call: ``BedrockStructurer`` retries itself and counts each call.
_BEDROCK_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 1},
    connect_timeout=CONNECT_TIMEOUT_SECONDS,
    read_timeout=READ_TIMEOUTS_SECONDS[0],
)


@lru_cache(maxsize=len(READ_TIMEOUTS_SECONDS))
def bedrock_runtime_client(read_timeout: int = READ_TIMEOUTS_SECONDS[0]) -> BedrockRuntimeClient:
    """A bedrock-runtime client reading for at most ``read_timeout`` seconds, created once per
    container and timeout (region from the environment)."""
    config = _BEDROCK_CONFIG.merge(Config(read_timeout=read_timeout))
    client = botocore_session().create_client("bedrock-runtime", config=config)
    return cast("BedrockRuntimeClient", client)
