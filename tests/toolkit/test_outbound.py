"""The outbound door connects to the address it checked (issue 29 item 4).

Every server here listens on loopback; names are answered by a test resolver. A connection
that would leave the machine is intercepted (`socket.create_connection` records it and refuses),
so no test sends traffic anywhere but 127.0.0.0/8.
"""

from __future__ import annotations

import http.server
import socket
import ssl
import threading

import pytest

from tests.support.tls import TlsServer, make_ca
from toolkit import outbound
from toolkit.outbound import Policy, Refused


class Recorder(http.server.ThreadingHTTPServer):
    """A loopback HTTP server recording (path, Host header) of each request; `/go?to=URL` redirects there."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.requests: list[tuple[str, str]] = []
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                recorder.requests.append((self.path, self.headers.get("Host", "")))
                if self.path.startswith("/go?to="):
                    self.send_response(302)
                    self.send_header("Location", self.path.removeprefix("/go?to="))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = b"x" * 100_000 if self.path == "/big" else f"served by {recorder.server_address[0]}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        super().__init__((host, port), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]

    def close(self) -> None:
        self.shutdown()
        self.server_close()


@pytest.fixture
def servers():
    started: list[Recorder] = []

    def start(host: str = "127.0.0.1", port: int = 0) -> Recorder:
        server = Recorder(host, port)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


class Rebinding:
    """A resolver that answers `first` on the first lookup of a name and `later` on every other."""

    def __init__(self, first: list[str], later: list[str]):
        self.first, self.later, self.lookups = first, later, []

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        return self.first if len(self.lookups) == 1 else self.later


@pytest.fixture
def connections(monkeypatch):
    """Record every TCP connect; one to a non-loopback address is refused without leaving the machine."""
    made: list[tuple[str, int]] = []
    real = socket.create_connection

    def create_connection(address, *args, **kwargs):
        made.append((address[0], address[1]))
        if not address[0].startswith("127."):
            raise ConnectionRefusedError(f"test: no traffic to {address[0]}")
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", create_connection)
    return made


def test_a_rebinding_name_is_connected_to_its_first_checked_answer(servers, connections):
    first = servers("127.0.0.1")
    second = servers("127.0.0.2", first.port)  # same port, the answer DNS gives next time
    resolver = Rebinding(["127.0.0.1"], ["127.0.0.2"])
    policy = Policy(allow_hosts=("rebind.test",), resolver=resolver)

    response = outbound.request(policy, "GET", f"http://rebind.test:{first.port}/a")

    assert response.status_code == 200 and response.text() == "served by 127.0.0.1"
    assert first.requests == [("/a", f"rebind.test:{first.port}")]  # the name kept in Host
    assert second.requests == [] and resolver.lookups == ["rebind.test"]  # resolved once
    assert connections == [("127.0.0.1", first.port)]


def test_a_name_checked_public_then_answering_loopback_never_reaches_loopback(servers, connections):
    inner = servers("127.0.0.1")
    resolver = Rebinding(["93.184.216.34"], ["127.0.0.1"])  # public first (the check passes), loopback afterwards
    assert outbound.refused_reason("93.184.216.34") == ""

    with pytest.raises(outbound.Failed):  # the test refuses the public connect: nothing leaves the machine
        outbound.request(Policy(resolver=resolver), "GET", f"http://rebind.test:{inner.port}/secret")

    assert inner.requests == []
    assert connections == [("93.184.216.34", inner.port)]  # the checked answer, nothing else
    assert resolver.lookups == ["rebind.test"]


@pytest.mark.parametrize("answers, reason", [
    (["127.0.0.1"], "loopback"), (["10.0.0.8"], "private"), (["169.254.169.254"], "cloud metadata"),
    (["100.64.3.4"], "carrier-grade NAT"), (["fe80::1"], "link-local"), (["::ffff:192.168.1.1"], "private"),
    (["8.8.8.8", "127.0.0.1"], "loopback"),  # one inward answer among public ones is enough
])
def test_a_name_resolving_inward_is_refused_before_any_connection(answers, reason, connections):
    policy = Policy(resolver=lambda host, port: answers)
    with pytest.raises(Refused, match=f"a {reason} address"):
        outbound.request(policy, "GET", "http://inward.test/")
    assert connections == []


@pytest.mark.parametrize("url, reason", [
    ("http://127.0.0.1:1/", "127.0.0.1 is a loopback address"), ("http://[::1]:1/", "::1 is a loopback address"),
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata"), ("http://100.100.100.200/", "cloud metadata"),
    ("http://localhost:1/", "loopback name"), ("http://0.0.0.0:1/", "unspecified"),
    ("ftp://example.com/", "http(s)"), ("https://user:pw@example.com/", "credentials"),
])
def test_inward_literals_and_bad_urls_are_refused(url, reason, connections):
    with pytest.raises(Refused, match=reason.replace("(", r"\(").replace(")", r"\)")):
        outbound.request(Policy(), "GET", url)
    assert connections == []


def test_a_redirect_to_loopback_is_refused_and_never_sent(servers, connections):
    target = servers("127.0.0.1")
    edge = servers("127.0.0.2")
    policy = Policy(allow_hosts=("edge.test",), resolver=lambda host, port: ["127.0.0.2"])
    url = f"http://edge.test:{edge.port}/go?to=http://127.0.0.1:{target.port}/admin"

    not_followed = outbound.request(policy, "GET", url)
    assert not_followed.status_code == 302 and not_followed.is_redirect
    with pytest.raises(Refused, match="127.0.0.1 is a loopback address"):
        outbound.request(policy, "GET", url, follow_redirects=True)
    assert target.requests == [] and len(edge.requests) == 2


def _pair_on_one_port(servers) -> tuple:
    """Start a server on 127.0.0.1 and one on 127.0.0.2 sharing a port (another process may hold
    a port on 127.0.0.1 that is free on 127.0.0.2, so the 127.0.0.1 side picks it)."""
    for _ in range(20):
        target = servers("127.0.0.1")
        try:
            return servers("127.0.0.2", target.port), target
        except OSError:
            continue
    raise AssertionError("no port free on both 127.0.0.1 and 127.0.0.2")


def test_a_redirect_hop_is_checked_by_name_too(servers, connections):
    edge, target = _pair_on_one_port(servers)
    answers = {"edge.test": ["127.0.0.2"], "inner.test": ["127.0.0.1"]}
    policy = Policy(allow_hosts=("edge.test",), resolver=lambda host, port: answers[host])
    with pytest.raises(Refused, match="inner.test resolves to 127.0.0.1, a loopback address"):
        outbound.request(policy, "GET", f"http://edge.test:{edge.port}/go?to=http://inner.test:{edge.port}/", follow_redirects=True)
    assert target.requests == []
    admitted = Policy(allow_hosts=("edge.test", "inner.test"), resolver=lambda host, port: answers[host])
    followed = outbound.request(admitted, "GET", f"http://edge.test:{edge.port}/go?to=http://inner.test:{edge.port}/in", follow_redirects=True)
    assert followed.status_code == 200 and target.requests == [("/in", f"inner.test:{edge.port}")]


@pytest.mark.parametrize("entries, host, admitted", [
    (["api.example.com"], "api.example.com", True), (["api.example.com"], "API.Example.com.", True),
    (["api.example.com"], "example.com", False), (["api.example.com"], "api.example.com.evil.test", False),
    (["api.example.com"], "x.api.example.com", False), (["*.corp.test"], "git.corp.test", True),
    (["*.corp.test"], "corp.test", False), (["*.corp.test"], "evilcorp.test", False),
    (["10.0.0.5"], "10.0.0.5", True), (["10.0.0.5"], "10.0.0.6", False), (["::1"], "[0:0::1]", True), ([], "anything", False),
])
def test_an_allow_list_admits_exactly_what_it_names(entries, host, admitted):
    assert outbound.host_matches(entries, host) is admitted
    policy = Policy(allow_hosts=tuple(entries), resolver=lambda name, port: ["127.0.0.1"])
    if admitted:
        assert policy.address(host, 80) in ("127.0.0.1", "::1", "10.0.0.5")
    else:
        with pytest.raises(Refused):
            policy.address(host, 80)


def test_https_only_admits_plain_http_only_for_named_hosts():
    policy = Policy(allow_hosts=("hook.test",), https_only=True)
    with pytest.raises(Refused, match="must use https"):
        policy.check_url("http://example.com/hook")
    assert policy.check_url("http://hook.test:8080/x") == ("http", "hook.test", 8080)
    assert policy.check_url("https://example.com/x") == ("https", "example.com", 443)


def test_tls_keeps_the_name_for_sni_and_the_certificate(tmp_path, connections):
    certs = make_ca(tmp_path, "pinned.test")
    server = TlsServer(certs).start()
    try:
        trust = ssl.create_default_context(cafile=str(certs.ca))
        policy = Policy(allow_hosts=("pinned.test",), resolver=lambda host, port: ["127.0.0.1"])
        response = outbound.request(policy, "GET", f"https://pinned.test:{server.port}/", verify=trust)
        assert response.status_code == 200 and response.text() == "hello"
        assert server.seen == [("pinned.test", f"pinned.test:{server.port}")]
        wrong = Policy(allow_hosts=("other.test",), resolver=lambda host, port: ["127.0.0.1"])
        with pytest.raises(outbound.Failed, match="certificate|CERTIFICATE"):
            outbound.request(wrong, "GET", f"https://other.test:{server.port}/", verify=trust)  # the name is checked, not the IP
    finally:
        server.stop()


def test_the_ca_bundle_is_loaded_once_per_process_not_per_request(servers, monkeypatch):
    """Loading the CA bundle costs tens of ms of CPU; every webhook attempt used to load it twice."""
    import httpx2

    built = []
    real = httpx2.create_ssl_context
    monkeypatch.setattr(outbound, "_contexts", {})
    monkeypatch.setattr(httpx2, "create_ssl_context", lambda *a, **k: built.append(k.get("verify", a[0] if a else True)) or real(*a, **k))
    server = servers("127.0.0.1")
    policy = Policy(allow_hosts=("127.0.0.1",))
    for _ in range(3):
        assert outbound.request(policy, "GET", f"http://127.0.0.1:{server.port}/a").status_code == 200

    assert built == [True]  # one context built, then shared
    shared = outbound.ssl_context(True)
    assert outbound.PinnedTransport(policy)._pool._ssl_context is shared
    assert outbound.AsyncPinnedTransport(policy)._pool._ssl_context is shared
    own = ssl.create_default_context()
    assert outbound.ssl_context(own) is own and outbound.ssl_context(False).verify_mode == ssl.CERT_NONE


def test_the_body_and_the_time_are_bounded(servers):
    server = servers("127.0.0.1")
    policy = Policy(allow_hosts=("127.0.0.1",))
    big = outbound.request(policy, "GET", f"http://127.0.0.1:{server.port}/big", max_bytes=1000)
    assert big.truncated and big.content == b"x" * 1000
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts the connection, never answers
    try:
        with pytest.raises(outbound.TimedOut):
            outbound.request(policy, "GET", f"http://127.0.0.1:{silent.getsockname()[1]}/", timeout=0.5)
    finally:
        silent.close()


def test_a_name_that_does_not_resolve_is_refused():
    with pytest.raises(outbound.Unresolved, match="does not resolve"):
        outbound.request(Policy(), "GET", "http://no-such-host.invalid/")


async def test_the_async_client_for_sdks_is_pinned_and_checked(servers, connections):
    first = servers("127.0.0.1")
    servers("127.0.0.2", first.port)
    resolver = Rebinding(["127.0.0.1"], ["127.0.0.2"])
    async with outbound.async_client(Policy(allow_hosts=("sdk.test",), resolver=resolver)) as client:
        answer = await client.get(f"http://sdk.test:{first.port}/sdk")
        assert answer.text == "served by 127.0.0.1" and resolver.lookups == ["sdk.test"]
    async with outbound.async_client(Policy(resolver=lambda host, port: ["127.0.0.1"])) as client:
        with pytest.raises(Refused, match="loopback"):
            await client.get(f"http://sdk.test:{first.port}/sdk")
        with pytest.raises(Refused, match="loopback"):
            await client.get(f"http://127.0.0.1:{first.port}/sdk")
    assert first.requests == [("/sdk", f"sdk.test:{first.port}")]


# --- connections kept open (`keep_alive=True`: webhook drains, issue 52) ------------------------


class KeepAliveServer(http.server.ThreadingHTTPServer):
    """A loopback HTTP/1.1 server recording (client port, Host header) of each request.

    `closing`: answer and then close the connection (without saying so in a header, as a server
    ending an idle keep-alive does); `closed` is set each time it has closed one.
    """

    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.requests: list[tuple[int, str]] = []
        self.closing = False
        self.closed = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.requests.append((self.client_address[1], self.headers.get("Host", "")))
                body = f"served by {server.server_address[0]}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                if server.closing:
                    self.close_connection = True

            def log_message(self, *args):
                pass

        super().__init__((host, port), Handler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()  # a quick shutdown

    def shutdown_request(self, request):
        super().shutdown_request(request)
        self.closed.set()

    @property
    def port(self) -> int:
        return self.server_address[1]

    def close(self) -> None:
        self.shutdown()
        self.server_close()


@pytest.fixture
def kept_servers():
    outbound.kept.close()
    started: list[KeepAliveServer] = []

    def start(host: str = "127.0.0.1", port: int = 0) -> KeepAliveServer:
        server = KeepAliveServer(host, port)
        started.append(server)
        return server

    yield start
    outbound.kept.close()
    for server in started:
        server.close()


def _post(policy: Policy, url: str) -> outbound.Response:
    return outbound.request(policy, "POST", url, content=b"{}", keep_alive=True)


def test_a_kept_connection_is_reused_and_stays_on_the_checked_address(kept_servers, connections):
    server = kept_servers("127.0.0.1")
    resolver = Rebinding(["127.0.0.1"], ["127.0.0.1"])
    policy = Policy(allow_hosts=("hooks.test",), resolver=resolver)
    url = f"http://hooks.test:{server.port}/hook"

    answers = [_post(policy, url) for _ in range(3)]

    assert [a.status_code for a in answers] == [200, 200, 200] and answers[0].text() == "served by 127.0.0.1"
    assert connections == [("127.0.0.1", server.port)]  # one connection, to the checked address
    assert len({port for port, _ in server.requests}) == 1  # all three on it
    assert [host for _, host in server.requests] == [f"hooks.test:{server.port}"] * 3  # the name kept in Host
    assert resolver.lookups == ["hooks.test"] * 3  # resolved and checked for every request
    assert outbound.kept.destinations() == [("http", "hooks.test", server.port, True, "127.0.0.1")]


def test_a_connection_the_receiver_closed_is_replaced_by_a_new_one(kept_servers, connections):
    server = kept_servers("127.0.0.1")
    server.closing = True
    policy = Policy(allow_hosts=("127.0.0.1",))
    url = f"http://127.0.0.1:{server.port}/hook"

    assert _post(policy, url).status_code == 200
    assert server.closed.wait(30)  # the receiver has closed the kept connection
    assert _post(policy, url).status_code == 200  # sent on a new one, not failed on the closed one

    assert connections == [("127.0.0.1", server.port)] * 2
    assert len({port for port, _ in server.requests}) == 2


def test_a_changed_dns_answer_never_reuses_the_connection_to_the_old_address(kept_servers, connections):
    first = kept_servers("127.0.0.1")
    for _ in range(20):  # a port free on both loopback addresses
        try:
            second = kept_servers("127.0.0.2", first.port)
            break
        except OSError:
            first = kept_servers("127.0.0.1")
    resolver = Rebinding(["127.0.0.1"], ["127.0.0.2"])
    policy = Policy(allow_hosts=("moving.test",), resolver=resolver)
    url = f"http://moving.test:{first.port}/hook"

    assert _post(policy, url).text() == "served by 127.0.0.1"
    assert _post(policy, url).text() == "served by 127.0.0.2"  # the new answer, though a connection to the old one is open

    assert connections == [("127.0.0.1", first.port), ("127.0.0.2", first.port)]
    assert len(first.requests) == 1 and len(second.requests) == 1
    assert outbound.kept.destinations() == [("http", "moving.test", first.port, True, "127.0.0.2")]  # the old one dropped


def test_a_kept_connection_does_not_skip_the_address_check(kept_servers, connections):
    server = kept_servers("127.0.0.1")
    resolver = lambda host, port: ["127.0.0.1"]  # noqa: E731
    url = f"http://hooks.test:{server.port}/hook"
    assert _post(Policy(allow_hosts=("hooks.test",), resolver=resolver), url).status_code == 200

    with pytest.raises(Refused, match="hooks.test resolves to 127.0.0.1, a loopback address"):
        _post(Policy(resolver=resolver), url)  # a policy that does not admit the name: refused, the open connection unused

    assert len(server.requests) == 1 and connections == [("127.0.0.1", server.port)]


def test_a_kept_connection_serves_an_international_host_name(kept_servers, connections):
    server = kept_servers("127.0.0.1")
    policy = Policy(allow_hosts=("bücher.test",), resolver=lambda host, port: ["127.0.0.1"])
    url = f"http://bücher.test:{server.port}/hook"

    assert [_post(policy, url).status_code for _ in range(2)] == [200, 200]

    assert connections == [("127.0.0.1", server.port)]
    assert [host for _, host in server.requests] == [f"xn--bcher-kva.test:{server.port}"] * 2  # the name, IDNA-encoded
