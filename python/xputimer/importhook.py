"""Post-import hooks: run a callback right after a named module has executed.

A finder is put first on sys.meta_path. For a module nobody watches it costs
one dict lookup per import and returns None, so the normal finders proceed.
For a watched module it asks the other finders for the real spec and wraps
the loader only around exec_module: before the module's code runs, the real
loader is put back into module.__spec__ / module.__loader__, so the module
(and importlib.resources, pkgutil, ...) never sees our wrapper. Callbacks run
after the module executed successfully; an exception in a callback is
swallowed (instrumentation must never break the program).

Modules already imported when a hook is registered get the callback at once.
Thread-safety: registration takes a lock; imports are serialized per module
by the import system itself.
"""

import sys
import threading

_lock = threading.Lock()
_hooks = {}  # module name -> list of callbacks


def _run_callbacks(name, module):
    with _lock:
        callbacks = list(_hooks.get(name, ()))
    for cb in callbacks:
        try:
            cb(module)
        except Exception:  # never let instrumentation break an import
            _report(name)


def _report(name):
    import os
    if os.environ.get("XPU_PYTHON_DEBUG"):
        import traceback
        sys.stderr.write("xputimer: post-import hook for %s failed:\n" % name)
        traceback.print_exc()


class _LoaderWrapper:
    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        self._loader.exec_module(module)
        _run_callbacks(self._name, sys.modules.get(self._name, module))

    def __getattr__(self, attr):
        return getattr(self._loader, attr)


class _PostImportFinder:
    """The one finder we install; watches only registered names."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _hooks:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            try:
                spec = find(fullname, path, target)
            except Exception:
                return None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        spec.loader = _LoaderWrapper(loader, fullname)
        return spec

    def invalidate_caches(self):
        pass


_finder = _PostImportFinder()


def _ensure_finder():
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def when_imported(name, callback):
    """Calls callback(module) after `name` is imported (now, if it already is)."""
    with _lock:
        _hooks.setdefault(name, []).append(callback)
        _ensure_finder()
    module = sys.modules.get(name)
    if module is not None and getattr(getattr(module, "__spec__", None), "_initializing", False) is not True:
        try:
            callback(module)
        except Exception:
            _report(name)


def uninstall():
    """Removes the finder and every hook (tests)."""
    with _lock:
        _hooks.clear()
        try:
            sys.meta_path.remove(_finder)
        except ValueError:
            pass
