"""The local stack's HTTP server: bytes in, LocalGateway, bytes out (127.0.0.1 only).

HTTP/1.1 with keep-alive; request bodies by Content-Length or chunked transfer
coding. A body over API Gateway's 10 MB is refused with the REQUEST_TOO_LARGE
gateway response before it is read (and the connection closed); an unreadable
request (bad Content-Length or chunk framing, a malformed request line or header)
gets a 4xx in our error shape, and so does one that stops short: once a request's
first byte has arrived, each read of the rest of it waits at most
``REQUEST_READ_TIMEOUT_SECONDS`` (5 s), and its body must be in within that time in all,
else 400 and the connection is closed (API Gateway itself would wait 29 s for the
function, never for a client on the same machine). A connection idle between requests is
closed after ``IDLE_TIMEOUT_SECONDS``. The listening socket queues up to
``LISTEN_BACKLOG`` connections not yet accepted (socketserver's default is 5).

Responses carry a Content-Length, except event streams: a request that asks for
``text/event-stream`` offers its function a response stream (kaibo_local.gateway),
and a function that starts it has its status line and headers sent at once, then
every write as a chunk of its own (``Transfer-Encoding: chunked``; to an HTTP/1.0
client, raw bytes and ``Connection: close``), flushed as it comes, until the
function returns. Its returned proxy response (the same events, buffered, which
is all API Gateway sends on AWS) is then dropped; if it fails midway, the stream
just ends. A function that never starts the stream is answered as usual.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BufferedIOBase
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from kaibo_local.gateway import MAX_REQUEST_BYTES, HttpRequest, HttpResponse, LocalGateway, new_request_id

log = logging.getLogger("kaibo_local.http")

#: Seconds a connection may sit idle between requests before it is closed.
IDLE_TIMEOUT_SECONDS = 120
#: Once a request has begun: the longest wait for each read of the rest of it, and for its whole body.
REQUEST_READ_TIMEOUT_SECONDS = 5.0
#: Connections the kernel queues before the front accepts them (capped by net.core.somaxconn).
LISTEN_BACKLOG = 1024
_MAX_REQUEST_LINE = 65536
_READ_PIECE = 1 << 16
#: How often the serving loop checks for ``stop()`` (socketserver's default, 0.5 s, slows every stop).
SHUTDOWN_POLL_SECONDS = 0.05
_HOP_BY_HOP = frozenset({"content-length", "connection", "transfer-encoding", "keep-alive"})


class _BadRequestError(ValueError):
    pass


class _TooLargeError(ValueError):
    pass


def _split_target(target: str) -> tuple[str, str]:
    """Path and query of a request target (origin-form, or absolute-form from a proxy).

    Not ``urlsplit`` on the origin form: it reads ``//x/y`` as a host ``x`` and a path ``/y``.
    """
    if "://" in target.split("?", 1)[0]:
        url = urlsplit(target)
        return url.path or "/", url.query
    path, _, query = target.partition("?")
    return path.split("#", 1)[0] or "/", query.split("#", 1)[0]


class _ResponseStream:
    """The front's ``ResponseStream``: a response sent while the function runs (see the docstring)."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self._handler = handler
        self._chunked = handler.request_version != "HTTP/1.0"
        self._broken = False
        self.started = False

    def start(self, status: int, headers: Mapping[str, str]) -> None:
        if self.started:
            raise RuntimeError("the response stream is already started")
        self.started = True  # from here on, the buffered answer is never sent
        handler = self._handler
        if not self._chunked:
            handler.close_connection = True  # the end of the body is the end of the connection
        handler.send_response(status)
        for name, value in headers.items():
            if name.lower() not in _HOP_BY_HOP:
                handler.send_header(name, value)
        if self._chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        if handler.close_connection:
            handler.send_header("Connection", "close")
        self._flush(handler.end_headers)

    def write(self, data: bytes) -> None:
        if not self.started:
            raise RuntimeError("write before start")
        if data:  # an empty chunk would end the body
            framed = b"%x\r\n%b\r\n" % (len(data), data) if self._chunked else data
            self._flush(lambda: self._handler.wfile.write(framed))

    def finish(self) -> None:
        if self._chunked:
            self._flush(lambda: self._handler.wfile.write(b"0\r\n\r\n"))

    def _flush(self, send: Callable[[], object]) -> None:
        """Send now; a client that left only stops the sending (the function runs on, as on Lambda)."""
        if self._broken:
            return
        try:
            send()
            self._handler.wfile.flush()
        except OSError as error:
            log.debug("the client left during an event stream: %r", error)
            self._broken = True
            self._handler.close_connection = True


def _no_deadline() -> None:
    pass


def _read_exactly(rfile: BufferedIOBase, size: int, before_read: Callable[[], None]) -> bytes:
    """Up to ``size`` bytes (fewer only at the end of the stream), ``before_read`` before each read."""
    pieces: list[bytes] = []
    missing = size
    while missing > 0:
        before_read()
        piece = rfile.read1(min(missing, _READ_PIECE))
        if not piece:
            break
        pieces.append(piece)
        missing -= len(piece)
    return b"".join(pieces)


def _read_body(
    headers: Message, rfile: BufferedIOBase, before_read: Callable[[], None] = _no_deadline
) -> bytes:
    """A request's body, by Content-Length or chunked transfer coding.

    ``_TooLargeError`` for a body over ``MAX_REQUEST_BYTES`` (by its declared length: not read);
    ``_BadRequestError`` for a body that cannot be read (bad length or framing). ``before_read``
    runs before every read (the front's sets the socket's timeout to the time left, raising
    TimeoutError once there is none).
    """
    if "chunked" in headers.get("Transfer-Encoding", "").lower():
        return _read_chunked(rfile, before_read)
    declared = headers.get_all("Content-Length") or []
    if len(set(declared)) > 1:
        raise _BadRequestError("conflicting Content-Length headers")
    if not declared:
        return b""
    try:
        length = int(declared[0])
    except ValueError:
        raise _BadRequestError(f"Content-Length {declared[0]!r}") from None
    if length < 0:
        raise _BadRequestError(f"Content-Length {length}")
    if length > MAX_REQUEST_BYTES:
        raise _TooLargeError
    body = _read_exactly(rfile, length, before_read)
    if len(body) != length:
        raise _BadRequestError("the body ended before Content-Length")
    return body


def _read_chunked(rfile: BufferedIOBase, before_read: Callable[[], None]) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        before_read()
        line = rfile.readline(1024)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _BadRequestError(f"chunk size {line[:40]!r}") from None
        if size < 0:
            raise _BadRequestError("negative chunk size")
        if size == 0:
            break
        total += size
        if total > MAX_REQUEST_BYTES:
            raise _TooLargeError
        chunk = _read_exactly(rfile, size, before_read)
        before_read()
        if len(chunk) != size or rfile.readline(1024) not in (b"\r\n", b"\n"):
            raise _BadRequestError("bad chunk framing")
        chunks.append(chunk)
    while True:
        before_read()
        if rfile.readline(1024) in (b"\r\n", b"\n", b""):
            break  # trailer fields: ignored
    return b"".join(chunks)


def _handler_class(gateway: LocalGateway, read_timeout: float) -> type[BaseHTTPRequestHandler]:
    class GatewayRequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "kaibo-local"
        timeout = IDLE_TIMEOUT_SECONDS
        # TCP_NODELAY: a body (or an event) written after the headers leaves at once, instead of
        # waiting for the client to acknowledge what went before (delayed up to 40 ms).
        disable_nagle_algorithm = True
        _read_deadline = 0.0

        def handle_one_request(self) -> None:
            """BaseHTTPRequestHandler's, with time limits: the idle one until a request begins,
            then ``read_timeout`` for the rest of it (a short request gets a 400, not a hang)."""
            self.connection.settimeout(self.timeout)
            self.command, self.request_version, self.requestline = "", self.protocol_version, ""
            try:
                if not self.rfile.peek(1):  # type: ignore[attr-defined]  # a BufferedReader
                    self.close_connection = True  # the client closed the connection
                    return
            except (TimeoutError, ConnectionError):
                self.close_connection = True  # idle too long between requests (or reset): just close
                return
            self._read_deadline = time.monotonic() + read_timeout
            self.connection.settimeout(read_timeout)
            try:
                self.raw_requestline = self.rfile.readline(_MAX_REQUEST_LINE + 1)
                if len(self.raw_requestline) > _MAX_REQUEST_LINE:
                    self.send_error(414)
                    return
                if not self.parse_request():
                    return  # parse_request sent the error (ours, by send_error)
            except TimeoutError:
                self._refuse_slow_request("its request line or headers")
                return
            handler = getattr(self, f"do_{self.command}", None)
            if handler is None:
                self.send_error(501)
                return
            try:
                handler()
                self.wfile.flush()
            except TimeoutError as error:
                log.debug("a response could not be sent in time: %r", error)
                self.close_connection = True

        def _before_body_read(self) -> None:
            remaining = self._read_deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the request body did not arrive in time")
            self.connection.settimeout(remaining)

        def _refuse_slow_request(self, what: str) -> None:
            log.debug("%s did not arrive within %.1f s: 400", what, read_timeout)
            self.connection.settimeout(self.timeout)  # to send the answer
            self.send_error(400)

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """Every answer the front gives on its own (bad request line, headers too large, an
            unknown method, a short request) in our error shape, and the connection closed."""
            log.debug("refused a request with %d: %s %s", code, message or "", explain or "")
            self.close_connection = True
            if self.request_version not in ("HTTP/1.0", "HTTP/1.1"):
                self.request_version = self.protocol_version  # answer with a status line regardless
            kind = "DEFAULT_5XX" if code >= 500 else "DEFAULT_4XX"
            self._send(gateway.gateway_response(kind, new_request_id(), status=code))

        def _serve(self) -> None:
            try:
                body = _read_body(self.headers, self.rfile, self._before_body_read)
            except _TooLargeError:
                self.close_connection = True  # the unread body must not be parsed as a request
                self.connection.settimeout(self.timeout)
                self._send(gateway.gateway_response("REQUEST_TOO_LARGE", new_request_id()))
                return
            except _BadRequestError as error:
                log.debug("unreadable request: %s", error)
                self.close_connection = True
                self.connection.settimeout(self.timeout)
                self._send(gateway.gateway_response("DEFAULT_4XX", new_request_id(), status=400))
                return
            except (TimeoutError, ConnectionError) as error:
                if isinstance(error, ConnectionError):
                    self.close_connection = True
                    return
                self._refuse_slow_request("its body")
                return
            self.connection.settimeout(self.timeout)  # the function may take its time; the client too
            path, query = _split_target(self.path)
            request = HttpRequest(
                method=self.command,
                path=path,
                query=parse_qsl(query, keep_blank_values=True),
                headers=list(self.headers.items()),
                body=body,
            )
            stream = None if self.command == "HEAD" else _ResponseStream(self)
            response = gateway.handle(request, stream)
            if stream is not None and stream.started:
                stream.finish()  # the function's own response holds the same events: not sent again
            else:
                self._send(response)

        def handle_expect_100(self) -> bool:
            """``Expect: 100-continue`` with a body over the limit: refuse before the client sends it."""
            declared = self.headers.get("Content-Length", "")
            if declared.strip().isdigit() and int(declared) > MAX_REQUEST_BYTES:
                self.close_connection = True
                self._send(gateway.gateway_response("REQUEST_TOO_LARGE", new_request_id()))
                return False
            return super().handle_expect_100()

        def _send(self, response: HttpResponse) -> None:
            self.send_response(response.status)
            for name, value in response.headers:
                if name.lower() not in _HOP_BY_HOP:
                    self.send_header(name, value)
            # No body (and no length) for 1xx/204/304; a HEAD answer declares the GET one's length.
            bodiless = response.status < 200 or response.status in (204, 304)
            if not bodiless:
                self.send_header("Content-Length", str(len(response.body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD" and not bodiless:
                self.wfile.write(response.body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = _serve  # noqa: N815

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s " + format, self.address_string(), *args)

    return GatewayRequestHandler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def handle_error(self, request: Any, client_address: Any) -> None:  # noqa: ARG002
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            log.debug("connection from %s ended: %r", client_address, error)
        else:
            log.exception("while serving %s", client_address)


class HttpFront:
    """Serve ``gateway`` over HTTP on ``host:port`` (port 0: any free port; see ``url``).

    The socket is bound and listening from construction (an OSError there: the port is taken);
    connections queue until ``start``.
    """

    def __init__(
        self,
        gateway: LocalGateway,
        host: str = "127.0.0.1",
        port: int = 3000,
        read_timeout: float = REQUEST_READ_TIMEOUT_SECONDS,
    ) -> None:
        self._server = _Server((host, port), _handler_class(gateway, read_timeout))
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_SECONDS},
            name="http-front",
            daemon=True,
        )
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = self._server.server_address[0]
        return f"http://{host!s}:{self.port}"

    def start(self) -> HttpFront:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent; also when never started)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if self._thread.is_alive():
            self._server.shutdown()  # waits for serve_forever: only when it runs
            self._thread.join()
        self._server.server_close()

    def __enter__(self) -> HttpFront:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
