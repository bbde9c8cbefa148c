"""A listening TCP socket for `trinity serve` and the viewer, with one-line errors, and whether
a host address reaches this machine alone."""

from __future__ import annotations

import errno
import ipaddress
import socket

from trinity_cli.errors import ConfigError, option


def bind(host: str, port: int) -> socket.socket:
    """A socket listening on host:port (port 0: a free one), inheritable (uvicorn's workers take
    it over); a ConfigError naming the address and the fix when it cannot be resolved or bound."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise ConfigError(f"{option('host')} {host}: cannot resolve it ({exc.strerror})",
                          "use an address such as 127.0.0.1") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        hint = (f"something else listens there: pick another {option('port')}" if exc.errno == errno.EADDRINUSE
                else "use an address of this machine, such as 127.0.0.1")
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror})", hint) from None
    sock.set_inheritable(True)
    return sock


def is_loopback(host: str) -> bool:
    """Whether `host` (an IP address, or "localhost") is reachable from this machine alone."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
