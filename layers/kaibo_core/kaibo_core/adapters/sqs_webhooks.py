"""The webhook queue: fan-out and delivery messages (ids only, never text), and the dead-letter
queue that receives a delivery whose retry schedule is exhausted."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

from kaibo_core.core.webhooks import Delivery, FanOut, encode_message

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

#: SQS's longest message delay: a longer wait is made of several delayed hops.
MAX_DELAY_SECONDS: Final = 900


class SqsWebhookQueue:
    def __init__(self, client: SQSClient, queue_url: str, dead_letter_url: str = "") -> None:
        self._client = client
        self._queue_url = queue_url
        self._dead_letter_url = dead_letter_url

    def fan_out(self, messages: list[FanOut]) -> None:
        for start in range(0, len(messages), 10):
            batch = messages[start : start + 10]
            response = self._client.send_message_batch(
                QueueUrl=self._queue_url,
                Entries=[{"Id": str(i), "MessageBody": encode_message(m)} for i, m in enumerate(batch)],
            )
            if response.get("Failed"):
                raise RuntimeError(f"{len(response['Failed'])} fan-out messages were not queued")

    def deliver(self, message: Delivery, delay_seconds: float = 0) -> None:
        delay = max(0, min(MAX_DELAY_SECONDS, math.ceil(delay_seconds)))
        self._client.send_message(
            QueueUrl=self._queue_url, MessageBody=encode_message(message), DelaySeconds=delay
        )

    def dead_letter(self, message: Delivery) -> None:
        if self._dead_letter_url:
            self._client.send_message(QueueUrl=self._dead_letter_url, MessageBody=encode_message(message))
