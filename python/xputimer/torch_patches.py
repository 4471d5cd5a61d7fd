"""Lazy instrumentation of PyTorch APIs (applied when torch is imported).

Nothing here imports torch: every patch is a post-import hook on the module
that defines the API, so a process that never imports torch pays nothing.

Traced by default:
  DataLoader    torch.utils.data.dataloader._BaseDataLoaderIter.__next__
                (XPU_OP_PY_DATALOADER, value = batch size); feeds step detection.
  Optimizer     torch.optim.Optimizer.step through the global
                register_optimizer_step_pre_hook / _post_hook (torch >= 2.0),
                which fire once per step() whatever subclass overrides step;
                on older torch the step of each Optimizer subclass is wrapped
                when the optimizer is constructed. XPU_OP_PY_OPTIMIZER.
  Sync          torch.cuda.synchronize, torch.cuda.Event.synchronize,
                torch.cuda.Stream.synchronize (XPU_OP_PY_SYNC).
  Checkpoint    torch.save, torch.distributed.checkpoint.save / async_save /
                save_state_dict (XPU_OP_PY_CHECKPOINT).

Deliberately not traced: Tensor.item(), .cpu(), .tolist(), .nonzero() and
other implicit synchronizations. They are C methods called in hot loops
(also on CPU tensors, where they do not synchronize at all), so a Python
wrapper would add ~0.5-1 us to every call for little information: the hook
already records the blocking CUDA call underneath them (cudaStreamSynchronize,
synchronous cudaMemcpy: XPU_OP_SYNC_* / XPU_OP_MEMCPY), and the call-site
proposal in README.md attributes those to Python lines. They can still be
opted in with XPU_TRACED_PYTHON_API="torch@Tensor.item:sync".
"""

import threading
import time

from . import _hook, importhook, tracing
from .steps import batch_size

_done = set()


def _once(key):
    if key in _done:
        return False
    _done.add(key)
    return True


def _patch_dataloader(mod):
    cls = getattr(mod, "_BaseDataLoaderIter", None)
    if cls is not None and _once("dataloader"):
        tracing.wrap_attribute(cls, "__next__", _hook.OP_PY_DATALOADER,
                               "torch.utils.data.DataLoader.__next__", value_of=batch_size)


def _patch_cuda(mod):
    if _once("cuda.synchronize"):
        tracing.wrap_attribute(mod, "synchronize", _hook.OP_PY_SYNC, "torch.cuda.synchronize")
    for cls_name in ("Event", "Stream"):
        cls = getattr(mod, cls_name, None)
        if cls is not None and _once("cuda." + cls_name):
            tracing.wrap_attribute(cls, "synchronize", _hook.OP_PY_SYNC,
                                   "torch.cuda.%s.synchronize" % cls_name)


def _patch_optimizer(mod):
    cls = getattr(mod, "Optimizer", None)
    if cls is None or not _once("optimizer"):
        return
    sig = _hook.intern(_hook.OP_PY_OPTIMIZER, "torch.optim.Optimizer.step")
    emit = _hook.emitter()
    if not sig or emit is None:
        return
    pre = getattr(mod, "register_optimizer_step_pre_hook", None)
    post = getattr(mod, "register_optimizer_step_post_hook", None)
    listeners = tracing._listeners.setdefault(_hook.OP_PY_OPTIMIZER, [])
    now = time.time_ns
    local = threading.local()

    def on_pre(optimizer, args, kwargs):
        stack = getattr(local, "starts", None)
        if stack is None:
            stack = local.starts = []
        elif len(stack) > 64:  # post hooks skipped by exceptions: do not grow forever
            del stack[:]
        stack.append(now())

    def on_post(optimizer, args, kwargs):
        stack = getattr(local, "starts", None)
        if not stack:
            return
        t0 = stack.pop()
        t1 = now()
        emit(sig, t0, t1, 0, 0)
        for listener in listeners:
            try:
                listener(_hook.OP_PY_OPTIMIZER, t0, t1, 0)
            except Exception:
                pass

    if pre is not None and post is not None:
        pre(on_pre)
        post(on_post)
        return
    # torch < 2.0: wrap each concrete step once, outermost call only.
    original_init = cls.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        klass = type(self)
        if "__xpu_step__" not in vars(klass):
            tracing.wrap_attribute(klass, "step", _hook.OP_PY_OPTIMIZER,
                                   "torch.optim.Optimizer.step")
            klass.__xpu_step__ = True

    cls.__init__ = init


def _patch_torch(mod):
    if _once("torch.save"):
        tracing.wrap_attribute(mod, "save", _hook.OP_PY_CHECKPOINT, "torch.save")


def _patch_serialization(mod):
    if _once("torch.serialization.save"):
        tracing.wrap_attribute(mod, "save", _hook.OP_PY_CHECKPOINT, "torch.save")


def _patch_dcp(mod):
    if not _once("dcp"):
        return
    for fn in ("save", "async_save", "save_state_dict"):
        tracing.wrap_attribute(mod, fn, _hook.OP_PY_CHECKPOINT,
                               "torch.distributed.checkpoint." + fn)


def install():
    importhook.when_imported("torch.utils.data.dataloader", _patch_dataloader)
    importhook.when_imported("torch.cuda", _patch_cuda)
    importhook.when_imported("torch.optim.optimizer", _patch_optimizer)
    importhook.when_imported("torch.serialization", _patch_serialization)
    importhook.when_imported("torch", _patch_torch)
    importhook.when_imported("torch.distributed.checkpoint", _patch_dcp)
