"""The fetch tools, outside a turn: the SSRF refusal corpus, allowlists, redirects, limits.

No test here can send a packet off the machine, even with the guard broken: every
`fetch_url` runs on `Sealed`, which refuses (and records) any connection but one to the
127.0.0.1 test server, reached through `PUBLIC_IP`; named targets point at that server.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests._fetch_fixtures import PUBLIC_IP, LeakAttempt, Resolver, Sealed, local_server
from think import FetchTarget, FetchTools, Think, UserError, tool
from think.tools import address_refusal, parse_url

REFUSED_LITERALS = [
    "http://127.0.0.1/",
    "http://127.1/",
    "http://127.0.1/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0x7f.1/",
    "http://0x7F.0x00.0x00.0x01/",
    "http://0177.0.0.1/",
    "http://017700000001/",
    "http://127.000.000.001/",
    "http://%31%32%37.0.0.1/",
    "http://127.0.0.1./",
    "http://0/",
    "http://0.0.0.0/",
    "http://10.0.0.1/",
    "http://012.0.0.1/",
    "http://172.16.0.1/",
    "http://172.31.255.255/",
    "http://192.168.1.1/",
    "http://3232235777/",
    "http://100.64.0.1/",
    "http://100.100.100.200/",
    "http://169.254.169.254/latest/meta-data/",
    "http://0xa9fea9fe/",
    "http://2852039166/",
    "http://169.254.43518/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    "http://198.18.0.1/",
    "http://[::1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:10.0.0.1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[2002:7f00:1::]/",
    "http://[2002:a9fe:a9fe::]/",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
    "http://[fd00:ec2::254]/",
    "http://[ff02::1]/",
    "http://[2001:0::1]/",
    # Every other reserved IPv6 form: mapped, 6to4, NAT64 and Teredo around private IPv4,
    # discard, documentation, unique-local, link-local, multicast, unspecified, loopback.
    "http://[::ffff:192.168.0.1]/",
    "http://[2002:c0a8:1::1]/",
    "http://[2002:a00:1::]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[64:ff9b::10.0.0.1]/",
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
    "http://[100::1]/",
    "http://[2001:db8::1]/",
    "http://[fd00::1]/",
    "http://[febf::1]/",
    "http://[ff05::1:3]/",
    "http://[0::0]/",
    "http://[::0:1]/",
    "http://localhost/",
    "http://LOCALHOST./",
    "http://app.localhost/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://docs-api.internal:8080/",
    "http://printer.local/",
    "http://intranet/",
    "https://127.0.0.1:8443/",
]
"""Private, loopback, link-local (metadata), unique-local, shared, multicast and reserved
addresses in many spellings, and internal names: each is on the allowlist (misconfigured on
purpose), and each must be refused before any lookup or connection."""

REFUSED_SHAPES = [
    "http://user:pw@example.com/",
    "http://user@example.com/",
    "ftp://example.com/",
    "file:///etc/passwd",
    "gopher://example.com/",
    "http://[::1%25eth0]/",
    "http://256.0.0.1/",
    "http://1.2.3.4.5/",
    "http://0x1g.0.0.1/",
    "http://exa mple.com/",
    "http:\\\\example.com\\",
    "http://example.com:99999/",
]


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with local_server() as running:
        yield running


@pytest.fixture(autouse=True)
def loopback_only(server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second seal, below the code under test: in this process a socket may connect only to
    the test server, and no name is looked up but the loopback's. Were the fetch tools to
    bypass their connector and resolver, the test fails here instead of sending a packet."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and (
            address[0] != "127.0.0.1" or address[1] != server.port
        ):
            raise AssertionError(f"a test opened a socket to {address!r}")

    def connect(sock: socket.socket, address: Any) -> None:
        check(sock, address)
        real_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        check(sock, address)
        return real_connect_ex(sock, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in ("127.0.0.1", "localhost", None):
            raise AssertionError(f"a test looked up {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def _public_tools(allowlist: list[str], **more: Any) -> tuple[FetchTools, Sealed, Resolver]:
    sealed = more.pop("connector", None) or Sealed()
    resolver = more.pop("resolver", None) or Resolver()
    tools = FetchTools(allowlist=allowlist, resolver=resolver, connector=sealed, **more)
    return tools, sealed, resolver


@pytest.mark.parametrize("url", REFUSED_LITERALS)
async def test_private_and_internal_targets_are_refused_even_when_allowlisted(url: str) -> None:
    tools, sealed, resolver = _public_tools([url])
    result = await tools.fetch_url(url)
    assert result["ok"] is False and result["code"] == "disallowed_url", result
    assert sealed.attempts == [] and resolver.lookups == []


RESERVED_IPV6 = [
    ("::8.8.8.8", "IPv4-compatible"),
    ("::127.0.0.1", "IPv4-compatible"),
    ("::10.0.0.1", "IPv4-compatible"),
    ("::ffff:0:127.0.0.1", "IPv4-translated"),
    ("::ffff:0:8.8.8.8", "IPv4-translated"),
    ("fec0::1", "site-local"),
    ("feff::ffff", "site-local"),
    ("64:ff9b:1::808:808", "local-use NAT64"),
    ("3fff::1", "documentation"),
    ("5f00::1", "SRv6"),
    ("4000::1", "outside IPv6's global unicast space"),
    ("1::1", "outside IPv6's global unicast space"),
]
"""IPv6 that `ipaddress` calls global but no public host has: `fetch_url` let these through
before (issue 31); each must be refused, as an address, a URL literal or a DNS answer."""


@pytest.mark.parametrize(("address", "why"), RESERVED_IPV6)
async def test_reserved_ipv6_is_refused_before_any_connection(address: str, why: str) -> None:
    refusal = address_refusal(ipaddress.ip_address(address))
    assert refusal is not None and why in refusal
    # As a URL literal: refused before any lookup.
    url = f"http://[{address}]/"
    tools, sealed, resolver = _public_tools([url])
    result = await tools.fetch_url(url)
    assert result["code"] == "disallowed_url" and why in result["message"], result
    assert sealed.attempts == [] and resolver.lookups == []
    # As the answer for a public name: refused after the lookup, before the connection.
    resolver = Resolver({"docs.example.com": [[address]]})
    tools, sealed, _ = _public_tools(["https://docs.example.com/**"], resolver=resolver)
    result = await tools.fetch_url("https://docs.example.com/page")
    assert result["code"] == "disallowed_url" and why in result["message"], result
    assert sealed.attempts == [] and resolver.lookups == ["docs.example.com"]


def test_public_ipv6_forms_stay_allowed() -> None:
    """The rule refuses blocks, not IPv6: global unicast, and public IPv4 spelled as mapped,
    NAT64 or 6to4, still pass the address check (checked here without a connection)."""
    for address in (
        "2001:4860:4860::8888",
        "2606:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::8.8.8.8",
        "2002:808:808::1",
        "2620:4f:8000::1",
    ):
        assert address_refusal(ipaddress.ip_address(address)) is None, address


@pytest.mark.parametrize("url", REFUSED_SHAPES)
async def test_urls_of_a_refused_shape(url: str) -> None:
    tools, sealed, _ = _public_tools(["https://example.com/**"])
    result = await tools.fetch_url(url)
    assert result["ok"] is False and result["code"] == "disallowed_url", result
    assert sealed.attempts == []


@pytest.mark.parametrize(
    ("answers", "why"),
    [
        (["10.0.0.5"], "10.0.0.5"),
        (["127.0.0.1"], "loopback"),
        (["169.254.169.254"], "link-local"),
        (["::1"], "loopback"),
        (["::ffff:10.0.0.1"], "embeds 10.0.0.1"),
        (["fd12:3456::1"], "unique-local"),
        ([PUBLIC_IP, "192.168.0.10"], "192.168.0.10"),
        (["not-an-address"], "not an address"),
    ],
)
async def test_names_resolving_to_refused_addresses(answers: list[str], why: str) -> None:
    resolver = Resolver({"docs.example.com": [answers]})
    tools, sealed, _ = _public_tools(["https://docs.example.com/**"], resolver=resolver)
    result = await tools.fetch_url("https://docs.example.com/page")
    assert result["code"] == "disallowed_url" and why in result["message"], result
    assert sealed.attempts == [] and resolver.lookups == ["docs.example.com"]


async def test_the_checked_address_is_the_one_connected_to(server: Any) -> None:
    """Rebinding: the name answers a public address, then a private one. One lookup per
    connection, and the connection goes to the address that was checked."""
    resolver = Resolver({"docs.example.com": [[PUBLIC_IP], ["127.0.0.1"]]})
    sealed = Sealed({PUBLIC_IP: server.port})
    tools, _, _ = _public_tools(["http://docs.example.com/**"], resolver=resolver, connector=sealed)
    first = await tools.fetch_url("http://docs.example.com/v1/docs/page")
    assert first["ok"] is True and first["body"].startswith("# Limits"), first
    assert sealed.attempts == [(PUBLIC_IP, 80)] and resolver.lookups == ["docs.example.com"]
    # The next lookup answers loopback: refused, never connected.
    second = await tools.fetch_url("http://docs.example.com/v1/docs/page")
    assert second["code"] == "disallowed_url" and "loopback" in second["message"]
    assert sealed.attempts == [(PUBLIC_IP, 80)]
    # The Host header named the site, not the address.
    assert server.seen[-1][1]["host"] == "docs.example.com"


@pytest.mark.parametrize(
    ("to", "code"),
    [
        ("http://127.0.0.1:PORT/secret", "disallowed_redirect"),
        ("http://169.254.169.254/latest/meta-data/", "disallowed_redirect"),
        ("http://[::ffff:127.0.0.1]/", "disallowed_redirect"),
        ("http://evil.example.net/", "disallowed_redirect"),
        ("http://inside.example.com/x", "disallowed_redirect"),  # allowlisted, resolves private
        ("file:///etc/passwd", "disallowed_redirect"),
        ("/v1/docs/page", None),
    ],
)
async def test_every_redirect_hop_is_checked(server: Any, to: str, code: str | None) -> None:
    resolver = Resolver({"docs.example.com": [[PUBLIC_IP]], "inside.example.com": [["10.1.2.3"]]})
    sealed = Sealed({PUBLIC_IP: server.port})
    tools, _, _ = _public_tools(
        ["http://docs.example.com/**", "http://inside.example.com/**", "http://127.0.0.1/**"],
        resolver=resolver,
        connector=sealed,
    )
    result = await tools.fetch_url(f"http://docs.example.com/go/?to={to}")
    if code is None:
        assert result["ok"] is True and result["final_url"].endswith("/v1/docs/page")
    else:
        assert result["ok"] is False and result["code"] == code, result
    assert {host for host, _ in sealed.attempts} == {PUBLIC_IP}


@pytest.mark.parametrize(
    ("pattern", "url", "allowed"),
    [
        ("https://example.com", "https://example.com/any/path?q=1", True),
        ("https://example.com", "https://EXAMPLE.com./x#frag", True),
        ("https://example.com", "http://example.com/", False),
        ("https://example.com", "https://example.com:8443/", False),
        ("https://example.com", "https://sub.example.com/", False),
        ("https://x.com/v1", "https://x.com/v1", True),
        ("https://x.com/v1", "https://x.com/v1/more", False),
        ("https://x.com/v1", "https://x.com/v1?page=2", True),
        ("https://x.com/docs/*", "https://x.com/docs/a", True),
        ("https://x.com/docs/*", "https://x.com/docs/a/b", False),
        ("https://x.com/docs/**", "https://x.com/docs/a/b", True),
        ("https://x.com/docs/**", "https://x.com/docs/../admin", False),
        ("https://x.com/docs/**", "https://x.com/docs/%2e%2e/admin", False),
        ("https://x.com/docs/**", "https://x.com/docs/./a/../b", True),
        ("https://x.com/docs/**", "https://x.com/other", False),
    ],
)
async def test_allowlist_semantics(pattern: str, url: str, allowed: bool) -> None:
    resolver = Resolver({"example.com": [[PUBLIC_IP]], "x.com": [[PUBLIC_IP]]})
    sealed = Sealed()  # a connection attempt means the allowlist let it through
    tools, _, _ = _public_tools([pattern], resolver=resolver, connector=sealed)
    if allowed:
        with pytest.raises(LeakAttempt):
            await tools.fetch_url(url)
        assert [host for host, _ in sealed.attempts] == [PUBLIC_IP]
    else:
        result = await tools.fetch_url(url)
        assert result["code"] == "disallowed_url" and not sealed.attempts, result


def test_every_spelling_reads_as_its_address() -> None:
    assert parse_url("http://0x7f.1/").host == "127.0.0.1"
    assert parse_url("http://017700000001/").host == "127.0.0.1"
    assert parse_url("http://3232235777/").host == "192.168.1.1"
    assert parse_url("http://1.2.3/").host == "1.2.0.3"
    assert parse_url("http://1.0x10203/").host == "1.1.2.3"
    assert parse_url("http://[::FFFF:7f00:1]/").host == "::ffff:7f00:1"
    assert parse_url("http://Bücher.example/a/./b/../c").host == "xn--bcher-kva.example"
    assert parse_url("http://x.com/a/./b/../c").path == "/a/c"
    public = parse_url(f"http://{PUBLIC_IP}/").ip
    assert public is not None and address_refusal(public) is None


# -- named targets: real requests to the 127.0.0.1 server --------------------------------------


def _target(server: Any, **more: Any) -> FetchTools:
    options: dict[str, Any] = {"allowlist": ["/v1/docs/**"], "headers": {"x-agent": "think"}}
    options.update(more.pop("target", {}))
    return FetchTools(
        targets={"docs": FetchTarget(base_url=f"http://127.0.0.1:{server.port}", **options)},
        **more,
    )


async def test_a_target_reads_allowlisted_paths(server: Any) -> None:
    tools = _target(server)
    page = await tools.fetch_target("docs", "/v1/docs/page")
    assert page == {
        "ok": True,
        "status": 200,
        "final_url": f"http://127.0.0.1:{server.port}/v1/docs/page",
        "content_type": "text/markdown",
        "bytes": len(b"# Limits\n\nAt most 10 requests."),
        "truncated": False,
        "response": "text",
        "body": "# Limits\n\nAt most 10 requests.",
    }
    data = await tools.fetch_target("docs", "v1/docs/data")
    assert data["json"] == {"items": [1, 2, 3]} and data["response"] == "json"
    for refused in ["/v1/other", "/v1/docs/../secret", "http://evil.com/v1/docs/x", "//evil/x"]:
        answer = await tools.fetch_target("docs", refused)
        assert answer["code"] == "disallowed_url", (refused, answer)
    assert not any(p.startswith(("/v1/other", "/v1/secret")) for p in server.paths)


async def test_fixed_headers_stay_server_side_and_never_follow_a_redirect(server: Any) -> None:
    tools = _target(server)
    echoed = await tools.fetch_target("docs", "/v1/docs/echo", headers={"Accept-Language": "fr"})
    sent = {k.lower(): v for k, v in echoed["json"].items()}
    assert sent["x-agent"] == "think" and sent["accept-language"] == "fr"
    assert sent["accept"].startswith("text/markdown")
    hop = await tools.fetch_target("docs", "/v1/docs/go/?to=/v1/docs/echo")
    assert hop["ok"] is True, hop
    assert "x-agent" not in {k.lower() for k in hop["json"]}
    refused = await tools.fetch_target("docs", "/v1/docs/echo", headers={"authorization": "x"})
    assert refused["code"] == "request_failed" and "authorization" in refused["message"]


async def test_a_target_never_follows_a_cross_origin_redirect(server: Any) -> None:
    tools = _target(server)
    before = len(server.seen)
    result = await tools.fetch_target("docs", "/v1/docs/go/?to=http://localhost:PORT/v1/docs/echo")
    assert result["code"] == "disallowed_redirect", result
    assert len(server.seen) == before + 1  # the redirect itself, never its target


@pytest.mark.parametrize(
    ("path", "options", "expected"),
    [
        ("/v1/docs/missing", {}, {"ok": False, "code": "non_2xx", "status": 404}),
        ("/v1/docs/badjson", {}, {"ok": False, "code": "invalid_json", "status": 200}),
        ("/v1/docs/big", {"max_bytes": 10_000}, {"ok": False, "code": "too_large"}),
        ("/v1/docs/bin", {}, {"ok": False, "code": "unsupported_content_type"}),
        ("/v1/docs/long", {"max_model_chars": 100}, {"ok": True, "truncated": True}),
        ("/v1/docs/slow", {"timeout": 0.5}, {"ok": False, "code": "timeout"}),
        ("/v1/docs/go/?to=/v1/docs/page", {"follow_redirects": False}, {"code": "non_2xx"}),
    ],
)
async def test_failures_are_values(
    server: Any, path: str, options: dict[str, Any], expected: dict[str, Any]
) -> None:
    result = await _target(server, **options).fetch_target("docs", path)
    assert {k: result.get(k) for k in expected} == expected, result
    if result["ok"]:
        assert len(result["body"]) == options["max_model_chars"]
    else:
        assert result["message"]


async def test_the_declared_charset_decodes_the_body(server: Any) -> None:
    tools = _target(server)
    assert (await tools.fetch_target("docs", "/v1/docs/latin1"))["body"] == "café"
    assert (await tools.fetch_target("docs", "/v1/docs/oddcharset"))["body"] == "naïve"


async def test_configuration_is_checked() -> None:
    with pytest.raises(UserError, match="target name"):
        FetchTools(targets={"bad name": FetchTarget(base_url="http://127.0.0.1:1")})
    with pytest.raises(UserError, match="allowlist entry"):
        FetchTools(allowlist=["example.com/**"])
    with pytest.raises(UserError, match="max_bytes"):
        FetchTools(allowlist=["https://example.com"], max_bytes=0)
    assert [t.name for t in FetchTools(allowlist=["https://x.com"]).tools()] == ["fetch_url"]
    both = FetchTools(
        allowlist=["https://x.com"], targets={"docs_api": FetchTarget(base_url="http://a.b")}
    )
    names = [t.name for t in both.tools()]
    assert names == ["fetch_url", "fetch_docs_api"]
    spec = both.tools()[1].spec
    assert sorted(spec.parameters["properties"]) == ["headers", "path", "response"]


def test_the_class_attribute_adds_the_tools_and_is_checked() -> None:
    @tool(name="fetch_url")
    async def mine(url: str) -> str:
        """My own fetch."""
        return url

    class Reader(Think):
        fetch_tools = FetchTools(
            allowlist=["https://x.com"], targets={"api": FetchTarget(base_url="http://a.b")}
        )

    class Replaced(Reader):
        def get_tools(self) -> list[Any]:
            return [mine]

    assert {"fetch_url", "fetch_api"} <= set(Reader().tools_by_name())
    assert Replaced().tools_by_name()["fetch_url"] is mine  # a tool of the agent's name wins
    with pytest.raises(UserError, match="fetch_tools"):

        class Wrong(Think):
            fetch_tools = {"allowlist": ["https://x.com"]}  # type: ignore[assignment]
