"""Kaibo with the Python SDK: remember a fact and a change to it, recall, explain, the job.

Needs KAIBO_ENDPOINT and KAIBO_API_KEY (README.md, "Try it") and the SDK (``pip install
./clients/python``; the repository's .venv has it). Run: ``.venv/bin/python docs/quickstart/quickstart.py``
"""

import os

from kaibo import KaiboClient

kaibo = KaiboClient(os.environ["KAIBO_ENDPOINT"], os.environ["KAIBO_API_KEY"])


def message(key: str, occurred_at: str, text: str) -> dict[str, object]:
    """One chat message; the idempotency key makes a second run append nothing."""
    return {
        "idempotencyKey": key,
        "kind": "message",
        "occurredAt": occurred_at,
        "payload": {"role": "user", "text": text},
    }


# 1. Remember two messages of a chat; wait=True answers once they are structured into memories.
fact = message("msg-1", "2026-06-01T09:00:00Z", "The release target is July 13")
kaibo.remember("chat-42", [fact], wait=True)
moved = message("msg-2", "2026-06-02T09:30:00Z", "Move the release target from July 13 to July 17")
change = kaibo.remember("chat-42", [moved], wait=True)

# 2. Recall: the smallest cited set of memories that answers (or an explicit abstain).
answer = kaibo.recall("When is the release target?", budget=100)
if answer["abstain"]["abstained"]:
    raise SystemExit(f"recall: abstained: {answer['abstain']['reason']}")
top = answer["items"][0]
print(f"recall: {top['text']}")

# 3. Explain the top memory: its versions, oldest first.
print("explain, oldest first:")
for version in kaibo.explain(top)["chain"]:
    print(f"  {version['status']}: {version.get('content', '(forgotten)')}")  # no text once forgotten

# 4. The structuring job of the change: queued, structuring, done or failed.
print(f"job: {kaibo.job(change['jobId'])['status']}")
