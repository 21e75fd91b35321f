"""The sandbox probe (spec/sandbox.md §7): whether this host's sandbox meets its isolation floor, for
`GET /version` and for turn admission (`503 sandbox_unavailable`).

One sandbox is forked over a curated context with the floor lifted, its `ready` message says which
layers took effect, and the configured floor is checked against them here, so a host below the floor is
reported with what it lacks instead of an opaque failure. The probe costs one fork (tens of ms once the
zygote runs) and is cached per sandbox host.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from dataclasses import replace
from typing import Any

from sleuth.sandbox.host import SandboxHost
from sleuth.server.state import Server

log = logging.getLogger("sleuth.api")

BACKEND = "zygote"  # spec/sandbox.md §7: the only backend so far
RETRY_FAILED_PROBE_S = 30.0

_probes: weakref.WeakKeyDictionary[SandboxHost, tuple[float, dict[str, Any]]] = weakref.WeakKeyDictionary()
_probe_lock = threading.Lock()


def _probe(state: Server, host: SandboxHost) -> tuple[bool, dict[str, Any]]:
    """(cacheable, report). Not cacheable when nothing could be probed or the probe itself failed."""
    from sleuth.sandbox.zygote import meets_floor  # the zygote module is heavy; only probes need it

    floor = host.limits.floor
    report: dict[str, Any] = {"ok": False, "backend": BACKEND, "mode": None, "layers": [], "missing": []}
    target = next(
        (
            (info.slug, ctx.version_dir(live))
            for ctx, info in state.home.contexts()
            if (live := ctx.live_version())
        ),
        None,
    )
    if target is None:
        report["detail"] = "not probed yet: a sandbox needs a curated context to start"
        return False, report
    slug, version_dir = target
    try:
        with host.start_turn({slug: version_dir}, replace(host.limits, floor="none")) as sandbox:
            ready = sandbox.ready
    except Exception as exc:  # any failure to start one is what /version exists to report
        log.warning("sandbox probe failed: %s", exc)
        report["missing"] = ["setup"]
        report["detail"] = f"{type(exc).__name__}: {exc}"
        return False, report
    layers = list(ready.get("layers") or [])
    ok, missing = meets_floor(floor, layers, int(ready.get("landlock_abi") or 0))
    report.update(ok=ok, mode=ready.get("mode"), layers=layers, missing=missing)
    return True, report


def sandbox_report(state: Server) -> dict[str, Any]:
    """`GET /version`'s `sandbox` object, probed once per host (a failed probe is retried after 30 s)."""
    host = state.runtime.sandbox_host
    with _probe_lock:
        cached = _probes.get(host)
        if cached is not None and cached[0] > time.monotonic():
            return dict(cached[1])
        cacheable, report = _probe(state, host)
        if cacheable or report.get("missing"):  # "nothing to probe yet" is not a result to keep
            _probes[host] = (float("inf") if cacheable else time.monotonic() + RETRY_FAILED_PROBE_S, report)
        return dict(report)
