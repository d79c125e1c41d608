"""Webhook signing secrets encrypted with the deployment's KMS key (template.yaml
``WebhookSecretsKey``; the local stack uses its emulator's KMS). The encryption context binds a
ciphertext to its project and webhook: one copied onto another webhook does not decrypt."""

from __future__ import annotations

import base64
from typing import Any, Protocol


class KmsClient(Protocol):
    def encrypt(self, **kwargs: Any) -> dict[str, Any]: ...
    def decrypt(self, **kwargs: Any) -> dict[str, Any]: ...


class KmsSecretCipher:
    def __init__(self, client: KmsClient, key_id: str) -> None:
        self._client = client
        self._key_id = key_id

    def encrypt(self, project: str, webhook_id: str, secret: str) -> str:
        response = self._client.encrypt(
            KeyId=self._key_id,
            Plaintext=secret.encode(),
            EncryptionContext={"project": project, "webhook": webhook_id},
        )
        return base64.b64encode(response["CiphertextBlob"]).decode()

    def decrypt(self, project: str, webhook_id: str, ciphertext: str) -> str:
        response = self._client.decrypt(
            CiphertextBlob=base64.b64decode(ciphertext),
            EncryptionContext={"project": project, "webhook": webhook_id},
        )
        plaintext: bytes = response["Plaintext"]
        return plaintext.decode()
