"""Webhook targets (kaibo_core.adapters.webhook_http): which URLs and addresses a delivery may reach.

Sockets are blocked here, so every ``deliver`` below that is refused shows it was refused before
any connection (opening one would raise pytest-socket's error, which ``deliver`` does not catch).
Deliveries to real loopback servers are in tests/integration/test_webhook_http_delivery.py.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
from typing import Any, cast

import pytest

from kaibo_core.adapters import webhook_http
from kaibo_core.adapters.webhook_http import (
    DeliveryResult,
    TargetPolicy,
    TargetRefused,
    address_allowed,
    check_url,
    deliver,
)
from kaibo_core.services import webhook_dispatch

STRICT = TargetPolicy()
LOCAL = TargetPolicy(allow_local=True)
BODY = b'{"type": "ping"}'
HEADERS = {"webhook-id": "msg_1", "content-type": "application/json"}


class FakeResolver:
    """Answers each call with the next list of addresses (the last one repeats); counts calls."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int, family: int = 0, kind: int = 0) -> list[tuple[Any, ...]]:
        self.calls.append((host, port))
        addresses = self.answers[min(len(self.calls), len(self.answers)) - 1]
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in addresses
        ]


def failing_resolver(host: str, port: int, family: int = 0, kind: int = 0) -> list[tuple[Any, ...]]:
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


# --- check_url --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hook",
        "https://example.com",
        "https://EXAMPLE.com:8443/hooks/kaibo?token=abc&x=1",
        "https://hooks.example.com./in",
        "https://93.184.216.34/hook",
        "https://[2606:4700:4700::1111]/hook",
        "https://xn--bcher-kva.example/hook",
    ],
)
def test_check_url_accepts_public_https_urls(url: str) -> None:
    check_url(url, STRICT)
    check_url(url, LOCAL)


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://example.com/hook", "webhook_url_not_https"),
        ("http://127.0.0.1:8080/hook", "webhook_url_not_https"),
        ("http://localhost:8080/hook", "webhook_url_not_https"),
        ("https://user:pass@example.com/hook", "webhook_url_invalid"),
        ("https://token@example.com/hook", "webhook_url_invalid"),
        ("https://10.0.0.1/hook", "webhook_target_private"),
        ("https://172.16.5.4/hook", "webhook_target_private"),
        ("https://192.168.1.1/hook", "webhook_target_private"),
        ("https://100.64.0.1/hook", "webhook_target_private"),
        ("https://169.254.169.254/latest/meta-data/", "webhook_target_private"),
        ("https://127.0.0.1/hook", "webhook_target_private"),
        ("https://0.0.0.0/hook", "webhook_target_private"),
        ("https://224.0.0.1/hook", "webhook_target_private"),
        ("https://[::1]/hook", "webhook_target_private"),
        ("https://[fd00:ec2::254]/latest", "webhook_target_private"),
        ("https://[::ffff:127.0.0.1]/hook", "webhook_target_private"),
        ("https://[::ffff:169.254.169.254]/hook", "webhook_target_private"),
        ("https://[fe80::1]/hook", "webhook_target_private"),
        ("https://[fec0::1]/hook", "webhook_target_private"),
        ("https://127.1/hook", "webhook_target_private"),
        ("https://2130706433/hook", "webhook_target_private"),
        ("https://0x7f.0.0.1/hook", "webhook_target_private"),
        ("https://localhost/hook", "webhook_target_private"),
        ("https://api.localhost./hook", "webhook_target_private"),
        ("https://example.com/hook#frag", "webhook_url_invalid"),
        ("https://example.com/hook#", "webhook_url_invalid"),
        ("/hook", "webhook_url_invalid"),
        ("example.com/hook", "webhook_url_invalid"),
        ("ftp://example.com/hook", "webhook_url_invalid"),
        ("file:///etc/passwd", "webhook_url_invalid"),
        ("https:///hook", "webhook_url_invalid"),
        ("https://:443/hook", "webhook_url_invalid"),
        ("https://example.com:0/hook", "webhook_url_invalid"),
        ("https://example.com:70000/hook", "webhook_url_invalid"),
        ("https://exa mple.com/hook", "webhook_url_invalid"),
        ("https://example.com/h\r\nX-Injected: 1", "webhook_url_invalid"),
        ("https://bücher.example/hook", "webhook_url_invalid"),
        ("https://evil.com\\.example.com/hook", "webhook_url_invalid"),
        ("", "webhook_url_invalid"),
        ("https://example.com/" + "a" * 2030, "webhook_url_invalid"),
    ],
)
def test_check_url_refuses(url: str, code: str) -> None:
    with pytest.raises(TargetRefused) as refused:
        check_url(url, STRICT)
    assert refused.value.code == code
    assert refused.value.message
    assert str(refused.value) == refused.value.message


def test_url_length_limit_is_2048() -> None:
    base = "https://example.com/"
    check_url(base + "a" * (2048 - len(base)), STRICT)
    with pytest.raises(TargetRefused):
        check_url(base + "a" * (2049 - len(base)), STRICT)


def test_target_refused_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="https"):
        check_url("http://example.com", STRICT)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://127.9.9.9/hook",
        "http://localhost:3000/hook",
        "http://[::1]:8080/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "http://example.com/hook",
    ],
)
def test_allow_local_permits_http_and_loopback(url: str) -> None:
    check_url(url, LOCAL)


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/hook",
        "http://192.168.1.10/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest",
        "http://0.0.0.0:8080/hook",
        "http://[fe80::1]/hook",
        "http://user:pass@127.0.0.1/hook",
    ],
)
def test_allow_local_permits_nothing_else(url: str) -> None:
    with pytest.raises(TargetRefused):
        check_url(url, LOCAL)


@pytest.mark.parametrize(
    ("address", "strict", "local"),
    [
        ("93.184.216.34", True, True),
        ("2606:4700:4700::1111", True, True),
        ("::ffff:93.184.216.34", True, True),
        ("127.0.0.1", False, True),
        ("127.255.0.1", False, True),
        ("::1", False, True),
        ("::ffff:127.0.0.1", False, True),
        ("10.1.2.3", False, False),
        ("172.31.255.255", False, False),
        ("192.168.0.1", False, False),
        ("100.64.0.1", False, False),
        ("100.127.255.254", False, False),
        ("169.254.169.254", False, False),
        ("169.254.1.1", False, False),
        ("fd00:ec2::254", False, False),
        ("fc00::1", False, False),
        ("fe80::1", False, False),
        ("ff02::1", False, False),
        ("224.0.0.251", False, False),
        ("239.255.255.250", False, False),
        ("0.0.0.0", False, False),
        ("::", False, False),
        ("255.255.255.255", False, False),
        ("240.0.0.1", False, False),
        ("192.0.2.1", False, False),
        ("2001:db8::1", False, False),
        ("::ffff:10.0.0.1", False, False),
        ("::ffff:169.254.169.254", False, False),
        ("64:ff9b::a9fe:a9fe", False, False),  # NAT64 of 169.254.169.254
        ("64:ff9b::5db8:d822", True, True),  # NAT64 of 93.184.216.34
        ("2002:a00:1::", False, False),  # 6to4 of 10.0.0.1
    ],
)
def test_address_rule(address: str, strict: bool, local: bool) -> None:
    ip = ipaddress.ip_address(address)
    assert address_allowed(ip, STRICT) is strict
    assert address_allowed(ip, LOCAL) is local


# --- deliver: refusals happen before any connection ------------------------------------------------


@pytest.fixture
def no_connection(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Fails the test if deliver tries to connect (besides pytest-socket's block)."""
    attempts: list[Any] = []

    def connect(*args: Any) -> socket.socket:
        attempts.append(args)
        raise AssertionError("deliver connected")

    monkeypatch.setattr(webhook_http, "_connect_socket", connect)
    return attempts


@pytest.mark.parametrize(
    "addresses",
    [
        ["10.0.0.7"],
        ["169.254.169.254"],
        ["fd00:ec2::254"],
        ["::ffff:127.0.0.1"],
        ["127.0.0.1"],
        ["93.184.216.34", "10.0.0.7"],  # one private address among public ones is enough
        ["100.64.0.9"],
    ],
)
def test_deliver_refuses_a_host_resolving_to_a_private_address(
    addresses: list[str], no_connection: list[Any]
) -> None:
    resolver = FakeResolver(addresses)
    result = deliver("https://hooks.example.com/in", BODY, HEADERS, policy=STRICT, resolver=resolver)
    assert result.status is None
    assert result.error == "target_private"
    assert not result.ok
    assert resolver.calls == [("hooks.example.com", 443)]
    assert no_connection == []


@pytest.mark.parametrize("addresses", [["10.0.0.7"], ["169.254.169.254"], ["127.0.0.1", "192.168.1.1"]])
def test_allow_local_refuses_private_addresses_other_than_loopback(
    addresses: list[str], no_connection: list[Any]
) -> None:
    result = deliver(
        "http://dev.example.com/in", BODY, HEADERS, policy=LOCAL, resolver=FakeResolver(addresses)
    )
    assert result.error == "target_private"
    assert no_connection == []


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("http://hooks.example.com/in", "url_not_https"),
        ("https://u:p@hooks.example.com/in", "url_invalid"),
        ("https://10.0.0.1/in", "target_private"),
        ("https://[fd00:ec2::254]/in", "target_private"),
    ],
)
def test_deliver_refuses_what_check_url_refuses_without_resolving(
    url: str, error: str, no_connection: list[Any]
) -> None:
    resolver = FakeResolver(["93.184.216.34"])
    result = deliver(url, BODY, HEADERS, policy=STRICT, resolver=resolver)
    assert (result.status, result.error) == (None, error)
    assert resolver.calls == []
    assert no_connection == []


def test_dns_failure(no_connection: list[Any]) -> None:
    result = deliver("https://nowhere.example/in", BODY, HEADERS, policy=STRICT, resolver=failing_resolver)
    assert (result.status, result.error) == (None, "dns_failed")
    result = deliver("https://nowhere.example/in", BODY, HEADERS, policy=STRICT, resolver=FakeResolver([]))
    assert (result.status, result.error) == (None, "dns_failed")
    assert no_connection == []


class StuckResolver:
    """A resolver that does not answer until ``release`` (or, at the latest, ``SAFETY_SECONDS``,
    so that a delivery which waits for it still ends); then it answers a public address."""

    SAFETY_SECONDS = 5.0

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()
        self.answered = threading.Event()

    def __call__(self, host: str, port: int, family: int = 0, kind: int = 0) -> list[tuple[Any, ...]]:
        self.asked.set()
        self.release.wait(self.SAFETY_SECONDS)
        self.answered.set()
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]


def test_a_resolver_that_does_not_answer_ends_the_delivery_as_a_timeout_within_its_time(
    no_connection: list[Any],
) -> None:
    # The lookup was made before the delivery's deadline started: a stuck resolver held the
    # worker for as long as it liked. Now it spends the same timeout as connecting and reading.
    resolver = StuckResolver()
    try:
        result = deliver(
            "https://hooks.example.com/in",
            BODY,
            HEADERS,
            policy=STRICT,
            timeout_seconds=0.2,
            resolver=resolver,
        )
        still_resolving = not resolver.answered.is_set()
    finally:
        resolver.release.set()
    assert resolver.asked.is_set()
    assert still_resolving, "deliver waited for the resolver past its timeout"
    assert (result.status, result.error) == (None, "timeout")
    assert result.latency_ms < StuckResolver.SAFETY_SECONDS * 1000
    assert no_connection == []


def test_deliver_resolves_once_and_connects_to_the_address_it_vetted(monkeypatch: pytest.MonkeyPatch) -> None:
    # A rebinding DNS server: public for the check, private for any later lookup.
    resolver = FakeResolver(["93.184.216.34"], ["10.0.0.7"])
    connected: list[tuple[Any, int]] = []

    def connect(address: Any, port: int, timeout: float) -> socket.socket:
        connected.append((address, port))
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(webhook_http, "_connect_socket", connect)
    result = deliver("https://hooks.example.com:8443/in", BODY, HEADERS, policy=STRICT, resolver=resolver)
    assert len(resolver.calls) == 1
    assert connected == [(ipaddress.ip_address("93.184.216.34"), 8443)]
    assert (result.status, result.error) == (None, "connection_refused")


def test_deliver_tries_each_vetted_address_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    resolver = FakeResolver(["93.184.216.34", "2606:4700:4700::1111", "93.184.216.34"])
    connected: list[Any] = []

    def connect(address: Any, port: int, timeout: float) -> socket.socket:
        connected.append(str(address))
        raise OSError(113, "No route to host")

    monkeypatch.setattr(webhook_http, "_connect_socket", connect)
    result = deliver("https://hooks.example.com/in", BODY, HEADERS, policy=STRICT, resolver=resolver)
    assert connected == ["93.184.216.34", "2606:4700:4700::1111"]
    assert result.error == "connection_failed"
    assert len(resolver.calls) == 1


def test_a_literal_ip_is_not_resolved(monkeypatch: pytest.MonkeyPatch) -> None:
    resolver = FakeResolver(["10.0.0.7"])
    connected: list[Any] = []

    def connect(address: Any, port: int, timeout: float) -> socket.socket:
        connected.append((str(address), port))
        raise TimeoutError("timed out")

    monkeypatch.setattr(webhook_http, "_connect_socket", connect)
    result = deliver("https://93.184.216.34/in", BODY, HEADERS, policy=STRICT, resolver=resolver)
    assert resolver.calls == []
    assert connected == [("93.184.216.34", 443)]
    assert result.error == "timeout"


@pytest.mark.parametrize("name", ["Host", "content-length", "Transfer-Encoding"])
def test_headers_the_delivery_sets_itself_are_refused(name: str, no_connection: list[Any]) -> None:
    with pytest.raises(ValueError, match="set by the delivery"):
        deliver(
            "https://hooks.example.com/in",
            BODY,
            {**HEADERS, name: "x"},
            policy=STRICT,
            resolver=FakeResolver(["93.184.216.34"]),
        )


@pytest.mark.parametrize(
    ("status", "error", "ok"),
    [
        (200, None, True),
        (204, None, True),
        (299, None, True),
        (302, "redirect_not_followed", False),
        (404, None, False),
        (500, None, False),
        (None, "timeout", False),
    ],
)
def test_ok_is_a_2xx_without_error(status: int | None, error: str | None, ok: bool) -> None:
    assert DeliveryResult(status=status, latency_ms=3, error=error).ok is ok


# --- the request on the wire (a fake socket behind the pinned connection) -------------------------


class FakeSocket:
    def __init__(self, response: bytes) -> None:
        self.response = response
        self.sent = b""
        self.closed = False

    def settimeout(self, timeout: float | None) -> None:
        pass

    def setsockopt(self, *args: Any) -> None:
        pass

    def sendall(self, data: bytes) -> None:
        self.sent += data

    def recv_into(self, buffer: Any) -> int:
        size = min(len(buffer), len(self.response))
        buffer[:size] = self.response[:size]
        self.response = self.response[size:]
        return size

    def close(self) -> None:
        self.closed = True


class FakeTls:
    def __init__(self) -> None:
        self.server_hostnames: list[str] = []

    def wrap_socket(self, sock: FakeSocket, server_hostname: str) -> FakeSocket:
        self.server_hostnames.append(server_hostname)
        return sock


@pytest.mark.parametrize(
    ("url", "target", "port", "host_header"),
    [
        ("https://Hooks.Example.com/in?a=1", "/in?a=1", 443, "hooks.example.com"),
        ("https://hooks.example.com:8443/in", "/in", 8443, "hooks.example.com:8443"),
        ("https://hooks.example.com", "/", 443, "hooks.example.com"),
        ("http://hooks.example.com/in", "/in", 80, "hooks.example.com"),
        ("http://hooks.example.com:443/in", "/in", 443, "hooks.example.com:443"),
    ],
)
def test_the_request_names_the_host_and_goes_to_the_vetted_address(
    url: str, target: str, port: int, host_header: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeSocket(b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\nok")
    connected: list[tuple[str, int]] = []

    def connect(address: Any, port: int, timeout: float) -> FakeSocket:
        connected.append((str(address), port))
        return fake

    monkeypatch.setattr(webhook_http, "_connect_socket", connect)
    tls = FakeTls()
    result = deliver(
        url,
        BODY,
        HEADERS,
        policy=LOCAL,
        resolver=FakeResolver(["93.184.216.34"]),
        tls_context=cast(ssl.SSLContext, tls),
    )
    assert (result.status, result.error, result.ok) == (202, None, True)
    assert connected == [("93.184.216.34", port)]
    # SNI and certificate checks name the host, not the address connected to.
    assert tls.server_hostnames == (["hooks.example.com"] if url.startswith("https") else [])
    head, _, body = fake.sent.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == f"POST {target} HTTP/1.1"
    assert f"Host: {host_header}" in lines
    assert "webhook-id: msg_1" in lines
    assert f"Content-Length: {len(BODY)}" in lines
    assert body == BODY
    assert fake.closed


def test_the_dispatcher_tells_a_timed_out_delivery_by_its_error_class() -> None:
    """A delivery the invocation's deadline cut short is made again, not counted (webhook_dispatch)."""
    assert webhook_dispatch.TIMED_OUT == webhook_http.ERROR_TIMEOUT
