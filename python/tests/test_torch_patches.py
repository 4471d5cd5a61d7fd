"""Default torch instrumentation, against a stub `torch` package written by
the test with the same module layout and API surface as PyTorch 2.x
(_BaseDataLoaderIter.__next__, global optimizer step hooks, cuda
synchronize/Event/Stream, torch.save, torch.distributed.checkpoint.save).
The stub lets the tests run where torch is not installed; with real torch
installed, the GPU-less parts of test_real_torch below run as well."""

import importlib.util
import textwrap

import pytest

STUB = {
    "torch/__init__.py": """
        from torch import cuda, optim, serialization
        from torch.serialization import save
        import torch.utils.data
        """,
    "torch/serialization.py": """
        import pickle
        def save(obj, f):
            with open(f, "wb") as fh:
                pickle.dump(obj, fh)
        """,
    "torch/cuda/__init__.py": """
        import time
        from .streams import Event, Stream
        def synchronize(device=None):
            time.sleep(0.0002)
        """,
    "torch/cuda/streams.py": """
        class Stream:
            def synchronize(self):
                return "stream-synced"
        class Event:
            def synchronize(self):
                return "event-synced"
        """,
    "torch/optim/__init__.py": """
        from .optimizer import Optimizer
        from .sgd import SGD
        """,
    "torch/optim/optimizer.py": """
        import functools
        _pre, _post = {}, {}
        def register_optimizer_step_pre_hook(hook):
            _pre[len(_pre)] = hook
        def register_optimizer_step_post_hook(hook):
            _post[len(_post)] = hook
        class Optimizer:
            def __init__(self, params):
                self.params = list(params)
                self._patch_step_function()
            def _patch_step_function(self):
                cls = self.__class__
                if not getattr(cls.step, "hooked", False):
                    cls.step = Optimizer.profile_hook_step(cls.step)
            @staticmethod
            def profile_hook_step(func):
                @functools.wraps(func)
                def wrapper(*args, **kwargs):
                    self = args[0]
                    for h in list(_pre.values()):
                        h(self, args, kwargs)
                    out = func(*args, **kwargs)
                    for h in list(_post.values()):
                        h(self, args, kwargs)
                    return out
                wrapper.hooked = True
                return wrapper
            def step(self):
                raise NotImplementedError
        """,
    "torch/optim/sgd.py": """
        from .optimizer import Optimizer
        class SGD(Optimizer):
            def step(self):
                self.params = [p - 1 for p in self.params]
        """,
    "torch/utils/__init__.py": "",
    "torch/utils/data/__init__.py": "from .dataloader import DataLoader\n",
    "torch/utils/data/dataloader.py": """
        class _Batch:
            def __init__(self, n):
                self.shape = (n, 3)
        class _BaseDataLoaderIter:
            def __init__(self, loader):
                self._loader, self._i = loader, 0
            def __iter__(self):
                return self
            def __next__(self):
                return self._next_data()
        class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
            def _next_data(self):
                if self._i >= self._loader.n:
                    raise StopIteration
                self._i += 1
                return (_Batch(self._loader.batch_size), _Batch(self._loader.batch_size))
        class DataLoader:
            def __init__(self, n, batch_size):
                self.n, self.batch_size = n, batch_size
            def __iter__(self):
                return _SingleProcessDataLoaderIter(self)
        """,
    "torch/distributed/__init__.py": "",
    "torch/distributed/checkpoint/__init__.py": """
        def save(state_dict, checkpoint_id=None):
            return sorted(state_dict)
        """,
}


def write_stub(root):
    for rel, text in STUB.items():
        path = root / "stubs" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return str(root / "stubs")


TRAIN = r'''
import json, os, sys
assert "torch" not in sys.modules
import torch
from torch.utils.data import DataLoader
opt = torch.optim.SGD([1.0, 2.0])
for epoch in range(2):
    for batch in DataLoader(n=5, batch_size=6):
        torch.cuda.synchronize()
        opt.step()
assert torch.cuda.Event().synchronize() == "event-synced"
assert torch.cuda.Stream().synchronize() == "stream-synced"
torch.save({"w": 1}, os.path.join(sys.argv[1], "ckpt.pt"))
import torch.distributed.checkpoint as dcp
assert dcp.save({"b": 1, "a": 2}) == ["a", "b"]
print(json.dumps({"params": opt.params}))
'''


def test_stub_torch_is_traced_lazily(run_traced, tmp_path):
    stubs = write_stub(tmp_path)
    run = run_traced(TRAIN, args=[str(tmp_path)], extra_path=[stubs])
    assert run.json()["params"] == [1.0 - 10, 2.0 - 10]
    loads = run.events("dataloader", "torch.utils.data.DataLoader.__next__")
    assert len(loads) == 10  # StopIteration at the end of each epoch is not an event
    assert all(e["seq"] == 6 for e in loads)
    assert len(run.events("optimizer", "torch.optim.Optimizer.step")) == 10
    assert len(run.events("sync", "torch.cuda.synchronize")) == 10
    assert len(run.events("sync", "torch.cuda.Event.synchronize")) == 1
    assert len(run.events("sync", "torch.cuda.Stream.synchronize")) == 1
    assert len(run.events("checkpoint", "torch.save")) == 1
    assert len(run.events("checkpoint", "torch.distributed.checkpoint.save")) == 1
    # DO x 10 in one pattern: the epoch boundary does not break it.
    steps = run.events("step")
    assert [s["seq"] for s in steps] == list(range(9))


def test_torch_not_imported_means_nothing_patched(run_traced, tmp_path):
    stubs = write_stub(tmp_path)
    code = r'''
import json, sys
from xputimer import importhook
print(json.dumps({"torch": "torch" in sys.modules,
                  "finder": type(sys.meta_path[0]).__name__}))
'''
    run = run_traced(code, extra_path=[stubs])
    assert run.json() == {"torch": False, "finder": "_PostImportFinder"}
    assert run.events("dataloader") == [] and run.events("sync") == []


def test_torch_switch_off(run_traced, tmp_path):
    stubs = write_stub(tmp_path)
    run = run_traced(TRAIN, env={"XPU_PYTHON_TORCH": "0"}, args=[str(tmp_path)],
                     extra_path=[stubs])
    assert run.events("dataloader") == [] and run.events("optimizer") == []


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_real_torch_cpu(run_traced, tmp_path):
    code = r'''
import torch
ds = torch.utils.data.TensorDataset(torch.randn(40, 4), torch.randn(40, 1))
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in torch.utils.data.DataLoader(ds, batch_size=8):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
torch.save(model.state_dict(), "m.pt")
'''
    run = run_traced(code)
    assert len(run.events("dataloader")) == 5
    assert all(e["seq"] == 8 for e in run.events("dataloader"))
    assert len(run.events("optimizer")) == 5
    assert len(run.events("checkpoint", "torch.save")) == 1


def _cuda_available():
    if importlib.util.find_spec("torch") is None:
        return False
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                         capture_output=True, text=True, timeout=50)
    return out.stdout.strip() == "True"


@pytest.mark.skipif(not _cuda_available(), reason="torch with a CUDA device not available")
def test_real_torch_cuda_sync_apis(run_traced):
    code = r'''
import torch
x = torch.randn(256, 256, device="cuda")
for _ in range(3):
    y = x @ x
    torch.cuda.synchronize()
e = torch.cuda.Event()
e.record()
e.synchronize()
torch.cuda.current_stream().synchronize()
print(float(y.sum().item()) == float(y.sum().item()))
'''
    run = run_traced(code, timeout=55)
    assert len(run.events("sync", "torch.cuda.synchronize")) == 3
    assert len(run.events("sync", "torch.cuda.Event.synchronize")) == 1
    assert len(run.events("sync", "torch.cuda.Stream.synchronize")) == 1
