// Types of the client (hand-written). The API's shapes come from ./types.d.ts, which
// scripts/generate-types.mjs generates from the service's OpenAPI document; its --check fails
// when a name imported below is no longer generated.

import type {
  Abstain,
  Citation,
  CreateKeyResponse,
  CreateProjectRequest,
  CreateProjectResponse,
  DeliveryAttemptOut,
  EventSent,
  ExplainResponse,
  EventsPage,
  ForgetRequest,
  ForgetResponse,
  JobOut,
  MemoryOut,
  RecallItem,
  RecallRequest,
  RecallResponse,
  ReceiptOut,
  ReceiptStateOut,
  RememberRequest,
  RememberResponse,
  SecretRotated,
  StoredEventOut,
  StreamHeadOut,
  WebhookCreateRequest,
  WebhookCreated,
  WebhookOut,
} from "./types.js";

export * from "./types.js";

export declare const VERSION: string;

export interface KaiboOptions {
  /** The API's root, e.g. http://127.0.0.1:3000. Default: KAIBO_URL, else KAIBO_ENDPOINT. */
  baseUrl?: string;
  /** A project key. Default: KAIBO_API_KEY. */
  apiKey?: string;
  /** The limit of each attempt of a call, in ms (default 30000). */
  timeoutMs?: number;
  /** How often a call is retried (default 3): 429 always (a transaction race's or a throttled read's, ledger_busy, project_busy, table_busy, transaction_busy, when idempotent), 5xx and network errors when idempotent. */
  maxRetries?: number;
  /** The fetch to use (default: the global one). */
  fetch?: typeof globalThis.fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** This call's limit per attempt, in ms (default: the client's timeoutMs). */
  timeoutMs?: number;
}

/** A memory id, or anything carrying one: a recalled item (`pack.top`), a memory, an explain entry. */
export type MemoryRef = string | { memoryId: string } | { id: string };

export type RememberEvent = RememberRequest["events"][number];
export type MemoryType = NonNullable<RecallRequest["types"]>[number];
export type JobStatus = JobOut["status"];
/** The documented abstain reasons (docs/recall.md); others may be added. */
export type AbstainReason =
  | "no_terms"
  | "no_match"
  | "nothing_valid_at_asof"
  | "below_threshold"
  | "budget_too_small"
  | (string & {});

export type RecallOptions = Omit<RecallRequest, "question"> & CallOptions;

/** What recall answers: the API's document plus shortcuts. */
export declare class RecallPack implements RecallResponse {
  items: RecallItem[];
  usedTokens: number;
  budget: number;
  asOf: string;
  abstain: Abstain;
  /** The best item; undefined when recall abstained. */
  get top(): RecallItem | undefined;
  get abstained(): boolean;
  /** Why recall abstained; undefined when it did not. */
  get abstainReason(): AbstainReason | undefined;
  /** Every event the items cite, once each, in the items' order. */
  get citations(): Citation[];
}

/** One candidate retrieval found (event `candidates`). */
export type RecallCandidate = Pick<RecallItem, "memoryId" | "type" | "score" | "validFrom">;

/**
 * The events of a recall stream. An event a later API adds is passed on too, as `{ event, data }`
 * with its own name and a JSON object as data: test `event` for each name you handle (not `else`
 * for `final`). Its type is not in this union, so that the names here still narrow `data`.
 */
export type RecallStreamEvent =
  | { event: "candidates"; data: { candidates: RecallCandidate[] } }
  | { event: "packed"; data: Pick<RecallResponse, "items" | "usedTokens"> }
  | { event: "final"; data: RecallPack };

type SelectorName = "memoryId" | "query" | "stream" | "subject";
type Selector<K extends SelectorName, V> = { [P in K]: V } & {
  [P in Exclude<SelectorName, K>]?: undefined;
};

/** Exactly one of memoryId (or a recalled item), query, stream, subject; and a reason. */
export type ForgetParams = Omit<ForgetRequest, SelectorName> &
  (
    | Selector<"memoryId", MemoryRef>
    | Selector<"query", string>
    | Selector<"stream", string>
    | Selector<"subject", string>
  );

export interface RequestOptions extends CallOptions {
  body?: unknown;
  query?: Record<string, string | number | undefined>;
  /** Whether sending the call twice does what sending it once does (default: GET and HEAD only). */
  idempotent?: boolean;
}

export interface WaitForJobOptions {
  /** How long to wait in all, in ms (default 60000). */
  timeoutMs?: number;
  /** The first pause between polls, in ms (default 250; it grows to 2 s). */
  intervalMs?: number;
  signal?: AbortSignal;
}

export interface EventsOptions extends CallOptions {
  /** The first sequence number (default 1). */
  fromSeq?: number;
  /** Events per page (1–1000; default 500). */
  limit?: number;
}

/**
 * Anything that kept a call from getting its answer: the API's error (status, code, message,
 * details, requestId) or one of the client's own codes: network_error, timeout, aborted,
 * invalid_response, stream_incomplete, redirect_refused, job_failed, job_timeout, http_<status>.
 */
export declare class KaiboError extends Error {
  constructor(
    message: string,
    init?: {
      status?: number;
      code?: string;
      details?: Record<string, unknown>;
      requestId?: string;
      retryAfter?: number;
      cause?: unknown;
    },
  );
  readonly name: "KaiboError";
  /** The HTTP status; 0 when there was no HTTP answer. */
  readonly status: number;
  /** The API's stable snake_case code (unauthorized, memory_not_found, preview_changed, …). */
  readonly code: string;
  readonly details: Record<string, unknown>;
  readonly requestId: string | undefined;
  /** Retry-After of the answer, in seconds. */
  readonly retryAfter: number | undefined;
}

export declare class Kaibo {
  constructor(options?: KaiboOptions);
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly maxRetries: number;

  /** POST /v1/remember: append events to a stream. They are searchable at once (provisional memories);
   * `wait: true` waits for structuring, at most the server's wait (10 s), then answers 202 with the job to poll. */
  remember(request: RememberRequest, options?: CallOptions): Promise<RememberResponse>;

  /** POST /v1/recall: the smallest cited set of memories that answers the question, or an abstain. */
  recall(question: string, options?: RecallOptions): Promise<RecallPack>;
  recall(request: RecallRequest, options?: CallOptions): Promise<RecallPack>;

  /** POST /v1/recall as server-sent events: candidates, packed, final (a RecallPack), and any
   * event a later API adds, passed on as it came. */
  recallStream(question: string, options?: RecallOptions): AsyncGenerator<RecallStreamEvent, void, undefined>;
  recallStream(request: RecallRequest, options?: CallOptions): AsyncGenerator<RecallStreamEvent, void, undefined>;

  /**
   * POST /v1/explain: the chain of versions that led to a memory, oldest first. Takes a memory id
   * or a recalled item; `undefined` (the `top` of an abstained pack) throws a TypeError.
   */
  explain(memory: MemoryRef | undefined, options?: CallOptions): Promise<ExplainResponse>;

  /** GET /v1/memories/{id}: one memory, in any status. */
  memory(memory: MemoryRef, options?: CallOptions): Promise<MemoryOut>;

  /** GET /v1/jobs/{id}: a structuring job. */
  job(job: string | { jobId?: string | null }, options?: CallOptions): Promise<JobOut>;

  /** Poll a job until it is done (throws KaiboError job_failed / job_timeout). */
  waitForJob(job: string | { jobId?: string | null }, options?: WaitForJobOptions): Promise<JobOut>;

  /**
   * POST /v1/forget (scope forget): dryRun for the set and a previewToken, then the real call.
   * With an idempotencyKey the real call is retried after a 5xx and answers its first receipt again.
   */
  forget(request: ForgetParams, options?: CallOptions): Promise<ForgetResponse>;

  /** GET /v1/receipts/{id}: a forget's ledger entry and its state (and unlocatedEventIds, if any). */
  receipt(receiptId: string, options?: CallOptions): Promise<ReceiptStateOut>;

  /** GET /v1/ledger, every page: the deletion ledger, oldest first. */
  ledger(options?: { fromSeq?: number } & CallOptions): AsyncGenerator<ReceiptOut, void, undefined>;

  /** GET /v1/streams/{stream}/events: one page. */
  eventsPage(stream: string, options?: EventsOptions): Promise<EventsPage>;

  /** A stream's events, every page, oldest first. */
  events(stream: string, options?: EventsOptions): AsyncGenerator<StoredEventOut, void, undefined>;

  /** GET /v1/streams, every page: each stream's head. */
  streams(options?: { limit?: number } & CallOptions): AsyncGenerator<StreamHeadOut, void, undefined>;

  /** POST /v1/webhooks (scope write): the webhook and its signing `secret`, shown this once. Sent once. */
  createWebhook(request: WebhookCreateRequest, options?: CallOptions): Promise<WebhookCreated>;

  /** GET /v1/webhooks: every webhook of the project (never a secret). */
  webhooks(options?: CallOptions): Promise<WebhookOut[]>;

  /** GET /v1/webhooks/{id}: one webhook. */
  webhook(webhookId: string, options?: CallOptions): Promise<WebhookOut>;

  /** DELETE /v1/webhooks/{id}: its pending deliveries are dropped. */
  deleteWebhook(webhookId: string, options?: CallOptions): Promise<void>;

  /** POST /v1/webhooks/{id}/rotate-secret: the new secret (shown once); the old one signs 24 more hours. */
  rotateWebhookSecret(webhookId: string, options?: CallOptions): Promise<SecretRotated>;

  /** POST /v1/webhooks/{id}/test: a webhook.test event to this webhook only. */
  testWebhook(webhookId: string, options?: CallOptions): Promise<EventSent>;

  /** GET /v1/webhooks/{id}/deliveries: the latest attempts, newest first (`limit` 1–100, default 50). */
  webhookDeliveries(webhookId: string, options?: { limit?: number } & CallOptions): Promise<DeliveryAttemptOut[]>;

  /** POST /v1/admin/projects (admin key): a project and its first key. Sent once. */
  createProject(request: CreateProjectRequest, options?: CallOptions): Promise<CreateProjectResponse>;

  /** POST /v1/admin/projects/{id}/keys (admin key): another key; no `scopes`: read and write. Sent once. */
  createKey(
    projectId: string,
    options?: { scopes?: Array<"read" | "write" | "forget"> } & CallOptions,
  ): Promise<CreateKeyResponse>;

  /** DELETE /v1/admin/keys/{id} (admin key): the key stops working at once. */
  revokeKey(keyId: string, options?: CallOptions): Promise<void>;

  /**
   * Any route: the parsed JSON answer (undefined for 204). Retried as the other calls: a 429
   * always (a transaction race's as a 5xx); a 5xx or a network error for GET, or when `idempotent` says the call is safe twice.
   */
  request<T = unknown>(
    method: string,
    path: string,
    options?: RequestOptions,
  ): Promise<T>;
}

/**
 * Whether a webhook delivery is Kaibo's (docs/webhooks.md): any `v1` signature in `headers` is
 * `secret`'s over the raw `body`, signed within `toleranceSeconds` (default 300) of `now` (Unix
 * seconds, default the clock). Throws a TypeError only for a malformed secret.
 */
export declare function verifyWebhook(
  secret: string,
  headers: Headers | Record<string, string | string[] | undefined>,
  body: string | Uint8Array | ArrayBuffer,
  options?: { now?: number; toleranceSeconds?: number },
): Promise<boolean>;

export { Kaibo as KaiboClient };
export default Kaibo;

/** An incremental server-sent events parser (text in, events out). */
export declare class SseParser {
  lastEventId: string;
  retry: number | undefined;
  feed(text: string): SseEvent[];
  close(text?: string): SseEvent[];
}

export interface SseEvent {
  event: string;
  data: string;
  id: string;
  retry: number | undefined;
}
