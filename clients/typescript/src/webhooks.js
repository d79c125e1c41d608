// Verifying a webhook delivery (docs/webhooks.md, "Verifying a delivery"): the Standard Webhooks
// scheme. `webhook-signature` holds one or more `v1,<base64 HMAC-SHA256>` of
// "{webhook-id}.{webhook-timestamp}.{raw body}", keyed with the base64 after `whsec_`. Web Crypto
// only (Node 20+, Deno, Bun, browsers, edge runtimes): no dependency.

const SECRET_PREFIX = "whsec_";
const DEFAULT_TOLERANCE_SECONDS = 300;
const MESSAGE_ID = /^[!-~]{1,256}$/;
const TIMESTAMP = /^[0-9]{1,12}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Whether a delivery is Kaibo's: true if any `v1` signature in `headers` is `secret`'s over `body`,
 * signed within `toleranceSeconds` (default 300) of `now` (Unix seconds; default the clock).
 * `headers`: a Headers or a plain object (names in any case); `body`: the raw body as received
 * (string or bytes), never a re-serialized parse. Throws a TypeError only for a malformed secret.
 */
export async function verifyWebhook(secret, headers, body, { now, toleranceSeconds = DEFAULT_TOLERANCE_SECONDS } = {}) {
  const key = await hmacKey(secret);
  const msgId = header(headers, "webhook-id");
  const rawTimestamp = header(headers, "webhook-timestamp").trim();
  if (!MESSAGE_ID.test(msgId) || !TIMESTAMP.test(rawTimestamp)) return false;
  const clock = now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(clock - Number(rawTimestamp)) > toleranceSeconds) return false;
  const signed = concat(new TextEncoder().encode(`${msgId}.${rawTimestamp}.`), bytesOf(body));
  let matched = false;
  for (const candidate of header(headers, "webhook-signature").split(/\s+/)) {
    const comma = candidate.indexOf(",");
    if (comma < 0 || candidate.slice(0, comma) !== "v1") continue;
    const given = decodeBase64(candidate.slice(comma + 1));
    if (given === undefined) continue;
    // Web Crypto's verify compares in constant time; every candidate is checked (no early exit).
    matched = (await crypto.subtle.verify("HMAC", key, given, signed)) || matched;
  }
  return matched;
}

async function hmacKey(secret) {
  if (typeof secret !== "string" || !secret.startsWith(SECRET_PREFIX)) {
    throw new TypeError(`a webhook secret starts with ${SECRET_PREFIX}`);
  }
  const raw = decodeBase64(secret.slice(SECRET_PREFIX.length));
  if (raw === undefined || raw.length === 0) throw new TypeError("a webhook secret is whsec_ followed by base64");
  return crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
}

function header(headers, name) {
  if (typeof headers?.get === "function") return headers.get(name) ?? "";
  for (const [key, value] of Object.entries(headers ?? {})) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? String(value[0] ?? "") : String(value ?? "");
  }
  return "";
}

function bytesOf(body) {
  if (typeof body === "string") return new TextEncoder().encode(body);
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError("verifyWebhook() needs the raw body as a string or bytes");
}

function decodeBase64(text) {
  if (!BASE64.test(text)) return undefined;
  return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
}

function concat(first, second) {
  const joined = new Uint8Array(first.length + second.length);
  joined.set(first);
  joined.set(second, first.length);
  return joined;
}
