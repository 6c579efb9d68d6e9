"""The system calls agent code never needs, refused in every sandbox mode.

A job's code has no use for namespaces, mounts, tracing, the kernel keyring, BPF, perf, kernel
modules or a reboot, and each is a step towards leaving the sandbox or reaching a neighbour. The
filter is compiled by libseccomp (through `pyseccomp`, which keeps the API of libseccomp's own
bindings) into a BPF program here, in the library; the probe's child loads that program into each
session right before the job is imported (`child._refuse_syscalls`), after the session has taken
its own namespaces, so bubblewrap and the namespaces mode run the same filter. Refused calls fail
with EPERM (`clone3` with ENOSYS, so that the C library falls back to `clone`, whose flags the
filter can read), never kill: a job that tries learns nothing it could not read in this file.
"""

from __future__ import annotations

import errno
import functools
import tempfile

# Namespaces, mounts and the root: the jail's own walls.
WALLS = ("unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
         "move_mount", "open_tree", "open_tree_attr", "mount_setattr", "listmount", "statmount")
# Other processes' memory and the kernel's shared state.
REACH = ("ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp", "keyctl",
         "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "open_by_handle_at", "name_to_handle_at",
         "lookup_dcookie", "syslog", "io_uring_setup", "io_uring_enter", "io_uring_register")  # io_uring: a large surface
# The machine itself.
MACHINE = ("init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon",
           "swapoff", "acct", "quotactl", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl",
           "ioperm", "vhangup")
REFUSED = WALLS + REACH + MACHINE
# clone's flags that make a namespace (linux/sched.h): refused on clone, as unshare is.
CLONE_NEW = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
             "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
             "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080}


AF_VSOCK = 40


class Unavailable(RuntimeError):
    """libseccomp (or its bindings) is missing here: the sandbox runs without the filter and says so."""


@functools.cache
def program() -> bytes:
    """The filter as the BPF program libseccomp compiles for this machine's architecture."""
    try:
        import pyseccomp as sc

        flt = sc.SyscallFilter(defaction=sc.ALLOW)
    except (ImportError, OSError, RuntimeError) as e:
        raise Unavailable(f"libseccomp is not usable here ({type(e).__name__}: {e})") from None
    for name in REFUSED:
        try:
            flt.add_rule(sc.ERRNO(errno.EPERM), name)
        except (ValueError, OSError, RuntimeError):
            continue  # a call this kernel's architecture does not have
    for flag in CLONE_NEW.values():
        flt.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    # vsock reaches the hypervisor (a VM's host) whatever the network namespace.
    flt.add_rule(sc.ERRNO(errno.EPERM), "socket", sc.Arg(0, sc.EQ, AF_VSOCK))
    with tempfile.TemporaryFile() as f:
        flt.export_bpf(f)
        f.seek(0)
        return f.read()
