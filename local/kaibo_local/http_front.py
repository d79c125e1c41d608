"""The local stack's HTTP server: bytes in, LocalGateway, bytes out (127.0.0.1 only).

HTTP/1.1 with keep-alive; request bodies by Content-Length or chunked transfer
coding. A body over API Gateway's 10 MB is refused with the REQUEST_TOO_LARGE
gateway response before it is read (and the connection closed); an unreadable
request (bad Content-Length or chunk framing) gets a 400 in our error shape.

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
from collections.abc import Callable, Mapping
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BufferedIOBase
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from kaibo_local.gateway import MAX_REQUEST_BYTES, HttpRequest, HttpResponse, LocalGateway, new_request_id

log = logging.getLogger("kaibo_local.http")

#: Seconds a connection may sit idle (or a client may stall mid-request) before it is closed.
IDLE_TIMEOUT_SECONDS = 120
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


def _read_body(headers: Message, rfile: BufferedIOBase) -> bytes:
    """A request's body, by Content-Length or chunked transfer coding.

    ``_TooLargeError`` for a body over ``MAX_REQUEST_BYTES`` (by its declared length: not read);
    ``_BadRequestError`` for a body that cannot be read (bad length or framing).
    """
    if "chunked" in headers.get("Transfer-Encoding", "").lower():
        return _read_chunked(rfile)
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
    body = rfile.read(length)
    if len(body) != length:
        raise _BadRequestError("the body ended before Content-Length")
    return body


def _read_chunked(rfile: BufferedIOBase) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
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
        chunk = rfile.read(size)
        if len(chunk) != size or rfile.readline(1024) not in (b"\r\n", b"\n"):
            raise _BadRequestError("bad chunk framing")
        chunks.append(chunk)
    while rfile.readline(1024) not in (b"\r\n", b"\n", b""):
        pass  # trailer fields: ignored
    return b"".join(chunks)


def _handler_class(gateway: LocalGateway) -> type[BaseHTTPRequestHandler]:
    class GatewayRequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "kaibo-local"
        timeout = IDLE_TIMEOUT_SECONDS

        def _serve(self) -> None:
            try:
                body = _read_body(self.headers, self.rfile)
            except _TooLargeError:
                self.close_connection = True  # the unread body must not be parsed as a request
                self._send(gateway.gateway_response("REQUEST_TOO_LARGE", new_request_id()))
                return
            except _BadRequestError as error:
                log.debug("unreadable request: %s", error)
                self.close_connection = True
                self._send(gateway.gateway_response("DEFAULT_4XX", new_request_id(), status=400))
                return
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

    def handle_error(self, request: Any, client_address: Any) -> None:  # noqa: ARG002
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            log.debug("connection from %s ended: %r", client_address, error)
        else:
            log.exception("while serving %s", client_address)


class HttpFront:
    """Serve ``gateway`` over HTTP on ``host:port`` (port 0: any free port; see ``url``)."""

    def __init__(self, gateway: LocalGateway, host: str = "127.0.0.1", port: int = 3000) -> None:
        self._server = _Server((host, port), _handler_class(gateway))
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
