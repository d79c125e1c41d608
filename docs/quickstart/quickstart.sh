#!/usr/bin/env bash
# Kaibo with curl and jq: remember a fact and a change to it, recall, explain, the job.
# Needs KAIBO_ENDPOINT and KAIBO_API_KEY (README.md, "Try it"). Run: bash docs/quickstart/quickstart.sh
set -euo pipefail
auth="Authorization: Bearer $KAIBO_API_KEY"

# 1. Remember two messages of a chat. "wait": true answers once they are structured into memories;
#    the idempotency keys make a second run append nothing.
curl -sS --fail-with-body -X POST "$KAIBO_ENDPOINT/v1/remember" -H "$auth" -d '{"stream": "chat-42",
  "wait": true, "events": [{"idempotencyKey": "msg-1", "kind": "message",
  "occurredAt": "2026-06-01T09:00:00Z",
  "payload": {"role": "user", "text": "The release target is July 13"}}]}' >/dev/null
change=$(curl -sS --fail-with-body -X POST "$KAIBO_ENDPOINT/v1/remember" -H "$auth" -d '{"stream": "chat-42",
  "wait": true, "events": [{"idempotencyKey": "msg-2", "kind": "message",
  "occurredAt": "2026-06-02T09:30:00Z",
  "payload": {"role": "user", "text": "Move the release target from July 13 to July 17"}}]}')

# 2. Recall: the smallest cited set of memories that answers (or an explicit abstain).
answer=$(curl -sS --fail-with-body -X POST "$KAIBO_ENDPOINT/v1/recall" -H "$auth" \
  -d '{"question": "When is the release target?", "budget": 100}')
jq -r '"recall: \(.items[0].text // "abstained: \(.abstain.reason)")"' <<<"$answer"

# 3. Explain the top memory: its versions, oldest first.
memory=$(jq -r '.items[0].memoryId' <<<"$answer")
echo "explain, oldest first:"
curl -sS --fail-with-body -X POST "$KAIBO_ENDPOINT/v1/explain" -H "$auth" -d "{\"memoryId\": \"$memory\"}" |
  jq -r '.chain[] | "  \(.status): \(.content // "(forgotten)")"'

# 4. The structuring job of the change: queued, structuring, done or failed.
job=$(jq -r .jobId <<<"$change")
curl -sS --fail-with-body "$KAIBO_ENDPOINT/v1/jobs/$job" -H "$auth" | jq -r '"job: \(.status)"'
