"""xputimer autoload: imported by Python's site module at start-up because
this directory is put on PYTHONPATH by libxpu_hook.so (or `xpu-run`).

(a) installs the xputimer instrumentation, never letting an error escape;
(b) chain-loads the sitecustomize that this one shadows (the next one on
    sys.path after this directory), so a site's own customization still runs.
"""


def _xpu_autoload():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        try:
            import xputimer.autoload  # noqa: F401
        except ImportError:
            # Source tree layout: <root>/xputimer/_autoload/sitecustomize.py.
            root = os.path.dirname(os.path.dirname(here))
            if os.path.isfile(os.path.join(root, "xputimer", "__init__.py")):
                sys.path.append(root)  # last, so nothing of ours shadows user code
                import xputimer.autoload  # noqa: F401
    except Exception as exc:
        if os.environ.get("XPU_PYTHON_DEBUG"):
            sys.stderr.write("xputimer: autoload failed: %r\n" % (exc,))

    # Chain to the sitecustomize we shadow.
    try:
        import importlib.machinery
        import importlib.util

        def norm(p):
            return os.path.realpath(os.path.abspath(p or os.getcwd()))

        entries = list(sys.path)
        idx = [i for i, p in enumerate(entries) if norm(p) == norm(here)]
        rest = entries[idx[0] + 1:] if idx else entries
        rest = [p for p in rest if norm(p) != norm(here)]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is not None and spec.origin and norm(os.path.dirname(spec.origin)) != norm(here):
            module = importlib.util.module_from_spec(spec)
            sys.modules["sitecustomize"] = module
            spec.loader.exec_module(module)
    except Exception as exc:
        # What site.py itself would print for a failing sitecustomize.
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                         "%s: %s\n" % (exc.__class__.__name__, exc))


_xpu_autoload()
del _xpu_autoload
