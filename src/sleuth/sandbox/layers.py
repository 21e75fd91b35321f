"""Kernel isolation layers, applied by the turn's child in the order of spec/sandbox.md §2.1.

Each function applies one layer and raises `OSError` when the host does not allow it; the caller
records which layers took effect and fails closed below the configured floor. Everything goes
through ctypes and the stdlib, except seccomp, which uses `pyseccomp` over the system libseccomp.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import importlib
import os
import resource
import socket
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_THREAD = 0x00010000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4

SYS_PIVOT_ROOT = 155
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446

# Landlock access rights, by the ABI that introduced them.
_FS_ABI1 = (1 << 13) - 1  # EXECUTE … MAKE_SYM
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1
FS_READ = FS_READ_FILE | FS_READ_DIR


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def umount2(target: str, flags: int) -> None:
    _check(_libc.umount2(target.encode(), ctypes.c_int(flags)), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    _check(_libc.syscall(SYS_PIVOT_ROOT, new_root.encode(), put_old.encode()), "pivot_root")


def prctl(option: int, arg: int) -> None:
    _check(
        _libc.prctl(
            ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
        ),
        "prctl",
    )


# --------------------------------------------------------------------------- file system (2, 4)
@dataclass
class RootPlan:
    """What the minimal root contains: read-only binds at their host paths, plus the contexts."""

    root: str
    scratch_mb: int
    uid: int
    contexts: dict[str, str] = field(default_factory=dict)  # slug -> host version directory

    def python_paths(self) -> list[str]:
        paths = {sys.base_prefix, sys.prefix, *(p for p in sys.path if p)}
        existing = sorted({str(Path(p).resolve()) for p in paths if Path(p).is_dir()} - {"/"})
        # Drop paths nested in another listed path: binding the parent covers them.
        return [
            p for p in existing if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in existing)
        ]

    def python_moves(self) -> dict[str, str]:
        """Each host directory of the install → the neutral path it is mounted at in the new root
        (`/sleuth/python` the interpreter, `/sleuth/venv` the environment, `/sleuth/lib<n>` the
        rest), so the mount list and Python's own paths do not show where Sleuth is installed."""
        base, prefix = str(Path(sys.base_prefix).resolve()), str(Path(sys.prefix).resolve())
        moves: dict[str, str] = {}
        for n, path in enumerate(self.python_paths()):
            moves[path] = {base: "/sleuth/python", prefix: "/sleuth/venv"}.get(path, f"/sleuth/lib{n}")
        return moves


def build_root(plan: RootPlan) -> list[str]:
    """Mount a tmpfs root with only what Python and the turn need, then pivot into it.

    Must run in a fresh mount namespace (and pid namespace, for /proc). Returns the read-only paths
    for the Landlock allow-list. The install's directories are mounted at neutral paths
    (`RootPlan.python_moves`); the caller moves Python's view to them with `relocate_python`.
    """
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = plan.root
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
    readable: list[str] = []
    system = [
        p for p in ("/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/localtime") if os.path.exists(p)
    ]
    for path in system:
        _bind_ro(path, root)
        readable.append(path)
    os.makedirs(f"{root}/proc", mode=0o555, exist_ok=True)
    for path, target in plan.python_moves().items():
        _mount_hidden(path, root, target, f"{root}/proc")
        readable.append(target)
    for slug, version_dir in plan.contexts.items():
        target = f"/ctx/{slug}"
        _mount_hidden(version_dir, root, target, f"{root}/proc")
        readable.append(target)
    os.makedirs(f"{root}/dev", mode=0o755, exist_ok=True)
    for device in ("null", "zero", "urandom", "random"):
        open(f"{root}/dev/{device}", "w").close()
        mount(f"/dev/{device}", f"{root}/dev/{device}", None, MS_BIND)
        # Read-only, so the host's node cannot be touched, chmod-ed or chown-ed; reads and writes
        # of a device node do not need a writable mount.
        mount(None, f"{root}/dev/{device}", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    os.makedirs(f"{root}/scratch", mode=0o700, exist_ok=True)
    mount(
        "tmpfs",
        f"{root}/scratch",
        "tmpfs",
        MS_NOSUID | MS_NODEV | MS_NOEXEC,
        f"size={plan.scratch_mb}m,mode=0700,uid={plan.uid},gid={plan.uid}",
    )
    mount("proc", f"{root}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.makedirs(f"{root}/.old", mode=0o700, exist_ok=True)
    pivot_root(root, f"{root}/.old")
    os.chdir("/")
    umount2("/.old", MNT_DETACH)
    os.rmdir("/.old")
    mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir("/scratch")
    return readable


def _bind_ro(source: str, root: str, target: str | None = None) -> None:
    target = target or source
    dest = f"{root}{target}"
    parent = os.path.dirname(dest)
    os.makedirs(parent, mode=0o755, exist_ok=True)
    if os.path.isdir(source):
        os.makedirs(dest, mode=0o755, exist_ok=True)
    else:
        open(dest, "a").close()
    mount(source, dest, None, MS_BIND | MS_REC)
    mount(None, dest, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_REC)


def relocate_python(moves: dict[str, str]) -> None:
    """Point Python at the neutral paths `build_root` mounted the install at: `sys.path`, the
    prefixes, and every loaded module's file, package path, spec and loader, so later imports find
    their files and model code reading them sees no host path. What is compiled in stays as it was
    (a loaded function's `co_filename`, `sysconfig`'s build variables)."""
    ordered = sorted(moves.items(), key=lambda item: -len(item[0]))

    def moved(path: str) -> str:
        for source, target in ordered:
            if path == source or path.startswith(source + "/"):
                return target + path[len(source) :]
        return path

    def move_list(paths: Any) -> None:
        inner = getattr(paths, "_path", paths)  # a namespace package's `_NamespacePath`
        if isinstance(inner, list):
            inner[:] = [moved(p) if isinstance(p, str) else p for p in inner]

    sys.path[:] = [moved(p) for p in sys.path]
    for name in (
        "prefix",
        "exec_prefix",
        "base_prefix",
        "base_exec_prefix",
        "executable",
        "_base_executable",
        "_stdlib_dir",
    ):
        value = getattr(sys, name, None)
        if isinstance(value, str):
            setattr(sys, name, moved(value))
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attr in ("__file__", "__cached__"):
            if isinstance(namespace.get(attr), str):
                namespace[attr] = moved(namespace[attr])
        move_list(namespace.get("__path__"))
        spec = namespace.get("__spec__")
        if spec is not None:
            if isinstance(getattr(spec, "origin", None), str):
                spec.origin = moved(spec.origin)
            if isinstance(getattr(spec, "_cached", None), str):
                spec._cached = moved(spec._cached)
            move_list(getattr(spec, "submodule_search_locations", None))
        loader: Any = namespace.get("__loader__")
        path = getattr(loader, "path", None)
        if isinstance(path, str):
            with contextlib.suppress(AttributeError):
                loader.path = moved(path)
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()


def _mount_hidden(source: str, root: str, target: str, empty_dir: str) -> None:
    """Mount a host directory (a context version, a directory of the install) read-only at `target`.

    A bind mount would show the directory's host path (`$SLEUTH_HOME/contexts/<id>/versions/…`,
    the install's `.venv`) in the root column of /proc/self/mountinfo. A read-only overlay is a file
    system of its own, whose root is `/`, and its layers are named by descriptor, so its options show
    `/proc/self/fd/N` rather than the path. Overlay needs two lower layers without an upper one: the
    second is `empty_dir`, an empty directory of the new root that a later mount covers. Falls back to
    the bind where the host has no overlayfs (the root column then shows the host path).
    """
    dest = f"{root}{target}"
    os.makedirs(dest, mode=0o755, exist_ok=True)
    lower = os.open(source, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    empty = os.open(empty_dir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        mount(
            "overlay",
            dest,
            "overlay",
            MS_RDONLY | MS_NOSUID | MS_NODEV,
            f"lowerdir=/proc/self/fd/{lower}:/proc/self/fd/{empty}",
        )
    except OSError:
        _bind_ro(source, root, target)
    finally:
        os.close(lower)
        os.close(empty)


# --------------------------------------------------------------------------- cgroup (1)
CGROUP_V1 = Path("/sys/fs/cgroup")


def create_cgroup(name: str, memory_bytes: int, pids: int) -> list[Path]:
    """Per-turn cgroup v1 directories for the memory and pids controllers, with their limits.

    Returns the directories made (empty where the host does not delegate them). cgroup v2 and
    systemd delegation are later work (spec/sandbox.md §11).
    """
    made: list[Path] = []
    for controller, settings in (
        ("pids", {"pids.max": str(pids)}),
        ("memory", {"memory.limit_in_bytes": str(memory_bytes)}),
    ):
        base = CGROUP_V1 / controller
        if not (base / "cgroup.procs").exists() or not os.access(base, os.W_OK):
            continue
        directory = base / "sleuth" / name
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for file, value in settings.items():
                (directory / file).write_text(value)
        except OSError:
            remove_cgroups([directory])
            continue
        made.append(directory)
    return made


def remove_stale_cgroups(owner_alive: Callable[[int], bool]) -> list[Path]:
    """Remove empty turn cgroups (named `<zygote pid>-<n>`) whose zygote `owner_alive` says is gone.

    A pid that now belongs to another process does not keep them. Returns those removed.
    """
    removed: list[Path] = []
    for controller in ("pids", "memory"):
        parent = CGROUP_V1 / controller / "sleuth"
        if not parent.is_dir():
            continue
        for directory in parent.iterdir():
            owner = directory.name.split("-", 1)[0]
            stale = directory.is_dir() and owner.isdigit() and not owner_alive(int(owner))
            if stale and not remove_cgroups([directory]):
                removed.append(directory)
    return removed


def join_cgroups(directories: list[Path]) -> None:
    for directory in directories:
        (directory / "cgroup.procs").write_text("0")  # "0" means the writing process


def remove_cgroups(directories: list[Path]) -> list[Path]:
    """Remove turn cgroups; returns those still busy (the kernel may need a moment after the last
    task exits), for the caller to retry."""
    busy: list[Path] = []
    for directory in directories:
        try:
            directory.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            busy.append(directory)
    return busy


# --------------------------------------------------------------------------- identity (5), rlimits (6)
def drop_privileges(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # from root to non-root: the kernel clears every capability


def set_rlimits(cpu_s: int, memory_bytes: int, nproc: int, fsize_bytes: int, nofile: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_bytes, fsize_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def current_vm_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


# --------------------------------------------------------------------------- Landlock (8)
class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    result = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(result), 0)


def apply_landlock(read_only: Iterable[str], read_write: Iterable[str]) -> int:
    """Allow-list the file system (no execute anywhere), deny TCP bind/connect (ABI ≥ 4) and scope
    abstract sockets and signals (ABI ≥ 6). Returns the ABI used."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available")
    handled = _FS_ABI1
    if abi >= 2:
        handled |= FS_REFER
    if abi >= 3:
        handled |= FS_TRUNCATE
    if abi >= 5:
        handled |= FS_IOCTL_DEV
    attr = _RulesetAttr(
        handled,
        (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0,
        (SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _check(
        _libc.syscall(
            SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
        ),
        "landlock_create_ruleset",
    )
    try:
        read_rights = FS_READ
        write_rights = handled & ~FS_EXECUTE
        for paths, rights in ((read_only, read_rights), (read_write, write_rights)):
            for path in paths:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                try:
                    is_dir = os.path.isdir(path)
                    allowed = rights if is_dir else rights & (FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE)
                    rule = _PathBeneathAttr(allowed & handled, fd)
                    _check(
                        _libc.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0),
                        f"landlock_add_rule {path}",
                    )
                finally:
                    os.close(fd)
        _check(_libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


# --------------------------------------------------------------------------- seccomp (9)
_DENY_EPERM = (
    "fork",
    "vfork",
    "execve",
    "execveat",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "perf_event_open",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setgroups",
    "setfsuid",
    "setfsgid",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "personality",
    "acct",
    "quotactl",
    "mknod",
    "mknodat",
    "fanotify_init",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
)


def preload_seccomp() -> str | None:
    """Import pyseccomp (and so load libseccomp) now; returns why it is unavailable, if it is."""
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, RuntimeError, OSError) as exc:
        return str(exc)
    return None


def apply_seccomp() -> None:
    """A deny-list filter (spec/sandbox.md §2.1, layer 9): no new processes or programs, no sockets but
    AF_UNIX, none of the privileged calls. Threads stay allowed (clone with CLONE_THREAD)."""
    import pyseccomp as sc

    prctl(PR_SET_NO_NEW_PRIVS, 1)
    flt = sc.SyscallFilter(defaction=sc.ALLOW)
    for name in _DENY_EPERM:
        try:
            flt.add_rule(sc.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):  # a name this kernel/libseccomp does not know
            continue
    flt.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    flt.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socket", sc.Arg(0, sc.NE, socket.AF_UNIX))
    flt.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socketpair", sc.Arg(0, sc.NE, socket.AF_UNIX))
    flt.load()
