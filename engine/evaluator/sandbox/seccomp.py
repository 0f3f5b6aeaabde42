"""The seccomp filter every sandboxed child runs under (bubblewrap's `--seccomp FD`).

Namespaces, a uid of its own and no capabilities already keep a child away from other processes and the
host. What they leave is the kernel's attack surface and the child's own sandbox: inside its PID namespace
the child shares a uid with bubblewrap's init (pid 1), so `ptrace(PTRACE_ATTACH, 1)` and `/proc/1/mem`
worked (issue 35), and code run in pid 1 would be outside any filter. The filter refuses, with EPERM, the
system calls no evaluation child needs: tracing and reading other processes' memory, loading code into the
kernel (bpf, modules, kexec), the kernel keyring, perf events, io_uring, namespaces and mounts, and a few
host-wide settings. `/proc/1/mem` is masked by a read-only bind of /dev/null (isolation.bwrap_arguments):
opening a file is not something a filter can judge by path.

Built with libseccomp (Debian's `libseccomp2`, the library systemd, podman and bubblewrap's own users rely
on), through ctypes: its Python binding (`python3-seccomp`) is built for the system Python only and is not
on PyPI for our interpreter, and libseccomp does what matters here (resolving names per architecture,
refusing foreign architectures' system calls, emitting correct BPF) better than a hand-written program
would. The BPF is made once per process and written into a memfd for each child.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os

# EPERM rather than killing the process: a refused call is an error the kernel's code sees (and a test can
# check), and nothing an honest kernel, Python, numpy, Triton or the Neuron tools do at run time needs these.
BLOCKED_SYSCALLS = (
    # other processes' memory and execution
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    # code or filters loaded into the kernel
    "bpf", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    # the kernel keyring, perf events, io_uring, userfaultfd: large attack surfaces, unused here
    "keyctl", "add_key", "request_key", "perf_event_open", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "userfaultfd",
    # namespaces and mounts (the sandbox is made before the filter applies)
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "open_by_handle_at", "name_to_handle_at",
    # host-wide settings and devices
    "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "iopl", "ioperm", "vhangup", "lookup_dcookie", "fanotify_init", "uselib",
)

_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_ACT_ERRNO = 0x00050000


class SeccompUnavailable(Exception):
    """libseccomp cannot be loaded or refused to build the filter."""


def available() -> bool:
    try:
        filter_program()
    except SeccompUnavailable:
        return False
    return True


@functools.cache
def filter_program() -> bytes:
    """The filter as the BPF program bubblewrap reads (`seccomp_export_bpf`), for this machine's architecture."""
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise SeccompUnavailable(f"libseccomp is not installed ({exc}); install it: apt-get install libseccomp2") \
            from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    context = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not context:
        raise SeccompUnavailable("seccomp_init failed")
    fd = os.memfd_create("accelopt-seccomp-build")
    try:
        for syscall in BLOCKED_SYSCALLS:
            number = lib.seccomp_syscall_resolve_name(syscall.encode())
            if number < 0:  # not a system call on this architecture (e.g. iopl on arm64)
                continue
            rc = lib.seccomp_rule_add(context, _SCMP_ACT_ERRNO | errno.EPERM, number, 0)
            if rc < 0:
                raise SeccompUnavailable(f"seccomp_rule_add({syscall}) failed: {os.strerror(-rc)}")
        rc = lib.seccomp_export_bpf(context, fd)
        if rc < 0:
            raise SeccompUnavailable(f"seccomp_export_bpf failed: {os.strerror(-rc)}")
        size = os.lseek(fd, 0, os.SEEK_END)
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)
        lib.seccomp_release(context)


def filter_fd() -> int:
    """A fresh descriptor holding the filter, positioned at its start, for one bubblewrap to read (the caller
    passes it to the child and closes it once the child has started)."""
    program = filter_program()
    fd = os.memfd_create("accelopt-seccomp", 0)  # inheritable once passed; no close-on-exec wanted
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
