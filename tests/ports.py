"""Ports for the servers the tests start (`sleuth serve`, PostgreSQL, moto) when the port must be named
before the server binds it.

A port the kernel hands out for `bind(("127.0.0.1", 0))` comes from its ephemeral range, from which
every outgoing connection of every test also takes its local port. A server that binds its named port
seconds later (one that waits for PostgreSQL at start, a cluster stopped and started again) could then
find it taken: "address already in use". These ports come from below that range, where the kernel never
hands one out by itself; each is checked free when picked.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_start() -> int:
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A loopback port free now, outside the kernel's ephemeral range."""
    low, high = 10_000, max(10_100, _ephemeral_start() - 1)
    for _ in range(200):
        port = random.randint(low, high)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port between {low} and {high}")
