"""User-configured traced APIs: XPU_TRACED_PYTHON_API.

Syntax (comma separated; whitespace ignored):

    module@qualname[:kind]

e.g. "torch.cuda@synchronize,mypkg.mod@Class.method,mypkg.data@Loader.__next__:dataloader".
The function or method `qualname` (dotted, through classes) of `module` is
wrapped when `module` is imported (at once if it already is). The signature
name is "module@qualname"; kind defaults to `api` (XPU_OP_PY_API). The
optional kind (api, dataloader, optimizer, sync, checkpoint) lets a custom
training loop feed step detection without torch. TRACED_PYTHON_API (the
name used by the original xpu_timer) is read too when XPU_TRACED_PYTHON_API
is unset.
"""

import os

from . import importhook, tracing


class Spec:
    __slots__ = ("module", "qualname", "kind", "text")

    def __init__(self, module, qualname, kind, text):
        self.module, self.qualname, self.kind, self.text = module, qualname, kind, text

    @property
    def name(self):
        return "%s@%s" % (self.module, self.qualname)

    def __repr__(self):
        return "Spec(%r)" % self.text


def parse(text):
    """Returns (specs, errors): errors lists the entries that were rejected."""
    specs, errors = [], []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        kind = "api"
        body = item
        if ":" in item:
            body, kind = item.rsplit(":", 1)
            kind = kind.strip().lower()
        module, sep, qualname = body.partition("@")
        module, qualname = module.strip(), qualname.strip()
        ok = (sep and module and qualname and kind in tracing.KIND_BY_NAME
              and all(p.isidentifier() for p in module.split("."))
              and all(p.isidentifier() for p in qualname.split(".")))
        if ok:
            specs.append(Spec(module, qualname, kind, item))
        else:
            errors.append(item)
    return specs, errors


def from_env(environ=None):
    env = os.environ if environ is None else environ
    text = env.get("XPU_TRACED_PYTHON_API")
    if text is None:
        text = env.get("TRACED_PYTHON_API", "")
    return parse(text)


def resolve_owner(module, qualname):
    """(owner, attribute) for qualname inside module, or (None, None)."""
    parts = qualname.split(".")
    owner = module
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
        if owner is None:
            return None, None
    return owner, parts[-1]


def apply(spec, module):
    owner, attr = resolve_owner(module, spec.qualname)
    if owner is None:
        return False
    value_of = None
    if spec.kind == "dataloader":
        from .steps import batch_size
        value_of = batch_size
    return tracing.wrap_attribute(owner, attr, tracing.KIND_BY_NAME[spec.kind], spec.name,
                                  value_of=value_of)


def install(specs):
    """Registers a post-import patch per spec."""
    for spec in specs:
        importhook.when_imported(spec.module, lambda mod, s=spec: apply(s, mod))
