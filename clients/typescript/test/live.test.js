// The SDK against a running Kaibo (the local stack: `make run`, or the pytest test
// tests/integration/test_typescript_sdk.py, which starts one): KAIBO_URL (or KAIBO_ENDPOINT) and
// KAIBO_API_KEY name it; without them these tests are skipped. Every answer is also checked
// against the OpenAPI document's schemas, so the generated types are checked against the service.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { Kaibo, KaiboError, RecallPack } from "../src/index.js";
import { conformanceProblems } from "../scripts/conformance.mjs";

const baseUrl = process.env.KAIBO_URL || process.env.KAIBO_ENDPOINT;
const apiKey = process.env.KAIBO_API_KEY;
const adminKey = process.env.KAIBO_ADMIN_KEY;
const skip = baseUrl && apiKey ? false : "no KAIBO_URL and KAIBO_API_KEY: start a stack (make run) and set them";

/** A word of this run only: the tests share a project with whatever ran before. */
const run = Array.from({ length: 8 }, () => String.fromCharCode(97 + Math.floor(Math.random() * 26))).join("");
const ZERO_HASH = "0".repeat(64);
const ABSTAIN_REASONS = ["no_terms", "no_match", "nothing_valid_at_asof", "below_threshold", "budget_too_small"];

function conforms(value, schema) {
  assert.deepEqual(conformanceProblems(value, schema), [], `the answer does not fit ${schema}`);
}

const message = (key, text, extra = {}) => ({
  idempotencyKey: `${run}-${key}`,
  kind: "message",
  payload: { role: "user", text },
  ...extra,
});

describe("the SDK against a running Kaibo", { skip, concurrency: false }, () => {
  const kaibo = skip ? undefined : new Kaibo({ baseUrl, apiKey, timeoutMs: 60_000 });

  test("remember, wait for the job, recall a pack with items, top and citations", async () => {
    const stream = `ts-${run}-remember`;
    const remembered = await kaibo.remember({
      stream,
      events: [message("pw", `The staging database password of ${run} rotates every Tuesday`)],
    });
    conforms(remembered, "RememberResponse");
    assert.equal(remembered.events.length, 1);
    const [event] = remembered.events;
    assert.equal(event.seq, 1);
    assert.equal(event.prevHash, ZERO_HASH);
    assert.equal(event.replayed, false);
    assert.equal(remembered.memories[0].status, "provisional");

    const job = await kaibo.waitForJob(remembered, { timeoutMs: 90_000 });
    conforms(job, "JobOut");
    assert.equal(job.status, "done");
    assert.deepEqual(job.eventIds, [event.id]);
    assert.ok(job.memoryIds.length >= 1);

    const pack = await kaibo.recall(`When does the ${run} staging password rotate?`, { streams: [stream] });
    assert.ok(pack instanceof RecallPack);
    conforms(pack, "RecallResponse");
    assert.equal(pack.abstained, false);
    assert.ok(pack.items.length >= 1);
    assert.equal(pack.top, pack.items[0]);
    assert.ok(job.memoryIds.includes(pack.top.memoryId), "recall answers from the structured memories");
    assert.ok(pack.usedTokens <= pack.budget);
    assert.deepEqual(pack.citations, [{ eventId: event.id, stream, seq: 1, hash: event.hash }]);

    const memory = await kaibo.memory(pack.top);
    conforms(memory, "MemoryOut");
    assert.equal(memory.status, "active");
    assert.deepEqual(memory.sourceEventIds, [event.id]);

    const again = await kaibo.remember({ stream, events: [message("pw", `The staging database password of ${run} rotates every Tuesday`)] });
    assert.equal(again.events[0].replayed, true, "the same idempotency key appends nothing");
    assert.equal(again.events[0].id, event.id);
  });

  test("the concepts document's explain example, as written", async () => {
    const stream = `ts-${run}-explain`;
    const remembered = await kaibo.remember({
      stream,
      events: [
        message("release", `Move the ${run} release target from July 13 to July 17`, {
          occurredAt: "2026-06-02T09:30:00Z",
        }),
      ],
      wait: true,
    });
    if (remembered.job?.status !== "done") await kaibo.waitForJob(remembered, { timeoutMs: 90_000 });
    const pack = await kaibo.recall(`When is the ${run} release target?`, { streams: [stream] });
    assert.ok(pack.top, "recall found the release target");

    const printed = [];
    const log = console.log;
    console.log = (...args) => printed.push(args);
    let why;
    try {
      // From the concepts document, verbatim:
      why = await kaibo.explain(pack.top); for (const version of why.chain) console.log(version.status, version.validFrom, version.content);
    } finally {
      console.log = log;
    }
    conforms(why, "ExplainResponse");
    assert.equal(why.memoryId, pack.top.memoryId);
    assert.ok(printed.length >= 2, "the chain holds the provisional memory and the structured one");
    assert.deepEqual(printed[0], [
      "replaced",
      "2026-06-02T09:30:00.000Z",
      `Move the ${run} release target from July 13 to July 17`,
    ]);
    const [status, validFrom, content] = printed.at(-1);
    assert.equal(status, "active");
    assert.equal(validFrom, "2026-06-02T09:30:00.000Z");
    assert.match(content, /July 17/);
    assert.equal(why.chain.at(-1).memoryId, pack.top.memoryId);
    assert.equal(why.chain[0].sourceEvents[0].eventId, remembered.events[0].id);
  });

  test("recall as server-sent events: candidates, packed, final", async () => {
    const stream = `ts-${run}-stream`;
    await kaibo.remember({
      stream,
      events: [message("boat", `The ${run} boathouse is painted blue`), message("dock", `The ${run} dock opens at nine`)],
      wait: true,
    });
    const seen = [];
    for await (const event of kaibo.recallStream(`What colour is the ${run} boathouse?`, { streams: [stream] })) {
      seen.push(event);
    }
    assert.deepEqual(
      seen.map((event) => event.event),
      ["candidates", "packed", "final"],
    );
    const [candidates, packed, final] = seen.map((event) => event.data);
    assert.ok(candidates.candidates.length >= 1);
    for (const candidate of candidates.candidates) {
      assert.deepEqual(Object.keys(candidate).sort(), ["memoryId", "score", "type", "validFrom"]);
    }
    for (const item of packed.items) conforms(item, "RecallItem");
    assert.ok(final instanceof RecallPack);
    conforms(final, "RecallResponse");
    assert.deepEqual(final.items, packed.items);
    assert.equal(final.usedTokens, packed.usedTokens);
    assert.match(final.top.text, /blue/);

    for await (const event of kaibo.recallStream(`${run} boathouse`, { streams: [stream] })) {
      assert.equal(event.event, "candidates");
      break; // leaving early closes the stream; the client goes on working
    }
    const pack = await kaibo.recall(`${run} dock`, { streams: [stream] });
    assert.match(pack.top.text, /nine/);
  });

  test("forget: a dry run, then the real call with its previewToken; a stale token is refused", async () => {
    const stream = `ts-${run}-forget`;
    await kaibo.remember({ stream, events: [message("code", `The ${run} gate code is 7781`)], wait: true });
    const query = `${run} gate code`;
    const preview = await kaibo.forget({ query, reason: "the user asked", dryRun: true });
    conforms(preview, "ForgetResponse");
    assert.equal(preview.dryRun, true);
    assert.equal(preview.receipt, undefined);
    assert.match(preview.previewToken, /^[0-9a-f]{64}$/);
    assert.ok(preview.memories.length >= 1);
    assert.ok(preview.memories.every((memory) => typeof memory.content === "string"));
    assert.ok((await kaibo.recall(query, { streams: [stream] })).top, "a dry run changes nothing");

    const done = await kaibo.forget({ query, reason: "the user asked", previewToken: preview.previewToken });
    conforms(done, "ForgetResponse");
    assert.equal(done.dryRun, false);
    assert.deepEqual(done.receipt.memoryIds.slice().sort(), preview.memories.map((m) => m.id).sort());
    assert.equal(typeof done.reasonSalt, "string");
    const receipt = await kaibo.receipt(done.receipt.id);
    conforms(receipt, "ReceiptStateOut");
    assert.equal(receipt.state, "tombstoned");
    const entries = [];
    for await (const entry of kaibo.ledger()) entries.push(entry);
    for (const entry of entries) conforms(entry, "ReceiptOut");
    assert.ok(entries.some((entry) => entry.id === done.receipt.id));
    const after = await kaibo.recall(query, { streams: [stream] });
    assert.equal(after.abstained, true, "forgotten memories are not recalled");

    await kaibo.remember({ stream, events: [message("key", `The ${run} shed key hangs by the door`)], wait: true });
    const stale = await kaibo.forget({ query: `${run} shed key`, reason: "tidy", dryRun: true });
    await kaibo.remember({ stream, events: [message("key2", `The ${run} shed key moved to the drawer`)], wait: true });
    await assert.rejects(
      kaibo.forget({ query: `${run} shed key`, reason: "tidy", previewToken: stale.previewToken }),
      (error) => {
        assert.ok(error instanceof KaiboError);
        assert.equal(error.status, 409);
        assert.equal(error.code, "preview_changed");
        assert.match(String(error.details.previewToken), /^[0-9a-f]{64}$/);
        return true;
      },
    );
  });

  test("events, page by page, hash-chained", async () => {
    const stream = `ts-${run}-events`;
    const texts = ["one", "two", "three", "four", "five"].map((word) => `Note ${word} of ${run}`);
    const remembered = await kaibo.remember({ stream, events: texts.map((text, i) => message(`ev${i}`, text)) });
    assert.deepEqual(
      remembered.events.map((event) => event.seq),
      [1, 2, 3, 4, 5],
    );

    const first = await kaibo.eventsPage(stream, { limit: 2 });
    conforms(first, "EventsPage");
    assert.deepEqual(
      first.events.map((event) => event.seq),
      [1, 2],
    );
    assert.equal(first.nextFromSeq, 3);

    const events = [];
    for await (const event of kaibo.events(stream, { limit: 2 })) events.push(event);
    assert.deepEqual(
      events.map((event) => event.seq),
      [1, 2, 3, 4, 5],
    );
    events.forEach((event, i) => {
      conforms(event, "StoredEventOut");
      assert.equal(event.prevHash, i === 0 ? ZERO_HASH : events[i - 1].hash);
      assert.equal(event.hash, remembered.events[i].hash);
      assert.equal(event.payload.text, texts[i]);
    });
    const tail = [];
    for await (const event of kaibo.events(stream, { fromSeq: 4 })) tail.push(event.seq);
    assert.deepEqual(tail, [4, 5]);

    const heads = [];
    for await (const head of kaibo.streams()) heads.push(head);
    assert.deepEqual(
      heads.find((head) => head.stream === stream),
      { stream, seq: 5, hash: events[4].hash },
    );
  });

  test("errors: a bad key, an unknown id, an invalid request", async () => {
    const stranger = new Kaibo({ baseUrl, apiKey: "kb_not_a_key" });
    await assert.rejects(stranger.recall("anything"), (error) => {
      assert.ok(error instanceof KaiboError);
      assert.equal(error.status, 401);
      assert.equal(error.code, "unauthorized");
      assert.ok(error.message.length > 0);
      assert.equal(typeof error.requestId, "string");
      return true;
    });
    await assert.rejects(kaibo.explain("mem_does_not_exist"), { status: 404, code: "memory_not_found" });
    await assert.rejects(kaibo.job("job_does_not_exist"), { status: 404, code: "job_not_found" });
    await assert.rejects(kaibo.recall("anything", { budget: 0 }), (error) => {
      assert.equal(error.status, 422);
      assert.equal(error.code, "invalid_request");
      assert.equal(error.details.errors[0].field, "budget");
      return true;
    });
  });

  test("webhooks: create (the secret once), list, get, rotate, deliveries, delete", async () => {
    // .invalid never resolves: nothing is delivered anywhere while the webhook exists.
    const url = `https://${run}.kaibo-sdk-test.invalid/hook`;
    const created = await kaibo.createWebhook({ url, events: ["memory.forgotten"], description: run });
    conforms(created, "WebhookCreated");
    assert.match(created.secret, /^whsec_/);
    const listed = await kaibo.webhooks();
    const mine = listed.find((hook) => hook.id === created.id);
    assert.equal(mine.url, url);
    assert.equal("secret" in mine, false, "a secret is shown once only");
    conforms(await kaibo.webhook(created.id), "WebhookOut");
    const rotated = await kaibo.rotateWebhookSecret(created.id);
    conforms(rotated, "SecretRotated");
    assert.notEqual(rotated.secret, created.secret);
    assert.deepEqual(await kaibo.webhookDeliveries(created.id, { limit: 5 }), []);
    assert.equal(await kaibo.deleteWebhook(created.id), undefined);
    await assert.rejects(kaibo.webhook(created.id), { status: 404, code: "webhook_not_found" });
    const after = await kaibo.request("GET", "/v1/webhooks");
    assert.equal(after.webhooks.some((hook) => hook.id === created.id), false);
  });

  test("admin: a project, a key of it that works, revoked", { skip: adminKey ? false : "no KAIBO_ADMIN_KEY" }, async () => {
    const admin = new Kaibo({ baseUrl, apiKey: adminKey });
    const project = await admin.createProject({ name: `ts-${run}`, timeZone: "Europe/Berlin" });
    conforms(project, "CreateProjectResponse");
    const key = await admin.createKey(project.projectId, { scopes: ["read"] });
    conforms(key, "CreateKeyResponse");
    assert.deepEqual(key.scopes, ["read"]);
    const reader = new Kaibo({ baseUrl, apiKey: key.apiKey });
    assert.equal((await reader.recall(`${run} anything`)).abstained, true);
    await admin.revokeKey(key.keyId);
    await assert.rejects(reader.recall(`${run} anything`), { status: 401, code: "unauthorized" });
  });

  test("abstain: nothing citable is an explicit abstain with its reason", async () => {
    const nothing = await kaibo.recall(`${run}zebra ${run}xylophone`);
    conforms(nothing, "RecallResponse");
    assert.equal(nothing.abstained, true);
    assert.equal(nothing.abstain.abstained, true);
    assert.equal(nothing.abstainReason, "no_match");
    assert.ok(ABSTAIN_REASONS.includes(nothing.abstain.reason));
    assert.equal(typeof nothing.abstain.message, "string");
    assert.deepEqual(nothing.items, []);
    assert.equal(nothing.top, undefined);
    assert.deepEqual(nothing.citations, []);
    await assert.rejects(kaibo.explain(nothing.top), TypeError);

    assert.equal((await kaibo.recall("the of a")).abstainReason, "no_terms");
    const stream = `ts-${run}-abstain`;
    await kaibo.remember({ stream, events: [message("long", `The ${run} lantern needs new wicks every winter`)], wait: true });
    const tight = await kaibo.recall(`${run} lantern wicks`, { streams: [stream], budget: 1 });
    assert.equal(tight.abstainReason, "budget_too_small");
  });
});
