"""Webhook deliveries (kaibo_core.adapters.webhook_http.deliver) to real servers on loopback.

Every URL names a host (``hook.test``) that a fake resolver maps to 127.0.0.1, so the pinned
connection, the Host header and (for https) SNI and certificate checks on the hostname are all
exercised; ``allow_local`` is what lets a delivery reach loopback at all.
"""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kaibo_core.adapters.webhook_http import TargetPolicy, deliver
from kaibo_core.core import webhook_signing

LOCAL = TargetPolicy(allow_local=True)
HOST = "hook.test"
BODY = b'{"type":"memory.created","data":{"id":"mem_1"}}'


class FakeResolver:
    """Answers each call with the next address (the last one repeats); counts calls."""

    def __init__(self, *answers: str) -> None:
        self.answers = answers
        self.calls = 0

    def __call__(self, host: str, port: int, family: int = 0, kind: int = 0) -> list[tuple[Any, ...]]:
        self.calls += 1
        address = self.answers[min(self.calls, len(self.answers)) - 1]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # names lowercased
    body: bytes


@dataclass
class Stub:
    port: int = 0
    seen: list[Seen] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)

    def paths(self) -> list[str]:
        return [s.path for s in self.seen]


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            stub.seen.append(Seen("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if self.path.startswith("/redirect"):
                self._answer(302, b"", [("Location", f"http://{HOST}:{stub.port}/target")])
            elif self.path.startswith("/fail"):
                self._answer(500, b"secret internals")
            elif self.path.startswith("/big"):
                self._answer(200, b"x" * (1024 * 1024))
            else:
                self._answer(204, b"")

        def _answer(self, status: int, body: bytes, extra: Sequence[tuple[str, str]] = ()) -> None:
            self.send_response(status)
            for name, value in extra:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                with suppress(OSError):  # the client reads 64 KiB at most, then leaves
                    self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serve(tls: ssl.SSLContext | None = None) -> Iterator[Stub]:
    stub = Stub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    server.daemon_threads = True
    if tls is not None:
        tls.sni_callback = lambda _sock, name, _ctx: stub.server_names.append(name)
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    stub.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def stub() -> Iterator[Stub]:
    with serve() as running:
        yield running


def test_delivers_signed_body_and_headers_to_the_vetted_address(stub: Stub) -> None:
    secret = webhook_signing.new_secret()
    now = int(time.time())
    headers = webhook_signing.headers([secret], "msg_1", now, BODY)
    resolver = FakeResolver("127.0.0.1")

    result = deliver(
        f"http://{HOST}:{stub.port}/hooks/in?x=1", BODY, headers, policy=LOCAL, resolver=resolver
    )

    assert (result.status, result.error, result.ok) == (204, None, True)
    assert result.latency_ms >= 0
    assert resolver.calls == 1
    [seen] = stub.seen
    assert (seen.method, seen.path, seen.body) == ("POST", "/hooks/in?x=1", BODY)
    assert seen.headers["host"] == f"{HOST}:{stub.port}"
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["user-agent"].startswith("Kaibo-Webhooks/")
    assert webhook_signing.verify(secret, seen.headers, seen.body, now=now)


def test_without_allow_local_loopback_is_refused(stub: Stub) -> None:
    result = deliver(
        f"https://{HOST}:{stub.port}/in", BODY, {}, policy=TargetPolicy(), resolver=FakeResolver("127.0.0.1")
    )
    assert (result.status, result.error) == (None, "target_private")
    assert stub.seen == []


def test_a_rebinding_resolver_is_asked_once(stub: Stub) -> None:
    resolver = FakeResolver("127.0.0.1", "10.0.0.7")
    result = deliver(f"http://{HOST}:{stub.port}/in", BODY, {}, policy=LOCAL, resolver=resolver)
    assert result.ok
    assert resolver.calls == 1
    assert stub.paths() == ["/in"]


def test_a_redirect_is_not_followed(stub: Stub) -> None:
    result = deliver(
        f"http://{HOST}:{stub.port}/redirect", BODY, {}, policy=LOCAL, resolver=FakeResolver("127.0.0.1")
    )
    assert (result.status, result.error, result.ok) == (302, "redirect_not_followed", False)
    assert stub.paths() == ["/redirect"]  # never /target


def test_an_error_status_is_returned_without_the_body(stub: Stub) -> None:
    result = deliver(
        f"http://{HOST}:{stub.port}/fail", BODY, {}, policy=LOCAL, resolver=FakeResolver("127.0.0.1")
    )
    assert (result.status, result.error, result.ok) == (500, None, False)
    assert "secret" not in repr(result)


def test_a_large_response_is_cut_short(stub: Stub) -> None:
    result = deliver(
        f"http://{HOST}:{stub.port}/big", BODY, {}, policy=LOCAL, resolver=FakeResolver("127.0.0.1")
    )
    assert (result.status, result.error) == (200, None)


def test_connection_refused() -> None:
    with closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = deliver(f"http://{HOST}:{port}/in", BODY, {}, policy=LOCAL, resolver=FakeResolver("127.0.0.1"))
    assert (result.status, result.error) == (None, "connection_refused")


@contextmanager
def silent_server(trickle: bool = False) -> Iterator[int]:
    """Accepts connections and never answers (or answers one byte every 0.1 s, forever)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.1)
    stop = threading.Event()
    accepted: list[socket.socket] = []

    def run() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
                accepted.append(connection)
            except TimeoutError:
                pass
            if trickle:
                for connection in accepted:
                    with suppress(OSError):
                        connection.sendall(b"H")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for connection in accepted:
            connection.close()
        listener.close()


@pytest.mark.parametrize("trickle", [False, True], ids=["silent", "trickling"])
def test_a_server_that_does_not_answer_times_out_within_the_timeout(trickle: bool) -> None:
    with silent_server(trickle) as port:
        started = time.monotonic()
        result = deliver(
            f"http://{HOST}:{port}/in",
            BODY,
            {},
            policy=LOCAL,
            timeout_seconds=0.5,
            resolver=FakeResolver("127.0.0.1"),
        )
        elapsed = time.monotonic() - started
    assert (result.status, result.error) == (None, "timeout")
    assert 0.4 <= elapsed < 1.5
    assert 400 <= result.latency_ms < 1500


# --- https: SNI and certificate checks on the hostname, connection to the pinned address -----------


@dataclass(frozen=True)
class Pki:
    ca: Path
    certs: dict[str, tuple[Path, Path]]  # host name → (certificate, key)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = tmp_path_factory.mktemp("pki")
    now = datetime.datetime.now(datetime.UTC)

    def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Kaibo test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path = folder / "ca.pem"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    certs = {}
    for host in (HOST, "other.test"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        cert_path, key_path = folder / f"{host}.pem", folder / f"{host}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(pem_key(key))
        certs[host] = (cert_path, key_path)
    return Pki(ca_path, certs)


def server_context(pki: Pki, host: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*map(str, pki.certs[host]))
    return context


def test_https_verifies_the_hostname_and_sends_sni(pki: Pki) -> None:
    with serve(server_context(pki, HOST)) as stub:
        result = deliver(
            f"https://{HOST}:{stub.port}/in",
            BODY,
            {"content-type": "application/json"},
            policy=LOCAL,
            resolver=FakeResolver("127.0.0.1"),
            tls_context=ssl.create_default_context(cafile=str(pki.ca)),
        )
    assert (result.status, result.error) == (204, None)
    assert stub.server_names == [HOST]
    assert stub.seen[0].headers["host"] == f"{HOST}:{stub.port}"
    assert stub.seen[0].body == BODY


def test_https_refuses_a_certificate_for_another_host(pki: Pki) -> None:
    with serve(server_context(pki, "other.test")) as stub:
        result = deliver(
            f"https://{HOST}:{stub.port}/in",
            BODY,
            {},
            policy=LOCAL,
            resolver=FakeResolver("127.0.0.1"),
            tls_context=ssl.create_default_context(cafile=str(pki.ca)),
        )
    assert (result.status, result.error) == (None, "tls_error")
    assert stub.seen == []


def test_https_refuses_an_untrusted_certificate(pki: Pki) -> None:
    with serve(server_context(pki, HOST)) as stub:
        result = deliver(
            f"https://{HOST}:{stub.port}/in", BODY, {}, policy=LOCAL, resolver=FakeResolver("127.0.0.1")
        )
    assert (result.status, result.error) == (None, "tls_error")
    assert stub.seen == []


def test_https_to_a_plain_http_server_is_a_tls_error(stub: Stub) -> None:
    result = deliver(
        f"https://{HOST}:{stub.port}/in", BODY, {}, policy=LOCAL, resolver=FakeResolver("127.0.0.1")
    )
    assert (result.status, result.error) == (None, "tls_error")
