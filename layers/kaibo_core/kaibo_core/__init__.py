"""Kaibo's domain, in layers (docs/architecture.md; the import contracts in pyproject.toml hold them).

- ``core``: pure, no I/O (chain, text, ranking, ids, limits, storage keys, domain models, rules);
- ``ports``: every Protocol the services need from a store, a queue or a structurer;
- ``services``: one module per operation, over ports and the core;
- ``adapters``: DynamoDB, SQS, Bedrock, the SDK speed-ups, and in-memory fakes;
- ``api``: the wire models and the one mapping between wire and domain;
- ``runtime``: wiring, the HTTP resolver, SSE, settings, observability.
"""
