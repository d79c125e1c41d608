// An incremental parser for server-sent events (text/event-stream), no dependencies.
//
// Follows the WHATWG HTML rules for interpreting an event stream, less what only a browser's
// EventSource needs (reconnection), as clients/python/kaibo/sse.py does:
// - lines end with CRLF, LF or CR (a CRLF split between two chunks is one line end); a byte
//   order mark at the very start is skipped (decode with a streaming TextDecoder first);
// - `field: value` (one space after the colon is dropped; a line without a colon is a field with
//   an empty value); `event` sets the type, `data` lines are joined by "\n", `id` sets the last
//   event id (unless it holds a NUL), `retry` with only digits sets the reconnection time;
// - lines starting with ":" are comments;
// - a blank line dispatches the event (type "message" unless named); with no `data` at all
//   nothing is dispatched;
// - at the end of the stream an event not closed by a blank line is discarded.

export const DEFAULT_EVENT_TYPE = "message";

export class SseParser {
  #pending = "";
  #atStart = true;
  #skipLf = false;
  #type = "";
  #data = [];
  #hasData = false;
  lastEventId = "";
  /** @type {number | undefined} */
  retry = undefined;

  /** Text as it arrives (split anywhere); the events completed so far. */
  feed(text) {
    if (this.#atStart && text) {
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      this.#atStart = false;
    }
    if (this.#skipLf && text) {
      if (text[0] === "\n") text = text.slice(1);
      this.#skipLf = false;
    }
    return this.#lines(this.#pending + text);
  }

  /** The end of the stream (with any text still held by the decoder); an unterminated event is dropped. */
  close(text = "") {
    const events = this.feed(text);
    this.#pending = "";
    this.#type = "";
    this.#data = [];
    this.#hasData = false;
    return events;
  }

  #lines(text) {
    const events = [];
    let start = 0;
    const length = text.length;
    for (;;) {
      const cr = text.indexOf("\r", start);
      const lf = text.indexOf("\n", start);
      if (cr < 0 && lf < 0) break;
      const end = lf < 0 ? cr : cr < 0 ? lf : Math.min(cr, lf);
      const line = text.slice(start, end);
      start = end + 1;
      if (text[end] === "\r") {
        if (start < length && text[start] === "\n") start += 1;
        else if (start === length) this.#skipLf = true; // its LF may open the next chunk
      }
      const event = this.#line(line);
      if (event) events.push(event);
    }
    this.#pending = text.slice(start);
    return events;
  }

  #line(line) {
    if (line === "") return this.#dispatch();
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "event") this.#type = value;
    else if (name === "data") {
      this.#data.push(value);
      this.#hasData = true;
    } else if (name === "id") {
      if (!value.includes("\0")) this.lastEventId = value;
    } else if (name === "retry" && /^[0-9]+$/.test(value)) this.retry = Number(value);
    return undefined;
  }

  #dispatch() {
    const type = this.#type;
    const data = this.#data;
    const hasData = this.#hasData;
    this.#type = "";
    this.#data = [];
    this.#hasData = false;
    if (!hasData) return undefined;
    return { event: type || DEFAULT_EVENT_TYPE, data: data.join("\n"), id: this.lastEventId, retry: this.retry };
  }
}
