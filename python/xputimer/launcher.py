"""`python -m xputimer run -- cmd args...` (console script `xpu-run`).

Sets LD_PRELOAD to libxpu_hook.so and PYTHONPATH to the autoload directory,
then execs the command, so every Python process it starts (torchrun and its
workers included) is traced without a code change.

Hook lookup order: --hook PATH, $XPU_HOOK_LIB, the wheel's own copy
(<pkg>/_bundle/lib, tools/make_wheel.sh), next to the package (<pkg>/lib,
and <prefix>/lib for the <prefix>/share/xputimer/python layout), then the
build trees of a source checkout (build*/hook, build*/lib). The hook finds
xpu-daemon from its own location (<lib>/../bin in the wheel and the bundle).

`xpu` (console script of the wheel) runs the wheel's xpu CLI.
"""

import argparse
import glob
import os
import sys

HOOK_NAME = "libxpu_hook.so"
PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def autoload_dir():
    """The directory that must be on PYTHONPATH (holds sitecustomize.py)."""
    return os.path.join(PKG_DIR, "_autoload")


def candidate_hooks():
    env = os.environ.get("XPU_HOOK_LIB")
    if env:
        yield env
    yield os.path.join(PKG_DIR, "_bundle", "lib", HOOK_NAME)
    yield os.path.join(PKG_DIR, "lib", HOOK_NAME)
    # <prefix>/share/xputimer/python/xputimer -> <prefix>/lib
    prefix = os.path.normpath(os.path.join(PKG_DIR, "..", "..", "..", ".."))
    yield os.path.join(prefix, "lib", HOOK_NAME)
    # Source checkout: <repo>/python/xputimer -> <repo>/build*/...
    repo = os.path.normpath(os.path.join(PKG_DIR, "..", ".."))
    for pattern in ("build/hook", "build/lib", "build*/hook", "build*/lib", "build*"):
        for d in sorted(glob.glob(os.path.join(repo, pattern))):
            yield os.path.join(d, HOOK_NAME)


def find_hook(explicit=None):
    if explicit:
        return os.path.abspath(explicit) if os.path.isfile(explicit) else None
    for path in candidate_hooks():
        if os.path.isfile(path):
            return os.path.abspath(path)
    return None


def _same(a, b):
    return a == b or (os.path.sep in a and os.path.realpath(a) == os.path.realpath(b))


def _prepend(value, existing, sep):
    parts = [p for p in (existing or "").split(sep) if p and not _same(p, value)]
    return sep.join([value] + parts)


def build_env(hook, environ=None):
    env = dict(os.environ if environ is None else environ)
    # LD_PRELOAD accepts ':' or ' ' separators; keep others' entries after ours.
    preload = env.get("LD_PRELOAD", "").replace(" ", ":")
    env["LD_PRELOAD"] = _prepend(hook, preload, ":")
    auto = autoload_dir()
    env["PYTHONPATH"] = _prepend(auto, env.get("PYTHONPATH", ""), os.pathsep)
    env["XPU_PYTHON_DIR"] = auto
    return env


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="xpu-run",
        description="Run a command with XPUTimer tracing (LD_PRELOAD + Python autoload).")
    parser.add_argument("--hook", help="path of libxpu_hook.so (default: $XPU_HOOK_LIB, "
                        "next to the package, build trees)")
    parser.add_argument("--print-env", action="store_true",
                        help="print the variables that would be set and exit")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the command, after '--'")
    args = parser.parse_args(argv)
    cmd = args.command
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    hook = find_hook(args.hook)
    if hook is None:
        sys.stderr.write("xpu-run: %s not found (set XPU_HOOK_LIB or --hook)\n" % HOOK_NAME)
        return 2
    env = build_env(hook)
    if args.print_env:
        for key in ("LD_PRELOAD", "PYTHONPATH", "XPU_PYTHON_DIR"):
            print("%s=%s" % (key, env[key]))
        return 0
    if not cmd:
        parser.error("no command given (xpu-run -- cmd args...)")
    try:
        os.execvpe(cmd[0], cmd, env)
    except OSError as exc:
        sys.stderr.write("xpu-run: cannot run %s: %s\n" % (cmd[0], exc))
        return 127


def xpu_main(argv=None):
    """The `xpu` CLI shipped in the wheel (<pkg>/_bundle/bin/xpu)."""
    cli = os.path.join(PKG_DIR, "_bundle", "bin", "xpu")
    if not os.access(cli, os.X_OK):
        sys.stderr.write("xpu: %s not found: this xputimer was not installed from the wheel "
                         "(tools/make_wheel.sh)\n" % cli)
        return 127
    args = sys.argv[1:] if argv is None else argv
    os.execv(cli, [cli] + list(args))


if __name__ == "__main__":
    sys.exit(main())
