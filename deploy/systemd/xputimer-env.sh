# XPUTimer: point every job of this node at the system daemon
# (xpu-daemon.service). Install as /etc/profile.d/xputimer.sh, or set the
# same variables in the job scheduler's environment. The hook of a non-root
# process otherwise looks for its own daemon under /tmp/xpu-<uid>/.
export XPU_DAEMON_SOCKET=/run/xpu/daemon.sock
export XPU_DAEMON=off
