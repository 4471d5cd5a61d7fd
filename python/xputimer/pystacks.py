"""Python stacks on demand, for hang diagnosis.

Registers faulthandler on XPU_PYSTACK_SIGNAL (default SIGUSR2) to write the
stacks of all threads to <dir>/xpu-pystack-<pid>.txt, where <dir> is
XPU_PYSTACK_DIR or /tmp/xpu-<uid>/pystacks: the convention the node daemon's
evidence collector follows (daemon/evidence/evidence_collector.cc). The
file's first line names the process ("xputimer-pystacks pid P start T", T =
/proc/self/stat starttime) so that the daemon never signals a process that
merely reuses the pid of one that registered. The file is removed at exit.

The directory must be this user's own and writable by nobody else (created
0700 when missing), the file is created 0600 without following a symlink:
the daemon checks the same before it signals (docs/security.md), so a
directory another user prepared is refused on both sides.

XPU_PYSTACKS=0 disables it. Never raises.
"""

import atexit
import faulthandler
import os
import signal
import stat

_state = {"file": None, "path": None}


def _start_ticks():
    try:
        with open("/proc/self/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "0"


def _remove():
    f, path = _state["file"], _state["path"]
    try:
        faulthandler.unregister(_signal())
    except (ValueError, RuntimeError):
        pass
    if f is not None:
        try:
            f.close()
            os.unlink(path)
        except OSError:
            pass


def _signal():
    try:
        return int(os.environ.get("XPU_PYSTACK_SIGNAL", int(signal.SIGUSR2)))
    except ValueError:
        return int(signal.SIGUSR2)


def _private_dir(d):
    """Creates `d` (and a missing parent) 0700; True when it is ours alone."""
    parent = os.path.dirname(d.rstrip("/"))
    for p in (parent, d):
        if p and not os.path.lexists(p):
            try:
                os.mkdir(p, 0o700)
            except FileExistsError:
                pass
    st = os.lstat(d)
    if not (stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
            and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) == 0):
        return False
    # Whoever may write the parent could swap `d` for another directory.
    pst = os.stat(parent or "/")
    return (pst.st_uid in (0, os.geteuid())
            and (pst.st_mode & (stat.S_IWGRP | stat.S_IWOTH) == 0 or pst.st_mode & stat.S_ISVTX))


def install():
    """Idempotent; True when registered."""
    if _state["file"] is not None:
        return True
    if os.environ.get("XPU_PYSTACKS", "1").strip().lower() in ("0", "off", "false", "no"):
        return False
    d = os.environ.get("XPU_PYSTACK_DIR") or "/tmp/xpu-%d/pystacks" % os.getuid()
    path = os.path.join(d, "xpu-pystack-%d.txt" % os.getpid())
    try:
        if not _private_dir(d):
            return False
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        f = os.fdopen(fd, "w", buffering=1)
        f.write("xputimer-pystacks pid %d start %s\n" % (os.getpid(), _start_ticks()))
        f.flush()
        faulthandler.register(_signal(), file=f, all_threads=True, chain=False)
    except (OSError, ValueError, RuntimeError, AttributeError):
        return False
    _state["file"], _state["path"] = f, path
    atexit.register(_remove)
    return True
