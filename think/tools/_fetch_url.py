"""URLs as the fetch tools check them: normalised the way a browser reads them, matched against
allowlists, and their hosts and addresses sorted into allowed and refused.

Normalisation follows the WHATWG URL rules where they decide which host is meant: the host is
percent-decoded, lowercased, IDNA-encoded and stripped of a trailing dot; a host whose last
label is a number is an IPv4 address in any of its spellings (`2130706433`, `0x7f.1`,
`0177.0.0.1`, `127.1`), read with `ipaddress` once written out as four decimal parts; `.`
and `..` segments (`%2e` too) are resolved in the path. Credentials are refused outright.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from think.tools._glob import glob_match, has_glob

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

DEFAULT_PORTS = {"http": 80, "https": 443}

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_REFUSED_SUFFIXES = (".localhost", ".internal", ".local", ".home.arpa", ".lan", ".intranet")
_REFUSED_NAMES = frozenset({"localhost", "metadata", "instance-data"})
_DOMAIN = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")


class DisallowedURL(ValueError):
    """A URL the fetch tools refuse; the message says why, for the model."""


@dataclass(frozen=True)
class NormalURL:
    scheme: str
    host: str
    """Lowercased, IDNA-encoded; an IP address in its canonical form (IPv6 without brackets)."""
    port: int
    path: str
    query: str
    ip: IPAddress | None
    """The host, when it is an address."""

    @property
    def origin(self) -> str:
        host = f"[{self.host}]" if isinstance(self.ip, ipaddress.IPv6Address) else self.host
        default = DEFAULT_PORTS[self.scheme] == self.port
        return f"{self.scheme}://{host}" + ("" if default else f":{self.port}")

    @property
    def url(self) -> str:
        """What is requested: the normalised URL with its query, without a fragment."""
        return self.origin + self.path + (f"?{self.query}" if self.query else "")


def parse_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """`host` as an IPv4 address when its last label is a number (WHATWG's rule), else None;
    raises `DisallowedURL` for a number that is no valid address (`256.1.1.1`, `0x1g`)."""
    labels = host.split(".")
    if labels and labels[-1] == "":
        labels = labels[:-1]
    if not labels or not _numeric(labels[-1]):
        return None
    if len(labels) > 4:
        raise DisallowedURL(f"{host!r} is not a valid IPv4 address")
    numbers = [_ipv4_number(label, host) for label in labels]
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise DisallowedURL(f"{host!r} is not a valid IPv4 address")
    value = last
    for i, n in enumerate(head):
        value += n * 256 ** (3 - i)
    # Written out as four decimal parts, the one spelling `ipaddress` reads.
    return ipaddress.IPv4Address(".".join(str((value >> s) & 255) for s in (24, 16, 8, 0)))


def _numeric(label: str) -> bool:
    if label.lower().startswith("0x"):
        return all(c in "0123456789abcdefABCDEF" for c in label[2:])
    return label.isdigit()


def _ipv4_number(label: str, host: str) -> int:
    try:
        if label.lower().startswith("0x"):
            return int(label[2:] or "0", 16)
        if len(label) > 1 and label.startswith("0"):
            return int(label, 8)
        return int(label, 10)
    except ValueError:
        raise DisallowedURL(f"{host!r} is not a valid IPv4 address") from None


def normalise_host(raw: str) -> tuple[str, IPAddress | None]:
    host = unquote(raw).strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        raise DisallowedURL("the URL has no host")
    if ":" in host:
        if "%" in host:
            raise DisallowedURL(f"the IPv6 address {raw!r} has a zone id, which is refused")
        try:
            v6 = ipaddress.IPv6Address(host)
        except ValueError:
            raise DisallowedURL(f"{raw!r} is not a valid IPv6 address") from None
        return v6.compressed, v6
    host = host.rstrip(".")
    v4 = parse_ipv4(host)
    if v4 is not None:
        return str(v4), v4
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise DisallowedURL(f"the host {raw!r} is not a valid domain name") from None
    if not _DOMAIN.match(ascii_host):
        raise DisallowedURL(f"the host {raw!r} is not a valid domain name")
    return ascii_host, None


def normalise_path(raw: str) -> str:
    """`raw` with its dot segments resolved (`/a/./b/../c` -> `/a/c`); always starts with `/`."""
    segments: list[str] = []
    parts = raw.split("/")
    for i, segment in enumerate(parts):
        dots = unquote(segment) if "%" in segment and segment.lower().count("%2e") else segment
        last = i == len(parts) - 1
        if dots == ".":
            if last:
                segments.append("")
        elif dots == "..":
            if len(segments) > 1 or (segments and segments[0] != ""):
                segments.pop()
            if last:
                segments.append("")
        else:
            segments.append(segment)
    path = "/".join(segments)
    return path if path.startswith("/") else "/" + path


def parse_url(raw: str) -> NormalURL:
    """`raw` normalised; raises `DisallowedURL` for a URL that is not plain http(s), carries
    credentials, or has no valid host or port."""
    if not isinstance(raw, str) or not raw.strip():
        raise DisallowedURL("the URL is empty")
    text = raw.strip()
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in text) or "\\" in text:
        raise DisallowedURL(f"the URL {raw!r} holds whitespace, a control character or '\\'")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise DisallowedURL(f"the URL {raw!r} cannot be read: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise DisallowedURL(f"only http and https URLs may be fetched, not {scheme or raw!r}")
    if "@" in parts.netloc:
        raise DisallowedURL("URLs with credentials (user:password@) are refused")
    host_part = parts.netloc.rsplit(":", 1)[0] if port is not None else parts.netloc
    if parts.netloc.endswith(":"):
        host_part = parts.netloc[:-1]
    host, ip = normalise_host(host_part)
    return NormalURL(
        scheme=scheme,
        host=host,
        port=port if port is not None else DEFAULT_PORTS[scheme],
        path=normalise_path(parts.path or "/"),
        query=parts.query,
        ip=ip,
    )


def address_refusal(ip: IPAddress) -> str | None:
    """Why `fetch_url` must not connect to `ip` (None: a public address). Private, loopback,
    link-local (cloud metadata at 169.254.169.254 among them), unique-local, shared (CGNAT),
    multicast, reserved and unspecified addresses are refused, as is an IPv4 one spelled as
    IPv6 (mapped, NAT64, 6to4, Teredo).

    IPv6 is allowed only inside the global unicast space, 2000::/3, less its reserved blocks
    (`_IPV6_RESERVED`), plus the two prefixes that carry a public IPv4 address (mapped,
    NAT64), which are judged by that address. `ipaddress`'s `is_global` alone is not enough:
    it calls IPv4-compatible (`::a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`) and
    site-local (`fec0::/10`) addresses global, and a host may still route them inside."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded: ipaddress.IPv4Address | None = ip.ipv4_mapped or ip.sixtofour
        if ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if ip.teredo is not None:
            return f"{ip} is a Teredo address"
        if embedded is not None:
            inner = address_refusal(embedded)
            return f"{ip} embeds {embedded}: {inner}" if inner else None
    if ip.is_loopback:
        return f"{ip} is a loopback address"
    if ip.is_link_local:
        return f"{ip} is a link-local address (cloud metadata lives there)"
    if ip.is_private and isinstance(ip, ipaddress.IPv6Address) and ip in _ULA:
        return f"{ip} is a unique-local address"
    if ip.is_multicast:
        return f"{ip} is a multicast address"
    if ip.is_unspecified:
        return f"{ip} is the unspecified address"
    if isinstance(ip, ipaddress.IPv6Address):
        for network, what in _IPV6_RESERVED:
            if ip in network:
                return f"{ip} is {what}, a reserved address"
        if ip not in _IPV6_GLOBAL_UNICAST:
            return f"{ip} is outside IPv6's global unicast space (2000::/3): reserved or unassigned"
    if not ip.is_global:
        return f"{ip} is a private or reserved address"
    return None


_ULA = ipaddress.IPv6Network("fc00::/7")
_IPV6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_IPV6_RESERVED: tuple[tuple[ipaddress.IPv6Network, str], ...] = tuple(
    (ipaddress.IPv6Network(network), what)
    for network, what in (
        ("::/96", "an IPv4-compatible address (deprecated, RFC 4291)"),
        ("::ffff:0:0:0/96", "an IPv4-translated address (RFC 2765)"),
        ("64:ff9b:1::/48", "a local-use NAT64 address (RFC 8215)"),
        ("100::/64", "a discard-only address (RFC 6666)"),
        ("fec0::/10", "a site-local address (deprecated, RFC 3879)"),
        ("2001:db8::/32", "a documentation address (RFC 3849)"),
        ("3fff::/20", "a documentation address (RFC 9637)"),
        ("5f00::/16", "an SRv6 segment identifier (RFC 9602)"),
    )
)
"""IPv6 blocks refused whatever `ipaddress` says of them, each named in the refusal. The
ones outside 2000::/3 are refused anyway; naming them says why."""


def host_refusal(url: NormalURL) -> str | None:
    """Why `fetch_url` must not fetch from this host at all, before any DNS lookup."""
    if url.ip is not None:
        return address_refusal(url.ip)
    host = url.host
    if host in _REFUSED_NAMES or host.endswith(_REFUSED_SUFFIXES):
        return f"{host} is an internal name"
    if "." not in host:
        return f"{host} is a single-label (intranet) name"
    return None


@dataclass(frozen=True)
class Pattern:
    """One allowlist entry: an origin (None: any, for a target's path-only pattern) and a path
    glob (None: every path of the origin)."""

    origin: str | None
    path: str | None

    def matches(self, url: NormalURL) -> bool:
        if self.origin is not None and self.origin != url.origin:
            return False
        return self.matches_path(url.path)

    def matches_path(self, path: str) -> bool:
        if self.path is None:
            return True
        if has_glob(self.path):
            return glob_match(self.path, path)
        return self.path == path


def parse_pattern(raw: str, *, path_only: bool = False) -> Pattern:
    """An allowlist entry: `https://x.com` (the origin and every path), `https://x.com/v1`
    (that path only), `https://x.com/docs/**` (a glob); a target's entries are paths
    (`/v1/docs/**`). Query and fragment are ignored."""
    text = raw.strip().split("#", 1)[0].split("?", 1)[0]
    if path_only or text.startswith("/"):
        if not text.startswith("/"):
            raise ValueError(f"the allowlist entry {raw!r} of a target must be a path, e.g. /v1/**")
        return Pattern(None, _pattern_path(text))
    # The glob characters are not valid in a host: take the path off before parsing.
    scheme, sep, rest = text.partition("://")
    if not sep:
        raise ValueError(f"the allowlist entry {raw!r} must be a URL such as https://x.com/**")
    netloc, slash, path = rest.partition("/")
    try:
        origin = parse_url(f"{scheme}://{netloc}/").origin
    except DisallowedURL as exc:
        raise ValueError(f"the allowlist entry {raw!r}: {exc}") from None
    if not slash or path == "":
        return Pattern(origin, None)
    return Pattern(origin, _pattern_path("/" + path))


def _pattern_path(path: str) -> str | None:
    if path in ("", "/", "/**"):
        return None
    return path if has_glob(path) else normalise_path(path)
