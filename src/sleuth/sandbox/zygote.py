"""The zygote (spec/sandbox.md §2): started once with a scrubbed environment, it imports the SDK and the
REPL, then forks a child per turn. Child A joins new namespaces and forks B, which becomes PID 1
of the new pid namespace, locks itself down layer by layer and serves the REPL.

    python -m sleuth.sandbox.zygote CONTROL_FD

The control channel is an AF_UNIX SOCK_SEQPACKET socket: each `spawn` message arrives with the
turn's socket attached (SCM_RIGHTS), so the zygote never holds more than one turn's channel.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from sleuth.sandbox import layers
from sleuth.sandbox.limits import Limits
from sleuth.sandbox.messages import Spawn, Spawned, ZygoteReady
from sleuth.sandbox.protocol import send
from sleuth.sandbox.repl import serve
from sleuth.sdk.knowledge import ScopedContext

PR_SET_CHILD_SUBREAPER = 36
UID_BASE = 200_000
UID_SPAN = 50_000


def main(control_fd: int) -> None:
    host = os.getppid()
    # `python -m` puts the working directory first on sys.path; it is not part of the install.
    sys.path[:] = [p for p in sys.path if p not in ("", "/", os.getcwd())]
    control = socket.socket(fileno=control_fd)
    # A stop request (SIGTERM, SIGHUP, or the host going away) ends the loop below so that the
    # clean-up runs; SIGINT is the terminal's, for the host to act on, not for us.
    stop: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda signum, _frame: stop.append(signum))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    layers.prctl(layers.PR_SET_PDEATHSIG, signal.SIGTERM)  # the host went away: clean up, then go
    if os.getppid() != host:  # it went before that signal was set
        return
    remove_stale_dirs(tempfile.gettempdir())
    layers.remove_stale_cgroups(is_zygote)
    layers.preload_seccomp()  # it finds libseccomp with ldconfig, which a locked-down child cannot run
    layers.prctl(PR_SET_CHILD_SUBREAPER, 1)
    # Named after this zygote, so that a later one can tell whether they are stale.
    mount_point = tempfile.mkdtemp(prefix=f"sleuth-root-{os.getpid()}-")
    # Without a mount namespace a turn's scratch is a directory here, removed when the turn ends.
    scratch_root = tempfile.mkdtemp(prefix=f"sleuth-scratch-{os.getpid()}-")
    os.chmod(scratch_root, 0o711)
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    counter = 0
    cgroups: dict[int, list[Path]] = {}  # child A's pid -> its turn's cgroup directories
    dirs = (mount_point, scratch_root)
    spare: _Slot | None = None
    try:
        hello = ZygoteReady(pid=os.getpid(), landlock_abi=layers.landlock_abi(), dirs=list(dirs))
        control.send(hello.model_dump_json().encode())
        spare = _prepare_slot(counter, _cgroup_limits(Limits()), dirs, cgroups)
        while not stop:
            for _key, _events in selector.select(timeout=0.25):
                data, fds, _flags, _addr = socket.recv_fds(control, 1 << 20, 1)
                if not data:
                    return
                try:
                    message = Spawn.model_validate_json(data)
                except ValidationError:
                    message = None
                if message is None or len(fds) != 1:
                    for fd in fds:
                        os.close(fd)
                    continue
                wanted = _cgroup_limits(Limits.from_json(message.limits))
                slot = spare if spare is not None and spare.wanted == wanted else None
                if slot is None:
                    _discard(spare)
                    counter += 1
                    slot = _prepare_slot(counter, wanted, dirs, cgroups)
                spare = None
                pid = slot.launch(message, fds[0])
                os.close(fds[0])
                control.send(Spawned(turn=message.turn, pid=pid).model_dump_json().encode())
                # The next turn's child A joins its cgroup now, off the critical path: the cgroup v1
                # attach alone waits ~15 ms for an RCU grace period.
                counter += 1
                spare = _prepare_slot(counter, wanted, dirs, cgroups)
            _reap(cgroups, scratch_root)
    finally:
        shutil.rmtree(mount_point, ignore_errors=True)
        _discard(spare)
        # End every turn: killing A kills B too (B's parent-death signal), and every process of a
        # turn is in B's pid namespace.
        for pid_a in [p for p in cgroups if p > 0]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid_a, signal.SIGKILL)
        deadline = time.monotonic() + 2
        while cgroups and time.monotonic() < deadline:
            _reap(cgroups, scratch_root)
            time.sleep(0.01)
        shutil.rmtree(scratch_root, ignore_errors=True)


ZYGOTE_MODULE = "sleuth.sandbox.zygote"
_STALE_DIR = re.compile(r"sleuth-(?:root|scratch)-(\d+)-")


def is_zygote(pid: int) -> bool:
    """Whether `pid` is a running zygote (this one or another); a reused pid is not."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        return True  # cannot tell: keep its directories
    return ZYGOTE_MODULE.encode() in argv


def remove_stale_dirs(parent: str) -> list[str]:
    """Remove the run directories (`sleuth-root-<pid>-…`, `sleuth-scratch-<pid>-…`) of zygotes that
    died without cleaning up (SIGKILL, a crash). Returns those removed."""
    removed: list[str] = []
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            match = _STALE_DIR.match(entry.name)
            if match and entry.is_dir(follow_symlinks=False) and not is_zygote(int(match[1])):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.path)
    return removed


def _cgroup_limits(limits: Limits) -> tuple[int, int]:
    return (limits.memory_mb + 256) << 20, limits.pids


def _reap(cgroups: dict[int, list[Path]], scratch_root: str) -> None:
    """Collect exited children; a turn's cgroups go once its child A (which outlives B) is gone.

    Entries under a negative pid belong to children already reaped whose cgroups are not removed yet.
    """
    for key in [k for k in cgroups if k < 0]:
        busy = layers.remove_cgroups(cgroups.pop(key))
        if busy:
            cgroups[key] = busy
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        busy = layers.remove_cgroups(cgroups.pop(pid, []))
        if busy:
            cgroups[-pid] = busy  # retried on the next pass until the kernel lets them go
        shutil.rmtree(f"{scratch_root}/{pid}", ignore_errors=True)


@dataclass
class _Slot:
    """A child A forked ahead of time: in its cgroups and new namespaces, waiting for a turn."""

    pid_a: int
    channel: socket.socket
    wanted: tuple[int, int]

    def launch(self, message: Spawn, turn_fd: int) -> int:
        """Hand A the turn; returns B's pid in the zygote's (that is, the host's) pid namespace."""
        try:
            socket.send_fds(self.channel, [message.model_dump_json().encode()], [turn_fd])
            data = self.channel.recv(64)
        except OSError:
            data = b""
        self.channel.close()
        return int(data) if data else -1


def _discard(slot: _Slot | None) -> None:
    if slot is not None:
        slot.channel.close()  # A sees EOF and exits; `_reap` removes its cgroups


def _prepare_slot(
    counter: int, wanted: tuple[int, int], dirs: tuple[str, str], cgroups: dict[int, list[Path]]
) -> _Slot:
    """Fork A → join the cgroups → unshare; A then waits for a turn and forks B for it."""
    groups = layers.create_cgroup(f"{os.getpid()}-{counter}", *wanted)
    uid = UID_BASE + (os.getpid() * 7 + counter) % UID_SPAN
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid_a = os.fork()
    if pid_a == 0:  # child A
        code = 1
        try:
            # Keep nothing of the zygote's: not its control channel to the host, not other slots.
            os.closerange(3, theirs.fileno())
            os.closerange(theirs.fileno() + 1, 1 << 16)
            for signum in (signal.SIGTERM, signal.SIGHUP):  # SIGINT stays ignored, as in the zygote
                signal.signal(signum, signal.SIG_DFL)
            layers.prctl(layers.PR_SET_PDEATHSIG, signal.SIGKILL)
            try:
                layers.join_cgroups(groups)  # first, while still privileged
            except OSError:
                groups = []
            namespaces: list[str] = []
            for flag, name in (
                # After the join: the turn then sees its cgroups as `/`, not `/sleuth/<zygote pid>-<n>`.
                (layers.CLONE_NEWCGROUP, "cgroup"),
                (layers.CLONE_NEWNS, "mount"),
                (layers.CLONE_NEWPID, "pid"),
                (layers.CLONE_NEWNET, "net"),
                (layers.CLONE_NEWIPC, "ipc"),
                (layers.CLONE_NEWUTS, "uts"),
            ):
                try:
                    layers.unshare(flag)
                    namespaces.append(name)
                except OSError:
                    pass
            data, fds, _flags, _addr = socket.recv_fds(theirs, 1 << 20, 1)
            if data and len(fds) == 1:
                pid_b = os.fork()
                if pid_b == 0:
                    theirs.close()
                    _child(
                        Spawn.model_validate_json(data),
                        fds[0],
                        dirs,
                        uid,
                        namespaces,
                        "v1" if groups else None,
                    )
                    os._exit(0)
                os.close(fds[0])
                theirs.send(str(pid_b).encode())
                theirs.close()
                _pid, status = os.waitpid(pid_b, 0)
                code = os.waitstatus_to_exitcode(status) & 0xFF
            else:  # discarded before a turn came
                code = 0
        finally:
            os._exit(code)
    theirs.close()
    cgroups[pid_a] = groups
    return _Slot(pid_a, ours, wanted)


def _child(
    message: Spawn,
    turn_fd: int,
    dirs: tuple[str, str],
    uid: int,
    namespaces: list[str],
    cgroup: str | None,
) -> None:
    """B: lock down (spec/sandbox.md §2.1, layers 2-9), then serve the REPL. Never returns normally.

    `dirs` is (mount point for the new root, parent of scratch directories without namespaces).
    """
    mount_point, scratch_root = dirs
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):  # C-level writes must not reach the host's terminal
        os.dup2(null, fd)
    os.close(null)
    sock = socket.socket(fileno=turn_fd)
    limits = Limits.from_json(message.limits)
    contexts = message.contexts
    layers_on: list[str] = []
    disabled: dict[str, str] = {}
    began = time.perf_counter()
    marks: dict[str, float] = {}
    try:
        layers.prctl(layers.PR_SET_PDEATHSIG, signal.SIGKILL)
        if cgroup:
            layers_on.append("cgroup")
            marks["cgroup"] = time.perf_counter()
        if namespaces:
            layers_on.append("namespaces")
            marks["namespaces"] = time.perf_counter()
        readable = [*layers.RootPlan(mount_point, limits.scratch_mb, uid).python_paths(), "/usr", "/lib"]
        scratch = "/scratch"
        if "mount" in namespaces and "pid" in namespaces:
            plan = layers.RootPlan(mount_point, limits.scratch_mb, uid, contexts)
            moves = plan.python_moves()  # read before the pivot: it resolves host paths
            readable = layers.build_root(plan)
            layers.relocate_python(moves)
            layers_on.append("pivot_root")
            marks["pivot_root"] = time.perf_counter()
            mounted = {slug: f"/ctx/{slug}" for slug in contexts}
        else:
            disabled["pivot_root"] = "no mount or pid namespace"
            scratch = f"{scratch_root}/{os.getppid()}"  # named after child A, which the zygote reaps
            os.mkdir(scratch, 0o700)
            if os.geteuid() == 0:
                os.chown(scratch, uid, uid)
            os.chdir(scratch)
            mounted = dict(contexts)
            readable += list(contexts.values())
        try:
            layers.drop_privileges(uid)
            layers_on.append("uid")
            marks["uid"] = time.perf_counter()
        except OSError as exc:
            disabled["uid"] = str(exc)
        # The uid change cleared the parent-death signal; without it B (and its turn) would outlive
        # a killed A and keep the turn's cgroups busy.
        layers.prctl(layers.PR_SET_PDEATHSIG, signal.SIGKILL)
        budget = limits.memory_mb * 1024 * 1024
        layers.set_rlimits(
            limits.cpu_s,
            layers.current_vm_bytes() + budget,
            limits.pids,
            limits.scratch_mb * 1024 * 1024,
            limits.nofile,
        )
        layers_on.append("rlimits")
        marks["rlimits"] = time.perf_counter()
        os.environ.clear()
        os.environ.update(HOME=scratch, TMPDIR=scratch, PATH="/nonexistent", LANG="C.UTF-8")
        landlock_abi = 0
        try:
            layers.prctl(layers.PR_SET_NO_NEW_PRIVS, 1)
            devices = [d for d in ("/dev/urandom", "/dev/random", "/dev/zero", "/proc") if os.path.exists(d)]
            landlock_abi = layers.apply_landlock(readable + devices, [scratch, "/dev/null"])
            layers_on.append("landlock")
            marks["landlock"] = time.perf_counter()
        except OSError as exc:
            disabled["landlock"] = str(exc)
        try:
            layers.apply_seccomp()
            layers_on.append("seccomp")
            marks["seccomp"] = time.perf_counter()
        except Exception as exc:
            disabled["seccomp"] = f"{type(exc).__name__}: {exc}"
        random.seed(os.urandom(16))
        np.random.seed(int.from_bytes(os.urandom(4), "little"))
        ok, missing = meets_floor(limits.floor, layers_on, landlock_abi)
        ready = {
            "t": "ready",
            "ok": ok,
            "missing": missing,
            "mode": "root" if "uid" in layers_on else "nons",
            "layers": layers_on,
            "disabled": disabled,
            "landlock_abi": landlock_abi,
            "namespaces": namespaces,
            "cgroup": cgroup,
            "python": sys.version.split()[0],
            # Milliseconds from fork to each layer, to see where a turn's start-up goes.
            "setup_ms": {name: round((t - began) * 1000, 2) for name, t in marks.items()},
        }
        if not ok:
            send(sock, ready)
            return
        serve(sock, [ScopedContext(slug, Path(path)) for slug, path in mounted.items()], ready)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            send(
                sock,
                {
                    "t": "ready",
                    "ok": False,
                    "missing": ["setup"],
                    "layers": layers_on,
                    "disabled": {**disabled, "setup": f"{type(exc).__name__}: {exc}"},
                },
            )
    finally:
        os._exit(0)


def meets_floor(floor: str, active: list[str], landlock_abi: int) -> tuple[bool, list[str]]:
    """standard: seccomp, rlimits, and Landlock or a pivoted root; strict: all of them and ABI ≥ 4."""
    missing: list[str] = []
    if floor == "none":
        return True, missing
    for layer in ("seccomp", "rlimits"):
        if layer not in active:
            missing.append(layer)
    if floor == "standard" and "landlock" not in active and "pivot_root" not in active:
        missing.append("landlock or pivot_root")
    if floor == "strict":
        missing += [x for x in ("namespaces", "pivot_root", "uid", "landlock") if x not in active]
        if landlock_abi < 4:
            missing.append("landlock ABI >= 4")
    return not missing, missing


if __name__ == "__main__":
    main(int(sys.argv[1]))
