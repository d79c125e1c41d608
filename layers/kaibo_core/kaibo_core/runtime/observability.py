"""Logger and Metrics, one of each per container.

Never log events, payloads, memory text or reasons: a memory service carries
people's words. Log ids, counts and codes.

No Powertools Tracer: importing it builds the X-Ray SDK's global recorder (two
botocore clients), about 150 ms of every cold start. The template's
``Tracing: Active`` still traces each invocation end to end without it.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics

logger = Logger(service="kaibo")
metrics = Metrics(namespace="Kaibo", service="kaibo")
