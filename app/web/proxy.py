"""Who the client is and which site it asked for: forwarding headers and the Host check.

Two small pure-ASGI middlewares, wired in ``app.main``:

- :class:`TrustedProxies` believes ``X-Forwarded-For`` / ``X-Forwarded-Proto`` only when the
  connection comes from a configured proxy (``APP_TRUSTED_PROXIES``, empty by default: no
  forwarding header is believed). The client is then the right-most address in the chain
  that is *not* a trusted proxy — everything left of it was written by the client and is
  ignored, so a client cannot choose the address that throttles and audit entries see.
- :class:`AllowedHosts` answers 400 to a ``Host`` this site does not serve (production
  only), except ``/healthz`` and ``/readyz``, which load balancers probe by address. Pages
  build their own links from relative paths, never from ``Host``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

PROBE_PATHS = ("/healthz", "/readyz")


def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [2001:db8::1]:443
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # 203.0.113.7:5123
        text = text.split(":", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def is_trusted(host: str | None, networks: Sequence[Network]) -> bool:
    if not host or not networks:
        return False
    ip = _parse_ip(host)
    return ip is not None and any(ip in net for net in networks)


def client_from_chain(peer: str, forwarded_for: Iterable[str], networks: Sequence[Network]) -> str:
    """The right-most hop that is not a trusted proxy (``peer`` is the TCP peer).

    ``forwarded_for`` are the X-Forwarded-For header values in order; each proxy appends the
    address it saw, so reading from the right, the first untrusted address is the client.
    """
    if not is_trusted(peer, networks):
        return peer
    hops = [h.strip() for value in forwarded_for for h in value.split(",") if h.strip()]
    client = peer
    for hop in reversed(hops):
        ip = _parse_ip(hop)
        if ip is None:
            break  # garbage in the chain: stop at the last address we could verify
        client = str(ip)
        if not any(ip in net for net in networks):
            break
    return client


class TrustedProxies:
    def __init__(self, app: ASGIApp, *, networks: Sequence[Network]) -> None:
        self.app = app
        self.networks = tuple(networks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not self.networks:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        peer = client[0] if client else ""
        if is_trusted(peer, self.networks):
            fwd: list[str] = []
            proto: list[str] = []
            for name, value in scope.get("headers", []):
                if name == b"x-forwarded-for":
                    fwd.append(value.decode("latin-1"))
                elif name == b"x-forwarded-proto":
                    proto.append(value.decode("latin-1"))
            scope = dict(scope)
            if fwd:
                scope["client"] = (client_from_chain(peer, fwd, self.networks), 0)
            if proto:
                # The proxy nearest to us wrote the last value.
                last = proto[-1].split(",")[-1].strip().lower()
                if last in ("http", "https"):
                    if scope["type"] == "websocket":
                        last = "wss" if last == "https" else "ws"
                    scope["scheme"] = last
        await self.app(scope, receive, send)


class AllowedHosts:
    def __init__(self, app: ASGIApp, *, hosts: Iterable[str]) -> None:
        self.app = app
        self.hosts = frozenset(h.lower() for h in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path", "") in PROBE_PATHS:
            await self.app(scope, receive, send)
            return
        host = ""
        for name, value in scope.get("headers", []):
            if name == b"host":
                host = value.decode("latin-1").strip().lower()
                break
        if host.startswith("["):
            name_only = host[: host.find("]") + 1] if "]" in host else host
        else:
            name_only = host.split(":", 1)[0]
        if name_only in self.hosts:
            await self.app(scope, receive, send)
            return
        body = b"Unknown host.\n"
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
