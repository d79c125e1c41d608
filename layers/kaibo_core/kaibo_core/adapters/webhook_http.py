"""One webhook delivery: a POST to a subscriber's URL, guarded against server-side request forgery.

A subscriber URL is somebody else's input, and the delivery function runs inside AWS: a URL
that leads to 169.254.169.254, to a VPC address or to localhost would let a project owner make
Kaibo call its own infrastructure. So:

- ``check_url`` (when a webhook is created): an absolute ``https`` URL of at most 2048
  printable ASCII characters, with a host, without ``user:pass@`` or a fragment; a literal IP
  host must be public.
- ``deliver`` (every attempt): resolves the host once, refuses if *any* address it resolves to
  is not public, then connects to the address it vetted, never to a fresh resolution (a DNS
  answer that changes between the check and the connect, "DNS rebinding", cannot get past).
  The lookup counts against the delivery's timeout like the rest: it runs in a thread of its
  own, and a resolver that has not answered when the time is up ends the delivery as a timeout
  (the thread is left to finish on its own; its answer is dropped).
  The Host header, TLS SNI and certificate verification still use the hostname. Redirects are
  never followed; at most 64 KiB of the response is read, then discarded.

``TargetPolicy(allow_local=True)`` is the local stack's development setting: it permits
``http://`` and loopback addresses (127.0.0.0/8, ::1), never other private ranges or metadata.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import io
import ipaddress
import re
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

MAX_URL_LENGTH = 2048
MAX_RESPONSE_BYTES = 64 * 1024
DEFAULT_TIMEOUT_SECONDS = 10.0
USER_AGENT = "Kaibo-Webhooks/1"

#: ``TargetRefused.code`` values (stable: the API returns them).
URL_INVALID = "webhook_url_invalid"
URL_NOT_HTTPS = "webhook_url_not_https"
TARGET_PRIVATE = "webhook_target_private"

#: ``DeliveryResult.error`` values.
ERROR_URL_INVALID = "url_invalid"
ERROR_URL_NOT_HTTPS = "url_not_https"
ERROR_TARGET_PRIVATE = "target_private"
ERROR_DNS_FAILED = "dns_failed"
ERROR_TIMEOUT = "timeout"
ERROR_CONNECTION_REFUSED = "connection_refused"
ERROR_CONNECTION_FAILED = "connection_failed"
ERROR_TLS = "tls_error"
ERROR_BAD_RESPONSE = "bad_response"
ERROR_REDIRECT = "redirect_not_followed"

_REFUSAL_ERRORS = {
    URL_INVALID: ERROR_URL_INVALID,
    URL_NOT_HTTPS: ERROR_URL_NOT_HTTPS,
    TARGET_PRIVATE: ERROR_TARGET_PRIVATE,
}

_FRAMING_HEADERS = frozenset({"host", "content-length", "transfer-encoding"})
_PRINTABLE_URL = re.compile(r"[!-~]+")
_HOSTNAME = re.compile(r"[a-z0-9_.-]+")  # after lowercasing; IDNs come punycoded (xn--…)

_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Named although their ranges already fail the checks below: the addresses an SSRF is after.
_METADATA = frozenset({ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")})
_SHARED_SPACE = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT, not global
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # reaches the IPv4 address in its last 32 bits
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
# Site-local (RFC 3879 deprecated it): private in intent, yet Python's is_global says True.
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")

#: ``socket.getaddrinfo`` or a stand-in: ``(host, port, family, type)`` → entries whose last item
#: is the socket address (its first item the IP as text).
Resolver = Callable[[str, int, int, int], Sequence[tuple[Any, Any, Any, Any, tuple[Any, ...]]]]


@dataclass(frozen=True)
class TargetPolicy:
    allow_local: bool = False


@dataclass(frozen=True)
class DeliveryResult:
    """``status`` is the HTTP status if one came back; ``error`` a short class of what went wrong
    (``ERROR_*``; never the response's content), None when the subscriber answered without a
    redirect. Success is ``ok``: a 2xx."""

    status: int | None
    latency_ms: int
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300


class TargetRefused(ValueError):  # noqa: N818 - the name the webhook services use
    """A webhook URL or the address it resolves to is not allowed; ``code`` is stable."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# --- which addresses are allowed -------------------------------------------------------------------


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def _is_public(address: _IPAddress) -> bool:
    if address in _METADATA:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if address in _NAT64_LOCAL or address in _SITE_LOCAL:
            return False
        embedded = _embedded_ipv4(address)
        if embedded is not None and not _is_public(embedded):
            return False
        if address.ipv4_mapped is not None or address in _NAT64:
            return True  # judged by the IPv4 address it stands for (is_global is False for these)
    elif address in _SHARED_SPACE:
        return False
    return address.is_global and not (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


def _is_loopback(address: _IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def address_allowed(address: _IPAddress, policy: TargetPolicy) -> bool:
    """Public, or (only with ``allow_local``) loopback."""
    return _is_public(address) or (policy.allow_local and _is_loopback(address))


def _literal_ip(host: str) -> _IPAddress | None:
    """The IP a host names by itself, without DNS, including the shorthand forms a resolver
    also accepts for IPv4 (``127.1``, ``2130706433``, ``0x7f.0.0.1``)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if re.fullmatch(r"[0-9a-fx.]+", host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


# --- the URL ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str  # lowercase, without brackets
    port: int
    path: str  # the request target: path and query


def _check_host(host: str, policy: TargetPolicy) -> None:
    if not host:
        raise TargetRefused(URL_INVALID, "the webhook URL has no host")
    address = _literal_ip(host)
    if address is None:
        if not _HOSTNAME.fullmatch(host):
            raise TargetRefused(URL_INVALID, "the webhook URL's host is not a valid host name")
        if not policy.allow_local and (host == "localhost" or host.endswith(".localhost")):
            raise TargetRefused(TARGET_PRIVATE, "the webhook URL's host is local")
    elif not address_allowed(address, policy):
        raise TargetRefused(TARGET_PRIVATE, "the webhook URL's address is not a public one")


def _parse(url: str, policy: TargetPolicy) -> _Target:
    if not isinstance(url, str) or not url:
        raise TargetRefused(URL_INVALID, "the webhook URL is empty")
    if len(url) > MAX_URL_LENGTH:
        raise TargetRefused(URL_INVALID, f"the webhook URL is longer than {MAX_URL_LENGTH} characters")
    if not _PRINTABLE_URL.fullmatch(url):
        raise TargetRefused(
            URL_INVALID, "the webhook URL must be printable ASCII without spaces (percent-encode the rest)"
        )
    if "#" in url:
        raise TargetRefused(URL_INVALID, "the webhook URL must not have a fragment (#…)")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise TargetRefused(URL_INVALID, f"the webhook URL is not a valid URL: {error}") from error
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise TargetRefused(URL_INVALID, "the webhook URL must be an absolute https:// URL")
    if scheme == "http" and not policy.allow_local:
        raise TargetRefused(URL_NOT_HTTPS, "the webhook URL must use https://")
    if "@" in parts.netloc:
        raise TargetRefused(URL_INVALID, "the webhook URL must not contain credentials (user:pass@)")
    if port == 0:
        raise TargetRefused(URL_INVALID, "the webhook URL's port must be 1-65535")
    host = (parts.hostname or "").rstrip(".")
    _check_host(host, policy)
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    return _Target(scheme, host, port or (443 if scheme == "https" else 80), path)


def check_url(url: str, policy: TargetPolicy) -> None:
    """Raise TargetRefused unless ``url`` may be a webhook target (static checks: no DNS)."""
    _parse(url, policy)


# --- the connection --------------------------------------------------------------------------------


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        left = self._end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the delivery's time is up")
        return left


class _DeadlineReader(io.RawIOBase):
    """Reads from a socket, each read allowed only what is left of the delivery's time: a
    subscriber that trickles bytes cannot hold the worker past the timeout."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._sock.settimeout(self._deadline.remaining())
        return self._sock.recv_into(buffer)


class _PinnedSocket:
    """The few socket methods http.client uses, bound to the delivery's deadline."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self._sock = sock
        self._deadline = deadline

    def sendall(self, data: bytes) -> None:
        self._sock.settimeout(self._deadline.remaining())
        self._sock.sendall(data)

    def makefile(self, mode: str) -> io.BufferedReader:
        assert mode == "rb"
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline))

    def close(self) -> None:
        # http.client closes the connection as soon as a response says it will close, before its
        # body is read; the real socket is closed by _PinnedHTTPConnection.release instead.
        pass


def _connect_socket(address: _IPAddress, port: int, timeout: float) -> socket.socket:
    """A TCP connection to exactly ``address`` (no resolution)."""
    if isinstance(address, ipaddress.IPv6Address):
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        sockaddr: tuple[Any, ...] = (str(address), port, 0, 0)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sockaddr = (str(address), port)
    try:
        sock.settimeout(timeout)
        sock.connect(sockaddr)
    except BaseException:
        sock.close()
        raise
    return sock


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """HTTP to the vetted addresses; Host still names the URL's host."""

    def __init__(
        self,
        host: str,
        port: int,
        addresses: Sequence[_IPAddress],
        deadline: _Deadline,
        tls: ssl.SSLContext | None,
    ) -> None:
        super().__init__(host, port)
        # Decides whether the Host header names the port; this one class serves https too.
        self.default_port = http.client.HTTPS_PORT if tls is not None else http.client.HTTP_PORT
        self._addresses = addresses
        self._deadline = deadline
        self._tls = tls
        self._pinned: socket.socket | None = None

    def connect(self) -> None:
        failure: OSError | None = None
        for address in self._addresses:
            try:
                raw = _connect_socket(address, self.port, self._deadline.remaining())
            except OSError as error:
                failure = error
                continue
            try:
                sock = raw
                if self._tls is not None:
                    raw.settimeout(self._deadline.remaining())
                    # SNI and certificate checks on the hostname, whatever address we reached.
                    sock = self._tls.wrap_socket(raw, server_hostname=self.host)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except BaseException:
                raw.close()
                raise
            self._pinned = sock
            self.sock = _PinnedSocket(sock, self._deadline)
            return
        assert failure is not None
        raise failure

    def release(self) -> None:
        self.close()
        if self._pinned is not None:
            self._pinned.close()
            self._pinned = None


# --- delivery --------------------------------------------------------------------------------------


def _error_class(error: BaseException) -> str:
    if isinstance(error, TimeoutError):  # socket.timeout is TimeoutError since 3.10
        return ERROR_TIMEOUT
    if isinstance(error, ssl.SSLError | ssl.CertificateError):
        return ERROR_TLS
    if isinstance(error, http.client.HTTPException):  # includes RemoteDisconnected
        return ERROR_BAD_RESPONSE
    if isinstance(error, ConnectionRefusedError):
        return ERROR_CONNECTION_REFUSED
    return ERROR_CONNECTION_FAILED


@functools.cache
def _default_tls() -> ssl.SSLContext:
    """The system's CAs, hostname checks on; loaded once per container."""
    return ssl.create_default_context()


class _DnsFailedError(Exception):
    pass


def _lookup(target: _Target, resolver: Resolver, deadline: _Deadline) -> Sequence[tuple[Any, ...]]:
    """``resolver``'s answer for the target, waited for no longer than the deadline allows
    (TimeoutError then). getaddrinfo cannot be interrupted, so it runs in a daemon thread that
    outlives a timed-out delivery until the system resolver gives up."""
    answer: Future[Sequence[tuple[Any, ...]]] = Future()

    def look_up() -> None:
        try:
            answer.set_result(resolver(target.host, target.port, 0, socket.SOCK_STREAM))
        except BaseException as error:  # handed to the delivery, which classifies it
            answer.set_exception(error)

    threading.Thread(target=look_up, name="webhook-dns", daemon=True).start()
    return answer.result(timeout=deadline.remaining())


def _resolve(
    target: _Target, policy: TargetPolicy, resolver: Resolver, deadline: _Deadline
) -> list[_IPAddress]:
    literal = _literal_ip(target.host)
    if literal is not None:
        return [literal]  # already vetted by _parse
    try:
        entries = _lookup(target, resolver, deadline)
    except TimeoutError:
        raise  # the delivery's time is up (an OSError too, but not a DNS failure)
    except (OSError, UnicodeError) as error:
        raise _DnsFailedError from error
    addresses: list[_IPAddress] = []
    for entry in entries:
        try:
            address = ipaddress.ip_address(str(entry[4][0]))
        except (ValueError, IndexError, TypeError) as error:
            raise TargetRefused(TARGET_PRIVATE, "the webhook host resolved to an unusable address") from error
        if not address_allowed(address, policy):
            raise TargetRefused(TARGET_PRIVATE, "the webhook host resolves to an address that is not public")
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise _DnsFailedError
    return addresses


def deliver(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    policy: TargetPolicy,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    resolver: Resolver = socket.getaddrinfo,
    tls_context: ssl.SSLContext | None = None,
) -> DeliveryResult:
    """POST ``body`` with ``headers`` to ``url``, within ``timeout_seconds`` in all (resolving,
    connecting, sending, reading). Never raises for what the URL, the network or the subscriber
    does: every outcome is a DeliveryResult. ValueError for headers HTTP cannot send or that the
    delivery sets itself (Host, Content-Length). ``tls_context`` replaces the system CAs in tests."""
    started = time.monotonic()
    request_headers = dict(headers)
    names = {name.lower() for name in request_headers}
    if names & _FRAMING_HEADERS:
        raise ValueError("Host, Content-Length and Transfer-Encoding are set by the delivery")
    if "user-agent" not in names:
        request_headers["User-Agent"] = USER_AGENT

    def result(status: int | None, error: str | None) -> DeliveryResult:
        return DeliveryResult(status, int((time.monotonic() - started) * 1000), error)

    deadline = _Deadline(timeout_seconds)  # from the start: the lookup spends it too
    try:
        target = _parse(url, policy)
        addresses = _resolve(target, policy, resolver, deadline)
    except TargetRefused as refused:
        return result(None, _REFUSAL_ERRORS[refused.code])
    except _DnsFailedError:
        return result(None, ERROR_DNS_FAILED)
    except TimeoutError:
        return result(None, ERROR_TIMEOUT)

    tls = (tls_context or _default_tls()) if target.scheme == "https" else None
    connection = _PinnedHTTPConnection(target.host, target.port, addresses, deadline, tls)
    try:
        connection.request("POST", target.path, body=body, headers=request_headers)
        response = connection.getresponse()
        status = response.status
        # Read (so the subscriber's write completes) and discard; the status is the answer, and a
        # body that cannot be read does not change it.
        with contextlib.suppress(OSError, http.client.HTTPException):
            response.read(MAX_RESPONSE_BYTES)
    except (OSError, http.client.HTTPException, ssl.CertificateError) as error:
        return result(None, _error_class(error))
    finally:
        connection.release()
    if 300 <= status < 400:
        return result(status, ERROR_REDIRECT)
    return result(status, None)
