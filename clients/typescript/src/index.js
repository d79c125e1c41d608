// The Kaibo HTTP API for JavaScript and TypeScript: ESM, no dependencies, over the global
// `fetch` (Node 20+, Deno, Bun, browsers). Types: ./index.d.ts, with the API's shapes in
// ./types.d.ts, generated from the OpenAPI document the service serves.

import { SseParser } from "./sse.js";

export { SseParser } from "./sse.js";
export { verifyWebhook } from "./webhooks.js";

export const VERSION = "0.1.0";
const USER_AGENT = `kaibo-typescript/${VERSION}`;
const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_RETRIES = 3;
/** A Retry-After longer than this is cut to it (as the Python SDK does). */
const MAX_RETRY_AFTER_MS = 30_000;
const BACKOFF_BASE_MS = 250;
const BACKOFF_CAP_MS = 8_000;
const DEFAULT_JOB_WAIT_MS = 60_000;
const DEFAULT_JOB_POLL_MS = 250;
const MAX_JOB_POLL_MS = 2_000;
/** Statuses retried for idempotent calls (429 is retried for every call, but for RACE_CODES). */
const RETRIED_STATUSES = new Set([500, 502, 503, 504]);
/**
 * 429 codes of a transaction that kept racing, or of a throttled read after a write (table_busy):
 * its first attempt, or the call's earlier write, may have committed (docs/api.md),
 * so, like a 5xx, they are retried for idempotent calls only (a webhook or project created twice,
 * an unkeyed forget answering an empty set instead of its receipt). remember's stream_busy is not
 * among them: remember is idempotent; nor is kms_busy: every route calls KMS before it writes.
 */
const RACE_CODES = new Set(["ledger_busy", "project_busy", "table_busy", "transaction_busy"]);
const JSON_TYPE = "application/json";
const EVENT_STREAM_TYPE = "text/event-stream";
const SELECTORS = ["memoryId", "query", "stream", "subject"];

/**
 * Anything that kept a call from getting its answer. `status` is the HTTP status (0 when there
 * was no HTTP answer), `code` the API's stable snake_case code (or one of the client's own:
 * network_error, timeout, aborted, invalid_response, stream_incomplete, redirect_refused,
 * job_failed, job_timeout, http_<status> for an answer without the API's error shape).
 */
export class KaiboError extends Error {
  constructor(message, { status = 0, code = "error", details = {}, requestId, retryAfter, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "KaiboError";
    this.status = status;
    this.code = code;
    this.details = details;
    this.requestId = requestId;
    this.retryAfter = retryAfter;
  }
}

/** What recall answers: the API's document, plus `top`, `abstained`, `abstainReason` and `citations`. */
export class RecallPack {
  constructor(answer) {
    // Own properties, not assignment: a field the API adds under a getter's name shadows it.
    for (const [name, value] of Object.entries(answer)) {
      Object.defineProperty(this, name, { value, enumerable: true, writable: true, configurable: true });
    }
  }

  /** The best item (items are ordered best first); undefined when recall abstained. */
  get top() {
    return this.items[0];
  }

  get abstained() {
    return this.abstain?.abstained === true;
  }

  /** Why recall abstained (no_terms, no_match, …); undefined when it did not. */
  get abstainReason() {
    return this.abstained ? this.abstain.reason : undefined;
  }

  /** Every event the items cite, once each, in the items' order. */
  get citations() {
    const seen = new Set();
    const citations = [];
    for (const item of this.items) {
      for (const citation of item.citations ?? []) {
        if (!seen.has(citation.eventId)) {
          seen.add(citation.eventId);
          citations.push(citation);
        }
      }
    }
    return citations;
  }
}

const env = (name) => globalThis.process?.env?.[name] || undefined;
const isObject = (value) => typeof value === "object" && value !== null && !Array.isArray(value);
const segment = (value) => encodeURIComponent(String(value));

function encodeJson(body) {
  return JSON.stringify(body, (key, value) => {
    if (typeof value === "number" && !Number.isFinite(value)) {
      throw new TypeError(`${value} (at ${JSON.stringify(key || "(the body)")}) has no JSON form`);
    }
    return value;
  });
}

function memoryIdOf(memory, what) {
  if (typeof memory === "string" && memory) return memory;
  if (isObject(memory)) {
    if (typeof memory.memoryId === "string" && memory.memoryId) return memory.memoryId;
    if (typeof memory.id === "string" && memory.id) return memory.id;
  }
  const hint =
    memory === undefined || memory === null
      ? " (pack.top is undefined when recall abstained: check pack.abstained first)"
      : "";
  throw new TypeError(`${what}() needs a memory id or a recalled item, got ${String(memory)}${hint}`);
}

function jobIdOf(job) {
  if (typeof job === "string" && job) return job;
  if (isObject(job) && typeof job.jobId === "string" && job.jobId) return job.jobId;
  throw new TypeError(`needs a job id or an object with a jobId, got ${String(job)}`);
}

/** Retry-After as seconds (delta-seconds or an HTTP date), else undefined. */
function retryAfterSeconds(value) {
  if (value === null || value === undefined || value.trim() === "") return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(value)) return Number(value);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - Date.now()) / 1000);
}

function backoffMs(attempt) {
  const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(aborted(signal));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted(signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function aborted(signal, what = "the call") {
  return new KaiboError(`${what} was aborted`, { code: "aborted", cause: signal?.reason });
}

/** One attempt's time limit, joined with the caller's AbortSignal. */
class Deadline {
  constructor(outer, ms) {
    this.outer = outer;
    this.ms = ms;
    this.timedOut = false;
    this.controller = new AbortController();
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.controller.abort(new Error(`no answer within ${ms} ms`));
    }, ms);
    if (outer?.aborted) this.controller.abort(outer.reason);
    else if (outer) {
      this.onAbort = () => this.controller.abort(outer.reason);
      outer.addEventListener("abort", this.onAbort, { once: true });
    }
  }

  get signal() {
    return this.controller.signal;
  }

  clear() {
    clearTimeout(this.timer);
    if (this.onAbort) this.outer.removeEventListener("abort", this.onAbort);
  }

  /** The KaiboError for an exception of fetch or of reading the body. */
  failure(error, what, baseUrl) {
    if (error instanceof KaiboError) return error;
    if (this.timedOut) {
      return new KaiboError(`${what}: no answer within ${this.ms} ms`, { code: "timeout", cause: error });
    }
    if (this.outer?.aborted) return aborted(this.outer, what);
    const reason = error?.cause?.code ?? error?.cause?.message ?? error?.message ?? String(error);
    return new KaiboError(`${what}: cannot reach ${baseUrl} (${reason})`, { code: "network_error", cause: error });
  }
}

async function errorFrom(response, what) {
  const { status, headers } = response;
  const requestId = headers.get("x-amzn-requestid") ?? headers.get("x-request-id") ?? undefined;
  const retryAfter = retryAfterSeconds(headers.get("retry-after"));
  if (status >= 300 && status < 400) {
    await response.body?.cancel().catch(() => {});
    const location = headers.get("location") ?? "elsewhere";
    return new KaiboError(
      `${what} redirects to ${location}; not followed (it would resend the key). Use the final URL as baseUrl.`,
      { status, code: "redirect_refused", requestId },
    );
  }
  return errorFromBody(status, await response.text(), { requestId, retryAfter });
}

/** The API's error shape {"error": {"code", "message", "details"}} as a KaiboError (else http_<status>). */
function errorFromBody(status, text, { requestId, retryAfter } = {}) {
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const error = isObject(parsed) ? parsed.error : undefined;
  if (isObject(error) && typeof error.code === "string") {
    const details = isObject(error.details) ? error.details : {};
    return new KaiboError(String(error.message ?? ""), {
      status,
      code: error.code,
      details,
      requestId: typeof details.requestId === "string" ? details.requestId : requestId,
      retryAfter,
    });
  }
  const message = text.trim().slice(0, 300) || `HTTP ${status} without an error body`;
  return new KaiboError(message, { status, code: `http_${status}`, requestId, retryAfter });
}

function invalid(what, problem, status = 200) {
  return new KaiboError(`${what}: ${problem}`, { status, code: "invalid_response" });
}

export class Kaibo {
  #apiKey;
  #fetch;

  /**
   * `baseUrl` (else KAIBO_URL, else KAIBO_ENDPOINT) is the API's root, e.g. http://127.0.0.1:3000
   * or https://<id>.execute-api.<region>.amazonaws.com/prod; `apiKey` (else KAIBO_API_KEY) a
   * project key. `timeoutMs` bounds each attempt of a call (default 30 s); `maxRetries` (default
   * 3) how often a 429, and for idempotent calls a 5xx, a network error or a transaction race's
   * 429 (RACE_CODES), is retried.
   */
  constructor(options = {}) {
    const baseUrl = options.baseUrl ?? env("KAIBO_URL") ?? env("KAIBO_ENDPOINT");
    if (!baseUrl) throw new TypeError("Kaibo needs a baseUrl (or KAIBO_URL in the environment)");
    let url;
    try {
      url = new URL(baseUrl);
    } catch {
      throw new TypeError(`Kaibo: baseUrl ${JSON.stringify(baseUrl)} is not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new TypeError(`Kaibo: baseUrl must be http(s), got ${JSON.stringify(baseUrl)}`);
    }
    if (url.search || url.hash) throw new TypeError("Kaibo: baseUrl must not carry a query or fragment");
    const apiKey = options.apiKey ?? env("KAIBO_API_KEY");
    if (!apiKey) throw new TypeError("Kaibo needs an apiKey (or KAIBO_API_KEY in the environment)");
    const fetchFunction = options.fetch ?? globalThis.fetch;
    if (typeof fetchFunction !== "function") throw new TypeError("Kaibo needs a fetch (Node 20+ has one)");
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) throw new TypeError("Kaibo: timeoutMs must be > 0");
    const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    if (!(Number.isInteger(maxRetries) && maxRetries >= 0)) {
      throw new TypeError("Kaibo: maxRetries must be an integer >= 0");
    }
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.timeoutMs = timeoutMs;
    this.maxRetries = maxRetries;
    this.#apiKey = apiKey;
    this.#fetch = fetchFunction;
  }

  // -- transport ---------------------------------------------------------------------------------

  /**
   * Send a request until it gets a 2xx: { response, deadline } (the caller reads the body, then
   * clears the deadline), or with `readText` { response, text }: the body read within the attempt,
   * so that a connection lost mid-body is retried like one lost before the status. 429 is retried
   * for every call, after its Retry-After (a RACE_CODES 429 only when `idempotent`); 5xx and
   * network errors only when `idempotent`.
   * Timeouts and aborts are not retried.
   */
  async #send(method, path, { body, query, idempotent, signal, timeoutMs, accept = JSON_TYPE, readText = false }) {
    const what = `${method} ${path}`;
    let url = this.baseUrl + path;
    if (query) {
      const params = new URLSearchParams();
      for (const [name, value] of Object.entries(query)) {
        if (value !== undefined && value !== null) params.set(name, String(value));
      }
      if ([...params].length > 0) url += `?${params}`;
    }
    const headers = { Accept: accept, Authorization: `Bearer ${this.#apiKey}`, "User-Agent": USER_AGENT };
    let payload;
    if (body !== undefined) {
      payload = encodeJson(body);
      headers["Content-Type"] = JSON_TYPE;
    }
    for (let attempt = 0; ; attempt += 1) {
      const deadline = new Deadline(signal, timeoutMs ?? this.timeoutMs);
      let response;
      let error;
      try {
        response = await this.#fetch(url, {
          method,
          headers,
          body: payload,
          signal: deadline.signal,
          redirect: "manual",
        });
        if (response.status >= 200 && response.status < 300) {
          if (!readText) return { response, deadline };
          const text = await response.text();
          deadline.clear();
          return { response, text };
        }
        error = await errorFrom(response, what);
      } catch (thrown) {
        error = deadline.failure(thrown, what, this.baseUrl);
      }
      deadline.clear();
      const retried =
        (error.status === 429 && (idempotent || !RACE_CODES.has(error.code))) ||
        (idempotent && (RETRIED_STATUSES.has(error.status) || error.code === "network_error"));
      if (!retried || attempt >= this.maxRetries) throw error;
      // A Retry-After past the cap (a used-up quota: an hour) is final: the caller reads error.retryAfter.
      if (error.retryAfter !== undefined && error.retryAfter * 1000 > MAX_RETRY_AFTER_MS) throw error;
      const waitMs = error.retryAfter === undefined ? backoffMs(attempt) : error.retryAfter * 1000;
      await sleep(waitMs, signal);
    }
  }

  /**
   * Any route: the parsed JSON answer, or undefined when the answer has no body (204). A 429 is
   * retried after its Retry-After (a transaction race's only as a 5xx is); a 5xx or a network error only for GET (`idempotent: true`
   * says a POST is safe to send twice). For routes this client does not wrap yet.
   */
  async request(method, path, { body, query, idempotent, signal, timeoutMs } = {}) {
    const verb = String(method).toUpperCase();
    if (typeof path !== "string" || !path.startsWith("/")) {
      throw new TypeError("request() needs a path starting with /");
    }
    const safe = idempotent ?? (verb === "GET" || verb === "HEAD");
    const what = `${verb} ${path}`;
    const options = { body, query, idempotent: safe, signal, timeoutMs, readText: true };
    const { response, text } = await this.#send(verb, path, options);
    if (text === "") return undefined;
    try {
      return JSON.parse(text);
    } catch {
      throw invalid(what, "the answer is not JSON", response.status);
    }
  }

  /** One call answering a JSON object. */
  async #json(method, path, options) {
    const what = `${method} ${path}`;
    const { response, text } = await this.#send(method, path, { ...options, readText: true });
    let answer;
    try {
      answer = JSON.parse(text);
    } catch {
      throw invalid(what, "the answer is not JSON", response.status);
    }
    if (!isObject(answer)) throw invalid(what, "the answer is not a JSON object", response.status);
    return answer;
  }

  // -- memory --------------------------------------------------------------------------------------

  /**
   * POST /v1/remember: append events (each with its idempotency key) to a stream. Retried like
   * every idempotent call: a key sent again returns the original event and appends nothing.
   */
  async remember(request, { signal, timeoutMs } = {}) {
    if (!isObject(request)) throw new TypeError("remember() needs { stream, events, wait? }");
    return this.#json("POST", "/v1/remember", { body: request, idempotent: true, signal, timeoutMs });
  }

  /** POST /v1/recall: a RecallPack (items best first, `top`, `abstain`, `citations`). */
  async recall(question, options = {}) {
    const { signal, timeoutMs, ...fields } = options;
    const body = recallBody(question, fields);
    const answer = await this.#json("POST", "/v1/recall", { body, idempotent: true, signal, timeoutMs });
    return packOf(answer, "POST /v1/recall", 200);
  }

  /**
   * POST /v1/recall with Accept: text/event-stream: { event, data } as each event arrives —
   * `candidates`, `packed`, then `final` (its data a RecallPack). An event this version does not
   * know (API.md: events may be added) is passed on as it came, as the Python client does. The
   * request is sent at the first iteration. An `error` event, or a stream that ends before `final`
   * (stream_incomplete), throws a KaiboError; so does an event whose data is not a JSON object
   * (invalid_response). Leaving the loop early closes the connection. `timeoutMs` bounds the whole
   * stream.
   */
  async *recallStream(question, options = {}) {
    const what = "POST /v1/recall (event stream)";
    const { signal, timeoutMs, ...fields } = options;
    const body = recallBody(question, fields);
    const { response, deadline } = await this.#send("POST", "/v1/recall", {
      body,
      idempotent: true,
      signal,
      timeoutMs,
      accept: EVENT_STREAM_TYPE,
    });
    const status = response.status;
    const requestId = response.headers.get("x-amzn-requestid") ?? undefined;
    let reader;
    try {
      const mediaType = (response.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
      if (mediaType !== EVENT_STREAM_TYPE || !response.body) {
        await response.body?.cancel().catch(() => {});
        throw invalid(what, `answered ${mediaType || "no content type"}, not ${EVENT_STREAM_TYPE}`, status);
      }
      reader = response.body.getReader();
      const decoder = new TextDecoder("utf-8");
      const parser = new SseParser();
      for (;;) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch (thrown) {
          const failure = deadline.failure(thrown, what, this.baseUrl);
          if (failure.code === "network_error") failure.message = `${what}: the event stream broke off`;
          throw failure;
        }
        const events = chunk.done
          ? parser.close(decoder.decode())
          : parser.feed(decoder.decode(chunk.value, { stream: true }));
        for (const event of events) {
          if (event.event === "error") {
            throw errorFromBody(status, event.data, { requestId });
          }
          let data;
          try {
            data = JSON.parse(event.data);
          } catch {
            data = undefined;
          }
          if (!isObject(data)) throw invalid(what, `event ${event.event} is not a JSON object`, status);
          if (event.event === "final") {
            yield { event: "final", data: packOf(data, what, status) };
            return;
          }
          yield { event: event.event, data };
        }
        if (chunk.done) break;
      }
      throw new KaiboError(`${what}: the event stream ended before final`, { status, code: "stream_incomplete" });
    } finally {
      deadline.clear();
      await reader?.cancel().catch(() => {});
    }
  }

  /**
   * POST /v1/explain: the versions that led to a memory, oldest first, each with its source
   * events. Takes a memory id or anything carrying one (a recalled item, `pack.top`, a memory).
   */
  async explain(memory, { signal, timeoutMs } = {}) {
    const memoryId = memoryIdOf(memory, "explain");
    return this.#json("POST", "/v1/explain", { body: { memoryId }, idempotent: true, signal, timeoutMs });
  }

  /** GET /v1/memories/{id}: one memory, in any status. */
  async memory(memory, { signal, timeoutMs } = {}) {
    const memoryId = memoryIdOf(memory, "memory");
    return this.#json("GET", `/v1/memories/${segment(memoryId)}`, { idempotent: true, signal, timeoutMs });
  }

  /** GET /v1/jobs/{id}: a structuring job (queued, structuring, done or failed). */
  async job(job, { signal, timeoutMs } = {}) {
    const jobId = jobIdOf(job);
    return this.#json("GET", `/v1/jobs/${segment(jobId)}`, { idempotent: true, signal, timeoutMs });
  }

  /**
   * Poll a job (an id, or what remember answered) until it is done: the job. Throws KaiboError
   * `job_failed` if it failed, `job_timeout` if it is not done within `timeoutMs` (default 60 s).
   */
  async waitForJob(job, { timeoutMs = DEFAULT_JOB_WAIT_MS, intervalMs = DEFAULT_JOB_POLL_MS, signal } = {}) {
    const jobId = jobIdOf(job);
    const deadline = Date.now() + timeoutMs;
    let interval = intervalMs;
    for (;;) {
      const current = await this.job(jobId, { signal });
      if (current.status === "done") return current;
      if (current.status === "failed") {
        throw new KaiboError(`job ${jobId} failed (${current.error ?? "no error named"})`, {
          code: "job_failed",
          details: { job: current },
        });
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new KaiboError(`job ${jobId} is still ${current.status} after ${timeoutMs} ms`, {
          code: "job_timeout",
          details: { job: current },
        });
      }
      await sleep(Math.min(interval, left), signal);
      interval = Math.min(interval * 1.5, MAX_JOB_POLL_MS);
    }
  }

  // -- forget ----------------------------------------------------------------------------------------

  /**
   * POST /v1/forget: exactly one of memoryId (or a recalled item), query, stream, subject; and a
   * reason.
   * `dryRun: true` returns the set and a previewToken and changes nothing; pass that token back
   * and the real call fails with 409 preview_changed if the set changed since. A real forget is
   * retried after a 5xx or a network error only with an `idempotencyKey`: sent again, it answers
   * the first call's receipt and reasonSalt (`replayed: true`) and writes no second ledger entry.
   */
  async forget(request, { signal, timeoutMs } = {}) {
    if (!isObject(request)) throw new TypeError("forget() needs { memoryId | query | stream | subject, reason }");
    const chosen = SELECTORS.filter((name) => request[name] !== undefined && request[name] !== null);
    if (chosen.length !== 1) throw new TypeError("forget() needs exactly one of memoryId, query, stream, subject");
    if (typeof request.reason !== "string" || !request.reason) throw new TypeError("forget() needs a reason");
    const body = { ...request };
    if (chosen[0] === "memoryId") body.memoryId = memoryIdOf(request.memoryId, "forget");
    const idempotent = request.dryRun === true || typeof request.idempotencyKey === "string";
    return this.#json("POST", "/v1/forget", { body, idempotent, signal, timeoutMs });
  }

  /**
   * GET /v1/receipts/{id}: a forget's ledger entry and its state (tombstoned, then purged; a purged
   * receipt may name in unlocatedEventIds the events the purge found in no stream: nothing stored).
   */
  async receipt(receiptId, { signal, timeoutMs } = {}) {
    return this.#json("GET", `/v1/receipts/${segment(receiptId)}`, { idempotent: true, signal, timeoutMs });
  }

  /** GET /v1/ledger, every page from `fromSeq` on: the deletion ledger's entries, oldest first. */
  async *ledger({ fromSeq = 1, signal, timeoutMs } = {}) {
    yield* this.#seqPages("/v1/ledger", "entries", fromSeq, {}, { signal, timeoutMs });
  }

  // -- webhooks (scope write; docs/webhooks.md) -------------------------------------------------------

  /**
   * POST /v1/webhooks: subscribe `url` to `events` (memory.forgotten, memory.structured,
   * memory.superseded, memory.canceled). The answer holds the signing `secret`, shown this once.
   * Not retried after a 5xx (a second webhook would be made).
   */
  async createWebhook(request, { signal, timeoutMs } = {}) {
    if (!isObject(request) || typeof request.url !== "string" || !Array.isArray(request.events)) {
      throw new TypeError("createWebhook() needs { url, events, description? }");
    }
    return this.#json("POST", "/v1/webhooks", { body: request, idempotent: false, signal, timeoutMs });
  }

  /** GET /v1/webhooks: every webhook of the project (never a secret). */
  async webhooks({ signal, timeoutMs } = {}) {
    const page = await this.#json("GET", "/v1/webhooks", { idempotent: true, signal, timeoutMs });
    if (!Array.isArray(page.webhooks)) throw invalid("GET /v1/webhooks", "webhooks is not a list");
    return page.webhooks;
  }

  /** GET /v1/webhooks/{id}: one webhook (status active or failing). */
  async webhook(webhookId, { signal, timeoutMs } = {}) {
    return this.#json("GET", webhookPath(webhookId), { idempotent: true, signal, timeoutMs });
  }

  /** DELETE /v1/webhooks/{id} (204): its pending deliveries are dropped. */
  async deleteWebhook(webhookId, { signal, timeoutMs } = {}) {
    await this.#noContent("DELETE", webhookPath(webhookId), { signal, timeoutMs });
  }

  /**
   * POST /v1/webhooks/{id}/rotate-secret: a new `secret` (shown once); the old one also signs
   * until `previousSecretValidUntil` (24 hours).
   */
  async rotateWebhookSecret(webhookId, { signal, timeoutMs } = {}) {
    const path = `${webhookPath(webhookId)}/rotate-secret`;
    return this.#json("POST", path, { idempotent: false, signal, timeoutMs });
  }

  /** POST /v1/webhooks/{id}/test (202): a webhook.test event to this webhook only: { eventId, seq }. */
  async testWebhook(webhookId, { signal, timeoutMs } = {}) {
    return this.#json("POST", `${webhookPath(webhookId)}/test`, { idempotent: false, signal, timeoutMs });
  }

  /** GET /v1/webhooks/{id}/deliveries: the latest attempts (`limit`, default 50), newest first. */
  async webhookDeliveries(webhookId, { limit, signal, timeoutMs } = {}) {
    const path = `${webhookPath(webhookId)}/deliveries`;
    const page = await this.#json("GET", path, { query: { limit }, idempotent: true, signal, timeoutMs });
    if (!Array.isArray(page.deliveries)) throw invalid(`GET ${path}`, "deliveries is not a list");
    return page.deliveries;
  }

  // -- admin (a client made with the deployment's admin key) ----------------------------------------

  /** POST /v1/admin/projects: a project and its first key { projectId, keyId, apiKey, scopes, timeZone }. */
  async createProject(request, { signal, timeoutMs } = {}) {
    if (!isObject(request) || typeof request.name !== "string") {
      throw new TypeError("createProject() needs { name, timeZone? }");
    }
    return this.#json("POST", "/v1/admin/projects", { body: request, idempotent: false, signal, timeoutMs });
  }

  /** POST /v1/admin/projects/{id}/keys: another key; `scopes` omitted: read and write (forget only when asked). */
  async createKey(projectId, { scopes, signal, timeoutMs } = {}) {
    const body = scopes === undefined ? {} : { scopes: [...scopes] };
    const path = `/v1/admin/projects/${segment(projectId)}/keys`;
    return this.#json("POST", path, { body, idempotent: false, signal, timeoutMs });
  }

  /** DELETE /v1/admin/keys/{id} (204): the key stops working at once. */
  async revokeKey(keyId, { signal, timeoutMs } = {}) {
    await this.#noContent("DELETE", `/v1/admin/keys/${segment(keyId)}`, { signal, timeoutMs });
  }

  /** One call answering 204: its body, if any, is read and dropped. */
  async #noContent(method, path, options) {
    await this.#send(method, path, { ...options, idempotent: false, readText: true });
  }

  // -- the event log ---------------------------------------------------------------------------------

  /** GET /v1/streams/{stream}/events: one page ({ events, nextFromSeq }). */
  async eventsPage(stream, { fromSeq = 1, limit, signal, timeoutMs } = {}) {
    return this.#json("GET", `/v1/streams/${segment(stream)}/events`, {
      query: { fromSeq, limit },
      idempotent: true,
      signal,
      timeoutMs,
    });
  }

  /** A stream's events from `fromSeq` on, every page (`limit` events a page), oldest first. */
  async *events(stream, { fromSeq = 1, limit, signal, timeoutMs } = {}) {
    const path = `/v1/streams/${segment(stream)}/events`;
    yield* this.#seqPages(path, "events", fromSeq, { limit }, { signal, timeoutMs });
  }

  /** GET /v1/streams, every page: each stream's head ({ stream, seq, hash }). */
  async *streams({ limit, signal, timeoutMs } = {}) {
    const what = "GET /v1/streams";
    const seen = new Set();
    let cursor;
    for (;;) {
      const page = await this.#json("GET", "/v1/streams", {
        query: { cursor, limit },
        idempotent: true,
        signal,
        timeoutMs,
      });
      if (!Array.isArray(page.streams)) throw invalid(what, "streams is not a list");
      yield* page.streams;
      cursor = page.nextCursor;
      if (!cursor) return;
      if (typeof cursor !== "string" || seen.has(cursor)) throw invalid(what, "nextCursor does not advance");
      seen.add(cursor);
    }
  }

  async *#seqPages(path, field, fromSeq, query, options) {
    const what = `GET ${path}`;
    let from = fromSeq;
    for (;;) {
      const page = await this.#json("GET", path, {
        query: { ...query, fromSeq: from },
        idempotent: true,
        ...options,
      });
      if (!Array.isArray(page[field])) throw invalid(what, `${field} is not a list`);
      yield* page[field];
      const next = page.nextFromSeq;
      if (next === undefined || next === null) return;
      if (!Number.isInteger(next) || next <= from) throw invalid(what, "nextFromSeq does not advance");
      from = next;
    }
  }
}

function webhookPath(webhookId) {
  if (typeof webhookId !== "string" || !webhookId) throw new TypeError("needs a webhook id (wh_…)");
  return `/v1/webhooks/${segment(webhookId)}`;
}

function recallBody(question, fields) {
  const request = typeof question === "string" ? { question, ...fields } : { ...question, ...fields };
  if (typeof request.question !== "string" || !request.question) {
    throw new TypeError("recall() needs a question");
  }
  return request;
}

function packOf(answer, what, status) {
  if (!Array.isArray(answer.items) || !isObject(answer.abstain)) {
    throw invalid(what, "the answer has no items or abstain", status);
  }
  return new RecallPack(answer);
}

export { Kaibo as KaiboClient };
export default Kaibo;
