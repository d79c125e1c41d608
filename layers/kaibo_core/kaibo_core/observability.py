"""Logger, Tracer and Metrics, one of each per container.

Never log events, payloads, memory text or reasons: a memory service carries
people's words. Log ids, counts and codes.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger(service="kaibo")
tracer = Tracer(service="kaibo")
metrics = Metrics(namespace="Kaibo", service="kaibo")
