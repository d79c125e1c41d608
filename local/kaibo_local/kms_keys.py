"""The template's KMS keys in the emulator, kept across restarts.

A key's material lives only in the emulator's memory, and a ciphertext names its key: a restarted
stack with new keys could not decrypt what the last run encrypted (the webhooks' signing
secrets). So the stack keeps each key's id and material in its data folder's manifest (a 0600
file, like the API keys beside them) and, at start, gives the emulator's new key that id and
material again. This reaches into moto's KMS backend, which runs in this process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kaibo_local.template import resources_of_type

KMS_KEY_TYPE: Final = "AWS::KMS::Key"
#: The emulator's account (moto's default): the one whose backend holds the keys.
ACCOUNT_ID: Final = "123456789012"

#: logical id → (key id, key material in hex)
KeptKeys = dict[str, tuple[str, str]]


def create_keys(kms: Any, template: Mapping[str, Any], kept: Mapping[str, tuple[str, str]]) -> KeptKeys:
    """Each ``AWS::KMS::Key`` of ``template`` in the emulator: the kept ones as they were."""
    from moto.kms.models import kms_backends  # noqa: PLC0415 - moto loads only with the emulator

    region = kms.meta.region_name
    made: KeptKeys = {}
    for logical_id, _resource in resources_of_type(template, KMS_KEY_TYPE):
        key_id = kms.create_key(Description=f"kaibo-local {logical_id}")["KeyMetadata"]["KeyId"]
        backend = kms_backends[ACCOUNT_ID][region]
        key = backend.keys[key_id]
        if logical_id in kept:
            saved_id, material = kept[logical_id]
            del backend.keys[key_id]
            key.id = saved_id
            key.arn = key.arn.replace(key_id, saved_id)
            key.key_material = bytes.fromhex(material)
            backend.keys[saved_id] = key
            key_id = saved_id
        made[logical_id] = (key_id, key.key_material.hex())
    return made
