// Compiled, never run (`npm run typecheck`): the examples of the README and of the concepts
// document type-check as written, and wrong uses do not.
import { Kaibo, KaiboError, type JobOut, type RecallStreamEvent } from "kaibo";

declare const process: { env: Record<string, string | undefined> }; // no @types/node needed

const kaibo = new Kaibo({ baseUrl: "http://127.0.0.1:3000", apiKey: "kb_..." });

export async function quickStart(): Promise<void> {
  const remembered = await kaibo.remember({
    stream: "chat-42",
    events: [
      {
        idempotencyKey: "msg-1001",
        kind: "message",
        payload: { role: "user", text: "Move the release target from July 13 to July 17" },
        occurredAt: "2026-06-02T09:30:00Z",
      },
    ],
  });
  const job: JobOut = await kaibo.waitForJob(remembered);
  const status: "queued" | "structuring" | "done" | "failed" = job.status;
  void status;

  const pack = await kaibo.recall("When is the release target?", { budget: 300 });
  if (pack.abstained) console.log("I do not know:", pack.abstain.reason, pack.abstainReason);
  for (const item of pack.items) console.log(item.form, item.text, item.citations[0]?.seq);
  console.log(pack.citations.map((citation) => citation.hash));

  // The concepts document, as written:
  const why = await kaibo.explain(pack.top); for (const version of why.chain) console.log(version.status, version.validFrom, version.content);

  for await (const event of kaibo.recallStream("When is the release target?")) {
    if (event.event === "candidates") console.log(event.data.candidates.map((c) => c.score));
    else if (event.event === "packed") console.log(event.data.usedTokens);
    else if (event.event === "final") console.log(event.data.top?.memoryId);
  }
  const first: RecallStreamEvent | undefined = undefined;
  void first;

  const preview = await kaibo.forget({ query: "release target", reason: "user asked", dryRun: true });
  for (const memory of preview.memories) console.log(memory.why, memory.content);
  const done = await kaibo.forget({ query: "release target", reason: "user asked", previewToken: preview.previewToken });
  console.log(done.receipt?.id, done.reasonSalt);
  if (pack.top) await kaibo.forget({ memoryId: pack.top, reason: "wrong" });
  await kaibo.forget({ subject: "release target", reason: "user asked", dryRun: true });

  const page = await kaibo.eventsPage("chat-42", { limit: 100 });
  console.log(page.nextFromSeq, page.events[0]?.hash);
  for await (const event of kaibo.events("chat-42")) console.log(event.seq, event.prevHash);

  try {
    await kaibo.recall("x");
  } catch (error) {
    if (error instanceof KaiboError) console.log(error.status, error.code, error.message, error.requestId);
  }
}

export async function wrongUses(): Promise<void> {
  // @ts-expect-error: forget takes exactly one selector
  await kaibo.forget({ query: "a", stream: "b", reason: "r" });
  // @ts-expect-error: a subject is a selector too
  await kaibo.forget({ subject: "a", query: "b", reason: "r" });
  // @ts-expect-error: forget needs a reason
  await kaibo.forget({ query: "a" });
  // @ts-expect-error: an event needs its idempotency key
  await kaibo.remember({ stream: "s", events: [{ kind: "message", payload: { role: "user", text: "t" } }] });
  // @ts-expect-error: types are the documented memory types
  await kaibo.recall("q", { types: ["opinion"] });
  const pack = await kaibo.recall("q");
  // @ts-expect-error: top may be undefined (recall abstained)
  console.log(pack.top.text);
  const job = await kaibo.job("job_1");
  // @ts-expect-error: not a job status
  if (job.status === "finished") console.log(job);
}

// README blocks (copied from README.md's js blocks, as written: keep them in step):
export async function readme(): Promise<void> {
  {
    const kaibo = new Kaibo({ baseUrl: "http://127.0.0.1:3000", apiKey: process.env.KAIBO_API_KEY });

    // remember: events, each with an idempotency key (sending it again appends nothing)
    const remembered = await kaibo.remember({
      stream: "chat-42",
      events: [
        {
          idempotencyKey: "msg-1001",
          kind: "message",
          payload: { role: "user", text: "Move the release target from July 13 to July 17" },
          occurredAt: "2026-06-02T09:30:00Z",
        },
      ],
    });
    await kaibo.waitForJob(remembered); // or remember({ ..., wait: true })

    // recall: the smallest cited set of memories that answers, within a token budget
    const pack = await kaibo.recall("When is the release target?", { budget: 300 });
    if (pack.abstained) console.log("I do not know:", pack.abstainReason); // no_match, no_terms, ...
    else console.log(pack.top?.text, pack.citations);

    // explain: how the memory came to be, oldest first
    const why = await kaibo.explain(pack.top);
    for (const version of why.chain) console.log(version.status, version.validFrom, version.content);
  }
  {
    for await (const { event, data } of kaibo.recallStream("When is the release target?")) {
      if (event === "candidates") console.log(data.candidates.length, "candidates");
      if (event === "final") console.log(data.top?.text);
    }
  }
  {
    const preview = await kaibo.forget({ query: "release target", reason: "user asked", dryRun: true });
    for (const memory of preview.memories) console.log(memory.why, memory.content); // read it first
    const done = await kaibo.forget({ query: "release target", reason: "user asked", previewToken: preview.previewToken });
    console.log(done.receipt?.id, done.reasonSalt); // the salt is shown once
  }
}
