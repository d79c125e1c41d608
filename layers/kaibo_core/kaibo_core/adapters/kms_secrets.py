"""Secrets encrypted with the deployment's KMS key (template.yaml ``WebhookSecretsKey``; the local
stack uses its emulator's KMS): webhook signing secrets, and the reason salt a keyed forget's
record keeps. The encryption context binds a ciphertext to what it belongs to (a project and a
webhook; a project and a forget's attempt, for a salt): one copied elsewhere does not decrypt."""

from __future__ import annotations

import base64
from typing import Any, Protocol

from kaibo_core.core.forgetting import salt_encryption_context


class KmsClient(Protocol):
    def encrypt(self, **kwargs: Any) -> dict[str, Any]: ...
    def decrypt(self, **kwargs: Any) -> dict[str, Any]: ...


class _KmsCipher:
    """One Encrypt or Decrypt per call: text in, base64 ciphertext out, bound to ``context``."""

    def __init__(self, client: KmsClient, key_id: str) -> None:
        self._client = client
        self._key_id = key_id

    def _encrypt(self, plaintext: str, context: dict[str, str]) -> str:
        response = self._client.encrypt(
            KeyId=self._key_id, Plaintext=plaintext.encode(), EncryptionContext=context
        )
        return base64.b64encode(response["CiphertextBlob"]).decode()

    def _decrypt(self, ciphertext: str, context: dict[str, str]) -> str:
        response = self._client.decrypt(
            CiphertextBlob=base64.b64decode(ciphertext), EncryptionContext=context
        )
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
