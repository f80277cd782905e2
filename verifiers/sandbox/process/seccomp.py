"""A small seccomp-BPF deny filter for sandboxed runs (x86_64 only), built as raw bytes.

It refuses syscalls a test program never needs but that widen the kernel's attack surface:
namespace and mount calls, ptrace and cross-process memory access, kernel modules, kexec,
bpf, perf, userfaultfd, io_uring, keyrings, clock setting, ``clone`` with namespace flags and
sockets outside AF_UNIX/AF_INET/AF_INET6/AF_NETLINK. ``clone3`` answers ENOSYS (its flags live
in memory a filter cannot read) so libc falls back to ``clone``. Foreign-ABI calls (i386 via
``int 0x80``, x32) are refused.

It does NOT guard against: bugs in allowed syscalls (read, write, mmap, futex, ...); it is a
deny list, not an allow list. On other architectures ``build_filter`` returns None and runs
get no filter (``describe()`` says so).
"""

from __future__ import annotations

import errno
import functools
import platform
import struct

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
# BPF opcodes (linux/filter.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000

_NR_SOCKET, _NR_CLONE, _NR_CLONE3 = 41, 56, 435
_CLONE_NS_FLAGS = 0x7E020000  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
_SOCKET_FAMILIES = (1, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK

DENIED_X86_64: dict[str, int] = {
    "uselib": 134, "ptrace": 101, "syslog": 103, "vhangup": 153, "pivot_root": 155,
    "_sysctl": 156, "adjtimex": 159, "chroot": 161, "acct": 163, "settimeofday": 164,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169,
    "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173,
    "create_module": 174, "init_module": 175, "delete_module": 176, "quotactl": 179,
    "lookup_dcookie": 212, "clock_settime": 227, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "unshare": 272, "perf_event_open": 298,
    "fanotify_init": 300, "name_to_handle_at": 303, "open_by_handle_at": 304,
    "clock_adjtime": 305, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "kcmp": 312, "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "pidfd_getfd": 438, "mount_setattr": 442, "quotactl_fd": 443,
}  # fmt: skip


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


# Creating SysV IPC objects and POSIX message queues: refused only where nothing can bound a
# run's IPC namespace (the per-run bubblewrap path, ``bwrap.py``; a kernel that refuses the
# limits, ``guest/ipclimits.py``).
IPC_CREATE_X86_64 = {"shmget": 29, "semget": 64, "msgget": 68, "mq_open": 240}


def build_filter(deny_ipc: bool = False) -> bytes | None:
    """The filter as a packed ``sock_filter`` array, or None off x86_64; with ``deny_ipc`` it
    also refuses ``IPC_CREATE_X86_64``."""
    if platform.machine() != "x86_64":
        return None
    eperm = _RET_ERRNO | errno.EPERM
    prog = [
        _ins(_LD_W_ABS, 4),  # arch
        _ins(_JEQ_K, _AUDIT_ARCH_X86_64, 1, 0),
        _ins(_RET_K, _RET_ERRNO | errno.ENOSYS),
        _ins(_LD_W_ABS, 0),  # syscall number
        _ins(_JGE_K, _X32_BIT, 0, 1),
        _ins(_RET_K, _RET_ERRNO | errno.ENOSYS),
    ]
    denied = {**DENIED_X86_64, **(IPC_CREATE_X86_64 if deny_ipc else {})}
    for nr in sorted(denied.values()):
        prog += [_ins(_JEQ_K, nr, 0, 1), _ins(_RET_K, eperm)]
    prog += [_ins(_JEQ_K, _NR_CLONE3, 0, 1), _ins(_RET_K, _RET_ERRNO | errno.ENOSYS)]
    # clone: refuse namespace flags (args[0], low word at offset 16)
    prog += [
        _ins(_JEQ_K, _NR_CLONE, 0, 3),
        _ins(_LD_W_ABS, 16),
        _ins(_JSET_K, _CLONE_NS_FLAGS, 0, 1),
        _ins(_RET_K, eperm),
    ]
    # socket: allow only a few families (args[0])
    n = len(_SOCKET_FAMILIES)
    prog += [_ins(_LD_W_ABS, 0), _ins(_JEQ_K, _NR_SOCKET, 0, n + 2), _ins(_LD_W_ABS, 16)]
    for i, fam in enumerate(_SOCKET_FAMILIES):
        prog.append(_ins(_JEQ_K, fam, n - i, 0))
    prog.append(_ins(_RET_K, _RET_ERRNO | errno.EAFNOSUPPORT))
    prog.append(_ins(_RET_K, _RET_ALLOW))
    return b"".join(prog)


@functools.cache
def noipc_filter() -> bytes | None:
    """``build_filter(deny_ipc=True)``, built once."""
    return build_filter(deny_ipc=True)
