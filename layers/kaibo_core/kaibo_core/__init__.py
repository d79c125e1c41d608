"""Kaibo's domain: a pure core (no I/O) and the adapters that reach AWS.

Pure core: chain, clock, ids, limits, errors, storage_keys, api_keys, models.
Adapters: kaibo_core.adapters (DynamoDB stores, AWS clients).
Services compose them: kaibo_core.services.
"""
