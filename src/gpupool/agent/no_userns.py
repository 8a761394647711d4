"""Workloads may not create user namespaces: inside one an unprivileged process holds every
capability over its own namespaces, the door to a whole class of kernel bugs, and a job has
no need of it (containers are started by the agent's runtime, not by jobs). A seccomp filter,
installed in the workload's first process before it runs the job and inherited by all it
starts, answers ``unshare``/``clone`` with ``CLONE_NEWUSER`` with EPERM and ``clone3``
(whose flags a filter cannot read) with ENOSYS, so the C library falls back to ``clone``.

Needs libseccomp (``libseccomp2``, on every current distribution) through ``pyseccomp``;
where either is missing the agent says so and workloads run without the filter."""

import errno

CLONE_NEWUSER = 0x10000000

try:
    import pyseccomp as seccomp
except (ImportError, OSError):  # the library binding, or libseccomp.so itself
    seccomp = None


def available() -> bool:
    return seccomp is not None


def deny() -> None:
    """In the workload's first process: load the filter (no ``no_new_privs`` where the
    process may, so setuid programs in the job still work; with it otherwise)."""
    if seccomp is None:
        return
    flags = seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "unshare", flags)
    rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", flags)
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    rules.set_attr(seccomp.Attr.CTL_NNP, 0)
    try:
        rules.load()
    except OSError:  # loading without no_new_privs needs CAP_SYS_ADMIN
        rules.set_attr(seccomp.Attr.CTL_NNP, 1)
        rules.load()
