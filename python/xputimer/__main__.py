"""python -m xputimer run -- cmd args...   (see launcher.py)
python -m xputimer xpu ARGS...   (the xpu CLI of the wheel)
python -m xputimer ring FILE [--stats | --callsites]   (dump a ring file as JSON)"""

import json
import sys


def _ring(argv):
    import argparse
    from . import callsites, read_ring, ring_stats
    p = argparse.ArgumentParser(prog="python -m xputimer ring")
    p.add_argument("file")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--stats", action="store_true", help="per-signature stats only")
    g.add_argument("--callsites", action="store_true",
                   help="Python stacks of sampled launches, joined to their launch records")
    a = p.parse_args(argv)
    try:
        if a.stats:
            out = ring_stats(a.file)
        elif a.callsites:
            out = callsites(a.file)
        else:
            out = read_ring(a.file)
    except (OSError, ValueError) as exc:
        sys.stderr.write("xputimer: %s: %s\n" % (a.file, exc))
        return 1
    json.dump(out, sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "run":
        from .launcher import main as run_main
        return run_main(argv[1:])
    if argv and argv[0] == "xpu":
        from .launcher import xpu_main
        return xpu_main(argv[1:])
    if argv and argv[0] == "ring":
        return _ring(argv[1:])
    sys.stderr.write(__doc__ + "\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
