"""Which push-notification URLs the gateway POSTs to (no SSRF), and why it refuses one.

The allow-list is ``SOORMA_GATEWAY_PUSH_ALLOW`` (comma list):

- ``host`` or ``host:port``: that host, whatever it resolves to (the operator's choice,
  private addresses included);
- ``*``: any host whose every address is a public unicast address;
- ``loopback``: any host whose every address is a loopback address (a receiver on the
  developer's machine).

An IPv6 address that carries an IPv4 address (IPv4-mapped ``::ffff:0:0/96``, IPv4-translated
``::ffff:0:0:0/96``, IPv4-compatible ``::/96``, 6to4 ``2002::/16``, Teredo ``2001::/32``
whose client address is stored inverted, NAT64 ``64:ff9b::/96``) is judged by that IPv4
address too, so ``[2002:a9fe:a9fe::]`` is the metadata address 169.254.169.254. The
local-use NAT64 prefix ``64:ff9b:1::/48`` maps the IPv4 space at a length the network
chooses, so it is never public.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

SETTING = "SOORMA_GATEWAY_PUSH_ALLOW"
ANY_PUBLIC = "*"
LOOPBACK = "loopback"

_METADATA = {
    ipaddress.ip_address("169.254.169.254"),
    ipaddress.ip_address("fd00:ec2::254"),
    ipaddress.ip_address("100.100.100.200"),
}
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_TRANSLATIONS = frozenset({"IPv4-mapped", "6to4", "NAT64"})


def embedded_ipv4(addr: IPAddress) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 address carries, and the name of the form, if any."""
    if not isinstance(addr, ipaddress.IPv6Address):
        return None
    low32 = ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    if addr.ipv4_mapped is not None:
        return "IPv4-mapped", addr.ipv4_mapped
    if addr in _TRANSLATED:
        return "IPv4-translated", low32
    if addr in _COMPATIBLE and int(addr) > 1:
        return "IPv4-compatible", low32
    if addr.sixtofour is not None:
        return "6to4", addr.sixtofour
    if addr.teredo is not None:
        return "Teredo", addr.teredo[1]  # the client address, un-inverted by ipaddress
    if addr in _NAT64:
        return "NAT64", low32
    return None


def _kind(addr: IPAddress) -> str | None:
    """What makes ``addr`` not a public unicast destination, or ``None``."""
    if addr in _METADATA:
        return "a cloud metadata address"
    if addr.is_loopback:
        return "a loopback address"
    if addr.is_link_local:
        return "a link-local address"
    if addr.is_unspecified:
        return "the unspecified address"
    if addr.is_multicast:
        return "a multicast address"
    if isinstance(addr, ipaddress.IPv6Address) and addr in _NAT64_LOCAL:
        return "in the local-use NAT64 prefix 64:ff9b:1::/48"
    if addr.is_private:
        return "a private address"
    if addr.is_reserved or not addr.is_global:
        return "not a public address"
    return None


def address_problem(addr: IPAddress) -> str | None:
    """Why ``addr`` is not a public unicast destination (``None`` when it is).

    A translated form (IPv4-mapped, 6to4, NAT64) reaches the IPv4 address it carries, so
    that address decides; the other forms must also pass as IPv6 addresses.
    """
    carried = embedded_ipv4(addr)
    if carried is not None:
        form, inner = carried
        problem = _kind(inner)
        if problem is not None:
            return f"{addr} carries {inner} ({form}), {problem}"
        if form in _TRANSLATIONS:
            return None
    problem = _kind(addr)
    return None if problem is None else f"{addr} is {problem}"


def is_loopback(addr: IPAddress) -> bool:
    carried = embedded_ipv4(addr)
    return addr.is_loopback or (carried is not None and carried[1].is_loopback)


class PushPolicy:
    """Judge a push URL against the allow-list (see the module docstring)."""

    def __init__(self, allow: Iterable[str], *, origin: str = "") -> None:
        """``origin`` says where a default list comes from (named in refusals)."""
        self.allow = [item.lower() for item in allow]
        self.origin = origin
        self.hosts = {h for h in self.allow if h not in (ANY_PUBLIC, LOOPBACK)}
        self.any_public = ANY_PUBLIC in self.allow
        self.loopback = LOOPBACK in self.allow

    async def __call__(self, url: str) -> bool:
        return await self.refusal(url) is None

    async def refusal(self, url: str) -> str | None:
        """Why ``url`` may not be a push target (naming the rule and the setting), or None."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            return f"push URL {url!r} is not a valid URL: {exc}"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return f"push URL {url!r} refused: only http:// and https:// URLs with a host"
        host = parts.hostname.lower()
        if host in self.hosts or (port and f"{host}:{port}" in self.hosts):
            return None
        if not (self.any_public or self.loopback):
            return (
                f"push URL host {host!r} refused: it is not in {SETTING} "
                f"({self._listed()}); add it, or '*' for any public host"
            )
        addresses = await _resolve(host, port or (443 if parts.scheme == "https" else 80))
        if not addresses:
            return f"push URL host {host!r} refused: it does not resolve to an address"
        if self.loopback and all(is_loopback(a) for a in addresses):
            return None
        for addr in addresses:
            problem = address_problem(addr)
            if problem is not None:
                return (
                    f"push URL host {host!r} refused: {problem}; {self._rule()} "
                    f"({SETTING}: {self._listed()}); list the host to allow it"
                )
        if not self.any_public:
            return (
                f"push URL host {host!r} refused: {SETTING} ({self._listed()}) allows "
                "loopback receivers only; add the host, or '*' for any public host"
            )
        return None

    def _listed(self) -> str:
        listed = ",".join(self.allow) if self.allow else "empty"
        return f"{listed}, {self.origin}" if self.origin else listed

    def _rule(self) -> str:
        if self.any_public:
            return "'*' allows public addresses only"
        return "'loopback' allows loopback addresses only"


async def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host.split("%", 1)[0])]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return []
    out: list[IPAddress] = []
    for info in infos:
        try:
            out.append(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
        except ValueError:
            continue
    return out
