// Kaibo with the JavaScript/TypeScript client: remember a fact and a change to it, recall,
// explain, the job. Needs Node 20+ and KAIBO_ENDPOINT and KAIBO_API_KEY (README.md, "Try it");
// new Kaibo() reads them. Run: node docs/quickstart/quickstart.mjs
// (Installed with npm install /path/to/kaibo/clients/typescript, import from "kaibo" instead.)
import { Kaibo } from "../../clients/typescript/src/index.js";

const kaibo = new Kaibo();

// One chat message; the idempotency key makes a second run append nothing.
const message = (idempotencyKey, occurredAt, text) => ({
  idempotencyKey,
  kind: "message",
  occurredAt,
  payload: { role: "user", text },
});

// 1. Remember two messages of a chat; wait: true answers once they are structured into memories.
await kaibo.remember({
  stream: "chat-42",
  events: [message("msg-1", "2026-06-01T09:00:00Z", "The release target is July 13")],
  wait: true,
});
const change = await kaibo.remember({
  stream: "chat-42",
  events: [message("msg-2", "2026-06-02T09:30:00Z", "Move the release target from July 13 to July 17")],
  wait: true,
});

// 2. Recall: the smallest cited set of memories that answers (or an explicit abstain).
const pack = await kaibo.recall("When is the release target?", { budget: 100 });
if (pack.abstained) {
  console.log(`recall: abstained: ${pack.abstainReason}`);
  process.exit(1);
}
console.log(`recall: ${pack.top.text}`);

// 3. Explain the top memory: its versions, oldest first.
console.log("explain, oldest first:");
for (const version of (await kaibo.explain(pack.top)).chain) {
  console.log(`  ${version.status}: ${version.content ?? "(forgotten)"}`); // no text once forgotten
}

// 4. The structuring job of the change: queued, structuring, done or failed.
console.log(`job: ${(await kaibo.job(change.jobId)).status}`);
