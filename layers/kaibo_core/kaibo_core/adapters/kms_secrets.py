"""Secrets encrypted with the deployment's KMS key (template.yaml ``WebhookSecretsKey``; the local
stack uses its emulator's KMS): webhook signing secrets, and the reason salt a keyed forget's
record keeps. The encryption context binds a ciphertext to what it belongs to (a project and a
webhook; a project and a forget's attempt, for a salt): one copied elsewhere does not decrypt.

KMS's refusals become answers, once the SDK's retries gave up. Every route calls KMS before it
writes anything, so the caller can always send the request again:

- throttled (``ThrottlingException``), or briefly unable to answer (``KMSInternalException``,
  ``DependencyTimeoutException``): ``429 kms_busy`` with ``Retry-After``;
- the key itself unusable (disabled, scheduled for deletion, gone): ``503 kms_key_unavailable``,
  and an error log line naming the key and KMS's code, for the operator, who alone can fix it.

Anything else (a ciphertext that does not decrypt, a denied call) is a fault of ours: a 500."""

from __future__ import annotations

import base64
from typing import Any, Final, Protocol

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError

from kaibo_core.core.errors import KaiboError, ServiceUnavailableError, TooManyRequestsError
from kaibo_core.core.forgetting import salt_encryption_context
from kaibo_core.core.limits import KMS_RETRY_AFTER_SECONDS

#: A child of the functions' logger (runtime/observability.py): same JSON lines, same keys.
logger = Logger(service="kaibo", child=True)

#: KMS's codes for a call worth sending again a little later.
KMS_BUSY_CODES: Final = frozenset(
    {"ThrottlingException", "KMSInternalException", "DependencyTimeoutException"}
)
#: KMS's codes for a key no call can use until an operator acts on it.
KMS_KEY_UNUSABLE_CODES: Final = frozenset(
    {"DisabledException", "KMSInvalidStateException", "NotFoundException"}
)


class KmsClient(Protocol):
    def encrypt(self, **kwargs: Any) -> dict[str, Any]: ...
    def decrypt(self, **kwargs: Any) -> dict[str, Any]: ...


def kms_busy() -> TooManyRequestsError:
    return TooManyRequestsError(
        "kms_busy",
        "The key service this request needs is throttling it or briefly unavailable; nothing was "
        "written: send the request again after the Retry-After seconds.",
        retry_after_seconds=KMS_RETRY_AFTER_SECONDS,
    )


def kms_key_unavailable() -> ServiceUnavailableError:
    return ServiceUnavailableError(
        "kms_key_unavailable",
        "This deployment's encryption key cannot be used (disabled, scheduled for deletion or "
        "deleted); nothing was written. Its operator must make the key usable again.",
    )


def _refusal(error: ClientError, operation: str, key_id: str) -> KaiboError | None:
    """What the caller is answered for KMS's refusal ``error``; None: a fault (500)."""
    code = str(error.response.get("Error", {}).get("Code", ""))
    if code in KMS_BUSY_CODES:
        return kms_busy()
    if code in KMS_KEY_UNUSABLE_CODES:
        logger.error(
            "KMS key unusable: enable it, cancel its deletion, or point KAIBO_WEBHOOK_KEY_ID "
            "(template.yaml WebhookSecretsKey) at a usable key",
            extra={"kmsKeyId": key_id, "operation": operation, "kmsErrorCode": code},
        )
        return kms_key_unavailable()
    return None


class _KmsCipher:
    """One Encrypt or Decrypt per call: text in, base64 ciphertext out, bound to ``context``."""

    def __init__(self, client: KmsClient, key_id: str) -> None:
        self._client = client
        self._key_id = key_id

    def _encrypt(self, plaintext: str, context: dict[str, str]) -> str:
        try:
            response = self._client.encrypt(
                KeyId=self._key_id, Plaintext=plaintext.encode(), EncryptionContext=context
            )
        except ClientError as error:
            raise (_refusal(error, "Encrypt", self._key_id) or error) from error
        return base64.b64encode(response["CiphertextBlob"]).decode()

    def _decrypt(self, ciphertext: str, context: dict[str, str]) -> str:
        try:
            response = self._client.decrypt(
                CiphertextBlob=base64.b64decode(ciphertext), EncryptionContext=context
            )
        except ClientError as error:
            raise (_refusal(error, "Decrypt", self._key_id) or error) from error
        plaintext: bytes = response["Plaintext"]
        return plaintext.decode()


class KmsSecretCipher(_KmsCipher):
    """Webhook signing secrets: the context names the project and the webhook."""

    def encrypt(self, project: str, webhook_id: str, secret: str) -> str:
        return self._encrypt(secret, {"project": project, "webhook": webhook_id})

    def decrypt(self, project: str, webhook_id: str, ciphertext: str) -> str:
        return self._decrypt(ciphertext, {"project": project, "webhook": webhook_id})


class KmsSaltCipher(_KmsCipher):
    """A keyed forget's reason salt: the context names the project, the purpose and the record's
    attempt (``salt_encryption_context``)."""

    def encrypt(self, project: str, attempt_id: str, salt: str) -> str:
        return self._encrypt(salt, salt_encryption_context(project, attempt_id))

    def decrypt(self, project: str, attempt_id: str, ciphertext: str) -> str:
        return self._decrypt(ciphertext, salt_encryption_context(project, attempt_id))
