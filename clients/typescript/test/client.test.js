// The client without a service: a scripted fetch. Retries, errors, timeouts, the event-stream
// parser and the argument checks.
import assert from "node:assert/strict";
import { inspect } from "node:util";
import { describe, test } from "node:test";

import { Kaibo, KaiboClient, KaiboError, RecallPack, SseParser, verifyWebhook } from "../src/index.js";

const BASE = "http://kaibo.test/prod";
const ANSWER = {
  items: [
    {
      memoryId: "mem_1",
      type: "fact",
      form: "quote",
      text: "The release target is July 17.",
      validFrom: "2026-06-02T09:30:00.000Z",
      validTo: null,
      confidence: 0.8,
      score: 1.2,
      tokens: 9,
      citations: [{ eventId: "evt_1", stream: "chat", seq: 1, hash: "a".repeat(64) }],
    },
    {
      memoryId: "mem_2",
      type: "decision",
      form: "quote",
      text: "Move the release target to July 17.",
      validFrom: "2026-06-02T09:30:00.000Z",
      validTo: null,
      confidence: 0.85,
      score: 1.1,
      tokens: 10,
      citations: [
        { eventId: "evt_1", stream: "chat", seq: 1, hash: "a".repeat(64) },
        { eventId: "evt_2", stream: "chat", seq: 2, hash: "b".repeat(64) },
      ],
    },
  ],
  usedTokens: 19,
  budget: 300,
  asOf: "2026-07-01T00:00:00.000Z",
  abstain: { abstained: false },
};

const json = (status, body, headers = {}) =>
  new Response(body === undefined ? null : JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
const apiError = (status, code, extra = {}, headers = {}) =>
  json(status, { error: { code, message: `${code} happened`, details: extra } }, headers);

/** A fetch answering from a list of answers (functions of the request) in order; it records the requests. */
function scripted(...answers) {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url, init, body: init.body === undefined ? undefined : JSON.parse(init.body) });
    const answer = answers[Math.min(calls.length, answers.length) - 1];
    return typeof answer === "function" ? answer(url, init) : answer.clone();
  };
  return { fetch, calls };
}

const client = (fetch, options = {}) => new Kaibo({ baseUrl: BASE, apiKey: "kb_secret", fetch, ...options });

/** A response whose body is these chunks (strings, sent as UTF-8 bytes), and whether it was cancelled. */
function streamed(chunks, { contentType = "text/event-stream; charset=utf-8", status = 200 } = {}) {
  const state = { cancelled: false };
  const encoder = new TextEncoder();
  let index = 0;
  const body = new ReadableStream({
    pull(controller) {
      if (index < chunks.length) controller.enqueue(encoder.encode(chunks[index++]));
      else controller.close();
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return { response: new Response(body, { status, headers: { "content-type": contentType } }), state };
}

const sse = (event, data) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

describe("the client", () => {
  test("sends the key, the path under the base URL and JSON; answers a RecallPack", async () => {
    const { fetch, calls } = scripted(json(200, ANSWER));
    const pack = await client(fetch).recall("When is the release target?", { budget: 50, streams: ["chat"] });
    assert.equal(calls.length, 1);
    assert.equal(calls[0].url, `${BASE}/v1/recall`);
    assert.equal(calls[0].init.method, "POST");
    assert.equal(calls[0].init.headers.Authorization, "Bearer kb_secret");
    assert.equal(calls[0].init.headers.Accept, "application/json");
    assert.equal(calls[0].init.headers["Content-Type"], "application/json");
    assert.match(calls[0].init.headers["User-Agent"], /^kaibo-typescript\//);
    assert.equal(calls[0].init.redirect, "manual");
    assert.deepEqual(calls[0].body, { question: "When is the release target?", budget: 50, streams: ["chat"] });
    assert.ok(pack instanceof RecallPack);
    assert.equal(pack.top.memoryId, "mem_1");
    assert.equal(pack.abstained, false);
    assert.equal(pack.abstainReason, undefined);
    assert.deepEqual(
      pack.citations.map((c) => c.eventId),
      ["evt_1", "evt_2"],
    );
    assert.deepEqual(JSON.parse(JSON.stringify(pack)), ANSWER);
  });

  test("a field the API adds is kept, even under a shortcut's name", async () => {
    const { fetch } = scripted(json(200, { ...ANSWER, citations: ["server's"], rank: 1 }));
    const pack = await client(fetch).recall("q");
    assert.deepEqual(pack.citations, ["server's"]);
    assert.equal(pack.rank, 1);
    assert.equal(pack.top.memoryId, "mem_1");
  });

  test("recall takes the request object as well", async () => {
    const { fetch, calls } = scripted(json(200, ANSWER));
    await client(fetch).recall({ question: "q", includeSuperseded: true });
    assert.deepEqual(calls[0].body, { question: "q", includeSuperseded: true });
  });

  test("an abstain: top undefined, the reason, and explain(pack.top) says why it cannot", async () => {
    const abstained = {
      ...ANSWER,
      items: [],
      usedTokens: 0,
      abstain: { abstained: true, reason: "no_match", message: "No memory contains any of the terms." },
    };
    const { fetch, calls } = scripted(json(200, abstained));
    const kaibo = client(fetch);
    const pack = await kaibo.recall("zebra");
    assert.equal(pack.top, undefined);
    assert.equal(pack.abstained, true);
    assert.equal(pack.abstainReason, "no_match");
    assert.equal(pack.abstain.reason, "no_match");
    assert.deepEqual(pack.citations, []);
    await assert.rejects(kaibo.explain(pack.top), (error) => {
      assert.ok(error instanceof TypeError);
      assert.match(error.message, /abstained/);
      return true;
    });
    assert.equal(calls.length, 1);
  });

  test("explain takes an id, a recalled item or a memory", async () => {
    const chain = { memoryId: "mem_1", chain: [] };
    const { fetch, calls } = scripted(json(200, chain));
    const kaibo = client(fetch);
    await kaibo.explain("mem_a");
    await kaibo.explain(ANSWER.items[1]);
    await kaibo.explain({ id: "mem_c", status: "active" });
    assert.deepEqual(
      calls.map((call) => call.body),
      [{ memoryId: "mem_a" }, { memoryId: "mem_2" }, { memoryId: "mem_c" }],
    );
  });

  test("path segments are encoded", async () => {
    const { fetch, calls } = scripted(json(200, { events: [], nextFromSeq: null }));
    await client(fetch).eventsPage("chat:42/x", { fromSeq: 3, limit: 2 });
    assert.equal(calls[0].url, `${BASE}/v1/streams/chat%3A42%2Fx/events?fromSeq=3&limit=2`);
    assert.equal(calls[0].init.body, undefined);
  });

  test("an API error is a KaiboError with status, code, message, details and requestId", async () => {
    const { fetch } = scripted(
      apiError(404, "memory_not_found", { memoryId: "mem_x" }, { "x-amzn-RequestId": "req-123" }),
    );
    await assert.rejects(client(fetch).explain("mem_x"), (error) => {
      assert.ok(error instanceof KaiboError);
      assert.ok(error instanceof Error);
      assert.equal(error.name, "KaiboError");
      assert.equal(error.status, 404);
      assert.equal(error.code, "memory_not_found");
      assert.equal(error.message, "memory_not_found happened");
      assert.deepEqual(error.details, { memoryId: "mem_x" });
      assert.equal(error.requestId, "req-123");
      return true;
    });
  });

  test("the requestId of details wins over the header; a body not in the error shape is http_<status>", async () => {
    const { fetch } = scripted(
      apiError(500, "internal_error", { requestId: "from-details" }, { "x-amzn-RequestId": "from-header" }),
    );
    await assert.rejects(client(fetch, { maxRetries: 0 }).recall("q"), { requestId: "from-details" });
    const plain = scripted(new Response("Bad Gateway", { status: 502, headers: { "x-amzn-RequestId": "r" } }));
    await assert.rejects(client(plain.fetch, { maxRetries: 0 }).recall("q"), {
      status: 502,
      code: "http_502",
      message: "Bad Gateway",
      requestId: "r",
    });
  });

  test("a 429 is retried after its Retry-After, for every call (a real forget too)", async () => {
    const receipt = { dryRun: false, previewToken: "t", memories: [], eventIds: [] };
    const { fetch, calls } = scripted(
      apiError(429, "rate_limited", {}, { "Retry-After": "1" }),
      apiError(429, "stream_busy", {}, { "Retry-After": "0" }),
      json(200, receipt),
    );
    const began = performance.now();
    const answer = await client(fetch).forget({ query: "release", reason: "asked" });
    assert.deepEqual(answer, receipt);
    assert.equal(calls.length, 3);
    assert.ok(performance.now() - began >= 950, "Retry-After: 1 was honoured");
  });

  test("a transaction race's 429 is retried for idempotent calls only (it may follow a commit)", async () => {
    const busy = (code) => apiError(429, code, {}, { "Retry-After": "0" });
    const created = scripted(busy("transaction_busy"));
    await assert.rejects(client(created.fetch).createWebhook({ url: "https://h.example/k", events: ["memory.forgotten"] }), {
      status: 429,
      code: "transaction_busy",
    });
    assert.equal(created.calls.length, 1);
    const unkeyed = scripted(busy("ledger_busy"));
    await assert.rejects(client(unkeyed.fetch).forget({ query: "release", reason: "asked" }), { code: "ledger_busy" });
    assert.equal(unkeyed.calls.length, 1);
    const throttled = scripted(busy("table_busy"));
    await assert.rejects(client(throttled.fetch).forget({ query: "release", reason: "asked" }), { code: "table_busy" });
    assert.equal(throttled.calls.length, 1);
    const receipt = { dryRun: false, previewToken: "t", memories: [], eventIds: [], replayed: true };
    const keyed = scripted(busy("ledger_busy"), json(200, receipt));
    const answer = await client(keyed.fetch).forget({ query: "release", reason: "asked", idempotencyKey: "erase-1" });
    assert.deepEqual(answer, receipt);
    assert.equal(keyed.calls.length, 2);
  });

  test("kms_busy is retried for every call, a webhook creation too (KMS is called before any write)", async () => {
    const made = { id: "wh_1", secret: "whsec_x" };
    const { fetch, calls } = scripted(apiError(429, "kms_busy", {}, { "Retry-After": "0" }), json(201, made));
    const answer = await client(fetch).createWebhook({ url: "https://h.example/k", events: ["memory.forgotten"] });
    assert.deepEqual(answer, made);
    assert.equal(calls.length, 2);
  });

  test("a 429 past maxRetries throws it, with retryAfter", async () => {
    const { fetch, calls } = scripted(apiError(429, "rate_limited", {}, { "Retry-After": "0" }));
    await assert.rejects(client(fetch, { maxRetries: 2 }).recall("q"), { status: 429, code: "rate_limited", retryAfter: 0 });
    assert.equal(calls.length, 3);
  });

  test("a Retry-After past the cap (a used-up quota) is thrown at once, not waited for and asked again", async () => {
    const { fetch, calls } = scripted(apiError(429, "quota_exceeded", {}, { "Retry-After": "3600" }));
    await assert.rejects(client(fetch).recall("q"), { status: 429, code: "quota_exceeded", retryAfter: 3600 });
    assert.equal(calls.length, 1);
  });

  test("a 5xx is retried for idempotent calls: recall, explain, remember, a dry run, GETs", async () => {
    const kaiboFor = (fetch) => client(fetch, { maxRetries: 1 });
    const calls = [
      (kaibo) => kaibo.recall("q"),
      (kaibo) => kaibo.explain("mem_1"),
      (kaibo) => kaibo.remember({ stream: "s", events: [{ idempotencyKey: "k", kind: "message", payload: { role: "u", text: "t" } }] }),
      (kaibo) => kaibo.forget({ memoryId: "mem_1", reason: "r", dryRun: true }),
      (kaibo) => kaibo.job("job_1"),
    ];
    for (const call of calls) {
      const script = scripted(apiError(503, "unavailable"), json(200, ANSWER));
      await call(kaiboFor(script.fetch));
      assert.equal(script.calls.length, 2);
    }
  });

  test("a real forget is not retried after a 5xx or a network error", async () => {
    const failing = scripted(apiError(502, "internal_error"));
    await assert.rejects(client(failing.fetch).forget({ memoryId: "mem_1", reason: "r" }), { status: 502 });
    assert.equal(failing.calls.length, 1);
    const unreachable = scripted(() => Promise.reject(new TypeError("fetch failed")));
    await assert.rejects(client(unreachable.fetch).forget({ memoryId: "mem_1", reason: "r" }), {
      code: "network_error",
      status: 0,
    });
    assert.equal(unreachable.calls.length, 1);
  });

  test("a real forget with an idempotencyKey is retried after a 5xx or a network error, with its key", async () => {
    const replayed = { dryRun: false, memories: [], eventIds: [], previewToken: "t", replayed: true };
    const failing = scripted(apiError(502, "internal_error"), json(200, replayed));
    const answer = await client(failing.fetch).forget({ memoryId: "mem_1", reason: "r", idempotencyKey: "erase-1" });
    assert.equal(answer.replayed, true);
    assert.equal(failing.calls.length, 2);
    const unreachable = scripted(() => Promise.reject(new TypeError("fetch failed")), json(200, replayed));
    await client(unreachable.fetch).forget({ query: "q", reason: "r", idempotencyKey: "erase-1" });
    assert.equal(unreachable.calls.length, 2);
    for (const call of [...failing.calls, ...unreachable.calls]) assert.equal(call.body.idempotencyKey, "erase-1");
  });

  test("a connection lost mid-body is retried for idempotent calls, and not for a real forget", async () => {
    const cutOff = () =>
      new Response(
        new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode('{"items": ['));
            controller.error(new TypeError("terminated"));
          },
        }),
        { status: 200, headers: { "content-type": "application/json" } },
      );
    const { fetch, calls } = scripted(cutOff, json(200, ANSWER));
    const pack = await client(fetch).recall("q");
    assert.equal(pack.top.memoryId, "mem_1");
    assert.equal(calls.length, 2);
    const once = scripted(cutOff, json(200, {}));
    await assert.rejects(client(once.fetch).forget({ memoryId: "mem_1", reason: "r" }), { code: "network_error" });
    assert.equal(once.calls.length, 1); // it may have erased: never sent twice
  });

  test("a network error is retried for idempotent calls, then thrown as network_error", async () => {
    const refused = new TypeError("fetch failed", { cause: Object.assign(new Error("connect"), { code: "ECONNREFUSED" }) });
    const { fetch, calls } = scripted(() => Promise.reject(refused));
    await assert.rejects(client(fetch, { maxRetries: 1 }).recall("q"), (error) => {
      assert.equal(error.code, "network_error");
      assert.match(error.message, /ECONNREFUSED/);
      assert.equal(error.cause, refused);
      return true;
    });
    assert.equal(calls.length, 2);
  });

  test("4xx other than 429 is not retried", async () => {
    const { fetch, calls } = scripted(apiError(422, "invalid_request", { errors: [{ field: "budget" }] }));
    await assert.rejects(client(fetch).recall("q", { budget: 0 }), { status: 422, code: "invalid_request" });
    assert.equal(calls.length, 1);
  });

  test("timeoutMs bounds an attempt: timeout, not retried; an AbortSignal: aborted", async () => {
    const hanging = (url, init) =>
      new Promise((resolve, reject) => init.signal.addEventListener("abort", () => reject(init.signal.reason)));
    const slow = scripted(hanging);
    await assert.rejects(client(slow.fetch, { timeoutMs: 50 }).recall("q"), { code: "timeout", status: 0 });
    assert.equal(slow.calls.length, 1);
    const stopped = scripted(hanging);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    await assert.rejects(client(stopped.fetch).recall("q", { signal: controller.signal }), { code: "aborted" });
  });

  test("a redirect is not followed (it would resend the key)", async () => {
    const { fetch } = scripted(new Response(null, { status: 301, headers: { location: "https://elsewhere/" } }));
    await assert.rejects(client(fetch).recall("q"), { status: 301, code: "redirect_refused" });
  });

  test("an answer that is not a JSON object is invalid_response", async () => {
    const { fetch } = scripted(new Response("<html>", { status: 200 }));
    await assert.rejects(client(fetch).job("job_1"), { code: "invalid_response" });
  });

  test("arguments are checked before any request", async () => {
    const { fetch, calls } = scripted(json(200, {}));
    const kaibo = client(fetch);
    await assert.rejects(kaibo.forget({ query: "a", stream: "b", reason: "r" }), TypeError);
    await assert.rejects(kaibo.forget({ subject: "a", memoryId: "mem_1", reason: "r" }), TypeError);
    await assert.rejects(kaibo.forget({ reason: "r" }), TypeError);
    await assert.rejects(kaibo.forget({ query: "a" }), TypeError);
    await assert.rejects(kaibo.recall(""), TypeError);
    await assert.rejects(kaibo.job(undefined), TypeError);
    await assert.rejects(
      kaibo.remember({ stream: "s", events: [{ idempotencyKey: "k", kind: "tool_call", payload: { tool: "t", output: Number.NaN } }] }),
      /no JSON form/,
    );
    assert.equal(calls.length, 0);
  });

  test("forget sends a subject as its one selector", async () => {
    const { fetch, calls } = scripted(json(200, { dryRun: true, previewToken: "t", memories: [], eventIds: [] }));
    await client(fetch).forget({ subject: "Release target", reason: "asked", dryRun: true });
    assert.deepEqual(calls[0].body, { subject: "Release target", reason: "asked", dryRun: true });
  });

  test("forget takes a recalled item as its memoryId", async () => {
    const { fetch, calls } = scripted(json(200, { dryRun: true, previewToken: "t", memories: [], eventIds: [] }));
    await client(fetch).forget({ memoryId: ANSWER.items[0], reason: "wrong", dryRun: true });
    assert.deepEqual(calls[0].body, { memoryId: "mem_1", reason: "wrong", dryRun: true });
  });

  test("waitForJob polls until done; failed and too slow throw", async () => {
    const job = (status) => json(200, { jobId: "job_1", status, eventIds: [], memoryIds: [], createdAt: "", updatedAt: "" });
    const { fetch, calls } = scripted(job("queued"), job("structuring"), job("done"));
    const done = await client(fetch).waitForJob({ jobId: "job_1", events: [] }, { intervalMs: 1 });
    assert.equal(done.status, "done");
    assert.equal(calls.length, 3);
    assert.equal(calls[0].url, `${BASE}/v1/jobs/job_1`);
    const failed = scripted(json(200, { jobId: "job_1", status: "failed", error: "ValueError" }));
    await assert.rejects(client(failed.fetch).waitForJob("job_1"), { code: "job_failed" });
    const stuck = scripted(job("queued"));
    await assert.rejects(client(stuck.fetch).waitForJob("job_1", { timeoutMs: 30, intervalMs: 5 }), (error) => {
      assert.equal(error.code, "job_timeout");
      assert.equal(error.details.job.status, "queued");
      return true;
    });
  });

  test("events follow nextFromSeq, and refuse one that does not advance", async () => {
    const event = (seq) => ({ seq });
    const pages = scripted(
      json(200, { events: [event(1), event(2)], nextFromSeq: 3 }),
      json(200, { events: [event(3)], nextFromSeq: null }),
    );
    const seqs = [];
    for await (const one of client(pages.fetch).events("chat", { limit: 2 })) seqs.push(one.seq);
    assert.deepEqual(seqs, [1, 2, 3]);
    assert.deepEqual(
      pages.calls.map((call) => new URL(call.url).search),
      ["?limit=2&fromSeq=1", "?limit=2&fromSeq=3"],
    );
    const looping = scripted(json(200, { events: [event(1)], nextFromSeq: 1 }));
    await assert.rejects(async () => {
      for await (const one of client(looping.fetch).events("chat")) void one;
    }, { code: "invalid_response" });
  });

  test("the constructor: environment fallbacks, checks, and the key never shown", () => {
    const saved = { url: process.env.KAIBO_URL, key: process.env.KAIBO_API_KEY, endpoint: process.env.KAIBO_ENDPOINT };
    try {
      process.env.KAIBO_URL = "http://from-env:3000/";
      process.env.KAIBO_API_KEY = "kb_from_env";
      const kaibo = new Kaibo();
      assert.equal(kaibo.baseUrl, "http://from-env:3000");
      assert.ok(!inspect(kaibo).includes("kb_from_env"));
      assert.ok(!JSON.stringify(kaibo).includes("kb_from_env"));
      delete process.env.KAIBO_URL;
      process.env.KAIBO_ENDPOINT = "http://endpoint:3000";
      assert.equal(new KaiboClient().baseUrl, "http://endpoint:3000");
      delete process.env.KAIBO_ENDPOINT;
      assert.throws(() => new Kaibo(), /baseUrl/);
      delete process.env.KAIBO_API_KEY;
      assert.throws(() => new Kaibo({ baseUrl: BASE }), /apiKey/);
      assert.throws(() => new Kaibo({ baseUrl: "ftp://x", apiKey: "k" }), /http/);
      assert.throws(() => new Kaibo({ baseUrl: "http://x/?a=1", apiKey: "k" }), /query/);
      assert.throws(() => new Kaibo({ baseUrl: "not a url", apiKey: "k" }), /not a URL/);
      assert.throws(() => new Kaibo({ baseUrl: BASE, apiKey: "k", timeoutMs: 0 }), /timeoutMs/);
    } finally {
      for (const [name, value] of [["KAIBO_URL", saved.url], ["KAIBO_API_KEY", saved.key], ["KAIBO_ENDPOINT", saved.endpoint]]) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});

describe("recallStream", () => {
  const candidates = { candidates: [{ memoryId: "mem_1", type: "fact", score: 1.2, validFrom: "x" }] };
  const packed = { items: ANSWER.items, usedTokens: 19 };

  test("yields candidates, packed and final (a RecallPack), however the bytes are split", async () => {
    const text = `: a comment\r\n${sse("candidates", candidates)}${sse("packed", packed)}`.replaceAll("\n\n", "\r\n\r\n") +
      sse("final", ANSWER);
    for (const size of [1, 2, 7, text.length]) {
      const chunks = [];
      for (let at = 0; at < text.length; at += size) chunks.push(text.slice(at, at + size));
      const { response } = streamed(chunks);
      const { fetch, calls } = scripted(() => response);
      const seen = [];
      for await (const event of client(fetch).recallStream("q", { budget: 30 })) seen.push(event);
      assert.deepEqual(
        seen.map((event) => event.event),
        ["candidates", "packed", "final"],
      );
      assert.deepEqual(seen[0].data, candidates);
      assert.deepEqual(seen[1].data, packed);
      assert.ok(seen[2].data instanceof RecallPack);
      assert.equal(seen[2].data.top.memoryId, "mem_1");
      assert.equal(calls[0].init.headers.Accept, "text/event-stream");
      assert.deepEqual(calls[0].body, { question: "q", budget: 30 });
    }
  });

  test("an event this version does not know is passed on with its name and data, as the Python client does", async () => {
    const progress = { step: 2, of: 3 };
    const unnamed = "data: {\"note\": \"no event line\"}\n\n"; // an event without a name is a "message"
    const { response } = streamed([sse("candidates", candidates), sse("progress", progress), unnamed, sse("final", ANSWER)]);
    const { fetch } = scripted(() => response);
    const seen = [];
    for await (const event of client(fetch).recallStream("q")) seen.push(event);
    assert.deepEqual(
      seen.map((event) => event.event),
      ["candidates", "progress", "message", "final"],
    );
    assert.deepEqual(seen[1].data, progress);
    assert.deepEqual(seen[2].data, { note: "no event line" });
    assert.ok(seen[3].data instanceof RecallPack);
    const notAnObject = streamed([sse("progress", [1, 2]), sse("final", ANSWER)]);
    await assert.rejects(async () => {
      for await (const event of client(scripted(() => notAnObject.response).fetch).recallStream("q")) void event;
    }, { code: "invalid_response" });
  });

  test("leaving the loop early cancels the body", async () => {
    const { response, state } = streamed([sse("candidates", candidates), sse("packed", packed), sse("final", ANSWER)]);
    const { fetch } = scripted(() => response);
    for await (const event of client(fetch).recallStream("q")) {
      assert.equal(event.event, "candidates");
      break;
    }
    assert.equal(state.cancelled, true);
  });

  test("an error event, a stream without final, and an answer that is not a stream throw", async () => {
    const drain = async (kaibo) => {
      for await (const event of kaibo.recallStream("q")) void event;
    };
    const failing = streamed([sse("candidates", candidates), sse("error", { error: { code: "internal_error", message: "boom" } })]);
    await assert.rejects(drain(client(scripted(() => failing.response).fetch)), { code: "internal_error", message: "boom" });
    const cut = streamed([sse("candidates", candidates), "event: final\ndata: {\"items\""]);
    await assert.rejects(drain(client(scripted(() => cut.response).fetch)), { code: "stream_incomplete" });
    const plain = streamed([JSON.stringify(ANSWER)], { contentType: "application/json" });
    await assert.rejects(drain(client(scripted(() => plain.response).fetch)), { code: "invalid_response" });
  });

  test("an error answer before the stream is a KaiboError, and a 429 is retried", async () => {
    const ok = streamed([sse("final", ANSWER)]);
    const { fetch, calls } = scripted(apiError(429, "rate_limited", {}, { "Retry-After": "0" }), () => ok.response);
    const events = [];
    for await (const event of client(fetch).recallStream("q")) events.push(event.event);
    assert.deepEqual(events, ["final"]);
    assert.equal(calls.length, 2);
    const denied = scripted(apiError(401, "unauthorized"));
    await assert.rejects(async () => {
      for await (const event of client(denied.fetch).recallStream("q")) void event;
    }, { status: 401, code: "unauthorized" });
  });
});

describe("webhooks, admin and any route", () => {
  const noContent = () => new Response(null, { status: 204 });
  const hook = { id: "wh_1", url: "https://example.com/h", events: ["memory.forgotten"], description: "", createdAt: "t", status: "active" };

  test("each webhook call sends its route once, and reads its answer", async () => {
    const { fetch, calls } = scripted(
      json(201, { ...hook, secret: "whsec_x" }),
      json(200, { webhooks: [hook] }),
      json(200, hook),
      json(200, { id: "wh_1", secret: "whsec_y", previousSecretValidUntil: "t" }),
      json(202, { eventId: "msg_1", seq: 4 }),
      json(200, { deliveries: [{ eventId: "msg_1", outcome: "delivered" }] }),
      noContent(),
    );
    const kaibo = client(fetch);
    assert.equal((await kaibo.createWebhook({ url: hook.url, events: hook.events })).secret, "whsec_x");
    assert.deepEqual(await kaibo.webhooks(), [hook]);
    assert.equal((await kaibo.webhook("wh_1")).status, "active");
    assert.equal((await kaibo.rotateWebhookSecret("wh_1")).secret, "whsec_y");
    assert.deepEqual(await kaibo.testWebhook("wh_1"), { eventId: "msg_1", seq: 4 });
    assert.equal((await kaibo.webhookDeliveries("wh_1", { limit: 5 }))[0].outcome, "delivered");
    assert.equal(await kaibo.deleteWebhook("wh_1"), undefined);
    assert.deepEqual(
      calls.map(({ url, init }) => `${init.method} ${url.slice(BASE.length)}`),
      [
        "POST /v1/webhooks",
        "GET /v1/webhooks",
        "GET /v1/webhooks/wh_1",
        "POST /v1/webhooks/wh_1/rotate-secret",
        "POST /v1/webhooks/wh_1/test",
        "GET /v1/webhooks/wh_1/deliveries?limit=5",
        "DELETE /v1/webhooks/wh_1",
      ],
    );
    assert.deepEqual(calls[0].body, { url: hook.url, events: hook.events });
  });

  test("a 503 on creating a webhook or a key is not sent again; on listing them it is", async () => {
    for (const call of [(k) => k.createWebhook({ url: hook.url, events: hook.events }), (k) => k.createKey("prj_1")]) {
      const { fetch, calls } = scripted(apiError(503, "unavailable"), json(201, hook));
      await assert.rejects(call(client(fetch, { maxRetries: 2 })), { status: 503 });
      assert.equal(calls.length, 1);
    }
    const { fetch, calls } = scripted(apiError(503, "unavailable"), json(200, { webhooks: [] }));
    assert.deepEqual(await client(fetch, { maxRetries: 2 }).webhooks(), []);
    assert.equal(calls.length, 2);
  });

  test("admin calls: a project, a key with the route's default scopes or the ones asked for, a revoke", async () => {
    const { fetch, calls } = scripted(
      json(201, { projectId: "prj_1", keyId: "key_1", apiKey: "kb_1", scopes: ["read", "write"], timeZone: "UTC" }),
      json(201, { keyId: "key_2", apiKey: "kb_2", scopes: ["read", "write"] }),
      json(201, { keyId: "key_3", apiKey: "kb_3", scopes: ["read"] }),
      noContent(),
    );
    const kaibo = client(fetch);
    assert.equal((await kaibo.createProject({ name: "support bot", timeZone: "Europe/Berlin" })).projectId, "prj_1");
    await kaibo.createKey("prj_1");
    await kaibo.createKey("prj_1", { scopes: ["read"] });
    assert.equal(await kaibo.revokeKey("key_3"), undefined);
    assert.deepEqual(
      calls.map(({ url, init, body }) => [init.method, url.slice(BASE.length), body]),
      [
        ["POST", "/v1/admin/projects", { name: "support bot", timeZone: "Europe/Berlin" }],
        ["POST", "/v1/admin/projects/prj_1/keys", {}],
        ["POST", "/v1/admin/projects/prj_1/keys", { scopes: ["read"] }],
        ["DELETE", "/v1/admin/keys/key_3", undefined],
      ],
    );
  });

  test("request reaches any route: JSON, undefined for 204, errors as KaiboError", async () => {
    const { fetch, calls } = scripted(json(200, { webhooks: [] }), noContent(), apiError(404, "webhook_not_found"));
    const kaibo = client(fetch);
    assert.deepEqual(await kaibo.request("GET", "/v1/webhooks", { query: { limit: 3 } }), { webhooks: [] });
    assert.equal(await kaibo.request("delete", "/v1/webhooks/wh_1"), undefined);
    await assert.rejects(kaibo.request("GET", "/v1/webhooks/wh_2"), { status: 404, code: "webhook_not_found" });
    assert.deepEqual(calls.map(({ url, init }) => `${init.method} ${url.slice(BASE.length)}`), [
      "GET /v1/webhooks?limit=3",
      "DELETE /v1/webhooks/wh_1",
      "GET /v1/webhooks/wh_2",
    ]);
    await assert.rejects(kaibo.request("GET", "v1/webhooks"), TypeError);
    await assert.rejects(kaibo.webhook(""), TypeError);
  });
});

describe("verifyWebhook", () => {
  // Signed by the service's own signer (kaibo_core.core.webhook_signing), during a rotation: two secrets.
  const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const other = "whsec_dGhlIG90aGVyIHNlY3JldCBvZiB0aGUgd2ViaG9vaw==";
  const body = '{"id":"msg_1","type":"webhook.test","data":{"webhookId":"wh_1"}}';
  const at = 1767225600;
  const headers = {
    "Webhook-Id": "msg_1",
    "webhook-timestamp": String(at),
    "webhook-signature":
      "v1,70CVnFPl3iw+zgazgG8M8ksZYZlnT8drU/m5sllIPS8= v1,b0JeCrEwGi0Jci1ZyDDXqjnc7xsyvr/tMINBSU42u10=",
  };

  test("a delivery signed with either secret of a rotation verifies, as a string, bytes or Headers", async () => {
    assert.equal(await verifyWebhook(secret, headers, body, { now: at }), true);
    assert.equal(await verifyWebhook(other, headers, body, { now: at + 299 }), true);
    assert.equal(await verifyWebhook(secret, new Headers(headers), new TextEncoder().encode(body), { now: at }), true);
  });

  test("a changed body, id or signature, another secret, or a timestamp too far away does not", async () => {
    const unknown = "whsec_" + btoa("some other secret entirely");
    assert.equal(await verifyWebhook(secret, headers, body.replace("wh_1", "wh_2"), { now: at }), false);
    assert.equal(await verifyWebhook(secret, { ...headers, "Webhook-Id": "msg_2" }, body, { now: at }), false);
    assert.equal(await verifyWebhook(unknown, headers, body, { now: at }), false);
    assert.equal(await verifyWebhook(secret, headers, body, { now: at + 301 }), false);
    assert.equal(await verifyWebhook(secret, headers, body, { now: at - 301 }), false);
    assert.equal(await verifyWebhook(secret, { ...headers, "webhook-signature": "v2,abc v1,%%%" }, body, { now: at }), false);
    assert.equal(await verifyWebhook(secret, {}, body, { now: at }), false);
  });

  test("a malformed secret throws", async () => {
    await assert.rejects(verifyWebhook("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", headers, body), TypeError);
    await assert.rejects(verifyWebhook("whsec_not base64!", headers, body), TypeError);
  });
});

describe("SseParser", () => {
  test("line ends, comments, multi-line data, ids, retry, a BOM, and an unterminated event dropped", () => {
    const parser = new SseParser();
    const events = [
      ...parser.feed("\uFEFFevent: a\r"),
      ...parser.feed("\ndata: one\rdata:two\n: note\nid: 7\nretry: 150\n\n"),
      ...parser.feed("data\n\nevent: lost\ndata: x"),
      ...parser.close(),
    ];
    assert.deepEqual(events, [
      { event: "a", data: "one\ntwo", id: "7", retry: 150 },
      { event: "message", data: "", id: "7", retry: 150 },
    ]);
  });

  test("an event without data is not dispatched, and its type does not leak", () => {
    const parser = new SseParser();
    assert.deepEqual(parser.feed("event: empty\n\ndata: d\n\n"), [{ event: "message", data: "d", id: "", retry: undefined }]);
  });
});
