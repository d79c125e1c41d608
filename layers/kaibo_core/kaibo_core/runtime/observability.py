"""Logger and Metrics, one of each per container.

Never log events, payloads, memory text or reasons: a memory service carries
people's words. Log ids, counts and codes.

No Powertools Tracer: importing it builds the X-Ray SDK's global recorder (two
botocore clients), about 150 ms of every cold start. The template's
``Tracing: Active`` still traces each invocation end to end without it.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from aws_lambda_powertools import Logger, Metrics

#: Every custom metric's namespace. Its ``service`` dimension is the stack's name, which
#: template.yaml gives the functions as POWERTOOLS_SERVICE_NAME (Powertools reads it when this
#: module is imported): stacks sharing an account and region publish separate series, told apart by
#: one dimension, so one dashboard serves every stack and alarms read only their own stack's series.
METRICS_NAMESPACE = "Kaibo"

#: The log lines' service names the program; each stack's lines are in its own log groups already.
logger = Logger(service="kaibo")
metrics = Metrics(namespace=METRICS_NAMESPACE)


def failure_fields(exc: BaseException) -> dict[str, str]:
    """What a log line may say of a failure: its class and where it was raised. Never its message
    or traceback text: an SDK or validation error's message can quote stored values or the request
    (people's words)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return {"error": type(exc).__name__, "where": where}


class FunctionFailedError(RuntimeError):
    """What a scheduled function raises instead of its failure: the class of the original only.
    Lambda logs an uncaught exception's message, and an SDK error's message may quote stored
    values; the structured line before it carries the class and where it was raised."""


def log_failure(what: str, exc: BaseException, **ids: object) -> FunctionFailedError:
    """Log one structured line for a function's failure (class, place, ids; never a message) and
    return the sanitized exception to raise ``from None``."""
    logger.error(f"{what} failed", extra={**ids, **failure_fields(exc)})
    return FunctionFailedError(f"{what} failed: {type(exc).__name__} (see the structured log line)")
