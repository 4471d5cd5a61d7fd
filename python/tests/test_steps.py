"""Step detection (PerfTracker's method): pattern detection, tracking,
re-detection after a change, throughput, and markers in the ring."""

from xputimer.steps import D, O, StepDetector, batch_size


def feed(det, kinds, t=0, dt=10, batch=8):
    """Feeds a kind string like 'DODO'; returns the next time."""
    for k in kinds:
        det.on_event(k, t, t + 1, batch if k == D else 0)
        t += dt
    return t


def test_regular_pattern_detected_and_steps_tile_time():
    steps = []
    det = StepDetector(repeats=3, on_step=steps.append)
    feed(det, "DO" * 3)
    assert det.pattern is None  # the 4th D is needed to close the 3rd instance
    feed(det, "D", t=60)
    assert det.pattern == (D, O)
    assert [(s.step_id, s.start_ns, s.end_ns) for s in steps] == [(0, 0, 20), (1, 20, 40), (2, 40, 60)]
    feed(det, "ODODO", t=70)
    assert [s.step_id for s in steps] == [0, 1, 2, 3, 4]
    assert all(b.start_ns == a.end_ns for a, b in zip(steps, steps[1:]))
    assert all(s.samples == 8 for s in steps)


def test_gradient_accumulation_and_two_optimizers():
    det = StepDetector(repeats=3)
    feed(det, "DDDDO" * 4 + "D")
    assert det.pattern == (D, D, D, D, O)
    assert [s.samples for s in det.steps()] == [32] * 4
    det2 = StepDetector(repeats=3)
    feed(det2, "DOO" * 5 + "D")
    assert det2.pattern == (D, O, O)
    assert len(det2.steps()) == 5


def test_shortest_period_wins():
    det = StepDetector(repeats=2)
    feed(det, "DO" * 8 + "D")
    assert det.pattern == (D, O)


def test_redetect_after_change_of_accumulation():
    det = StepDetector(repeats=3)
    t = feed(det, "DDO" * 5 + "D")
    assert det.pattern == (D, D, O)
    n_before = len(det.steps())
    t = feed(det, "DO", t=t)          # completes "DDO"? no: D D O expected, got D O -> ...
    t = feed(det, "DDDDO" * 3 + "D", t=t)
    assert det.breaks >= 1
    assert det.pattern == (D, D, D, D, O)
    assert det.detections == 2
    assert len(det.steps()) > n_before
    assert det.steps()[-1].samples == 32


def test_eval_loop_breaks_and_training_resumes():
    det = StepDetector(repeats=3)
    t = feed(det, "DO" * 5 + "D")
    steps_train = len(det.steps())
    t = feed(det, "D" * 20, t=t)      # eval: data without optimizer
    assert det.pattern is None
    assert len(det.steps()) == steps_train
    feed(det, "O" + "DO" * 3 + "D", t=t)
    assert det.pattern == (D, O)
    assert det.detections == 2


def test_no_pattern_from_noise():
    det = StepDetector(repeats=3)
    feed(det, "DDODOOODDDODO")
    assert det.pattern is None and det.steps() == []


def test_throughput():
    det = StepDetector(repeats=3, window=10)
    feed(det, "DO" * 20 + "D", dt=5_000_000, batch=16)   # one step per 10 ms
    tp = det.throughput()
    assert tp["steps"] == 10
    assert abs(tp["steps_per_s"] - 100.0) < 1e-6
    assert abs(tp["samples_per_s"] - 1600.0) < 1e-6
    det2 = StepDetector(repeats=3)
    feed(det2, "DO" * 5 + "D", batch=0)
    assert det2.throughput()["samples_per_s"] is None


class FakeTensor:
    def __init__(self, *shape):
        self.shape = shape


def test_batch_size_of_common_batch_shapes():
    assert batch_size(FakeTensor(32, 128)) == 32
    assert batch_size((FakeTensor(4, 3), FakeTensor(4))) == 4
    assert batch_size({"input_ids": FakeTensor(8, 512), "labels": FakeTensor(8, 512)}) == 8
    assert batch_size([1, 2, 3]) == 3
    assert batch_size(FakeTensor()) == 0
    assert batch_size(object()) == 0
    assert batch_size([]) == 0


TRAIN = r'''
import json, sys, time
import trainlib
loader, opt = trainlib.Loader(), trainlib.Opt()
phases = [int(x) for x in sys.argv[1:]]   # micro-batches per step, per phase
bounds = []
for accum in phases:
    for step in range(6):
        for _ in range(accum):
            next(loader)
        opt.step()
    bounds.append(time.time_ns())
next(loader)
print(json.dumps({"bounds": bounds}))
'''

TRAINLIB = r'''
import time
class Batch:
    def __init__(self, n):
        self.shape = (n, 16)
class Loader:
    def __iter__(self):
        return self
    def __next__(self):
        time.sleep(0.0005)
        return {"x": Batch(4)}
class Opt:
    def step(self):
        time.sleep(0.0005)
'''


def test_step_markers_in_ring_with_redetection(run_traced, tmp_path):
    (tmp_path / "trainlib.py").write_text(TRAINLIB)
    api = "trainlib@Loader.__next__:dataloader,trainlib@Opt.step:optimizer"
    run = run_traced(TRAIN, env={"XPU_TRACED_PYTHON_API": api}, args=["1", "3"])
    loads = run.events("dataloader", "trainlib@Loader.__next__")
    opts = run.events("optimizer", "trainlib@Opt.step")
    assert len(loads) == 6 * 1 + 6 * 3 + 1 and len(opts) == 12
    assert all(e["seq"] == 4 for e in loads)  # batch size of the dict of tensors
    steps = run.events("step")
    ids = [s["seq"] for s in steps]
    assert ids == list(range(len(ids)))
    # Phase 1 (DO): 6 steps, all detected (3 retroactively). Phase 2 (DDDO)
    # re-detected after 3 instances; its 6 steps are all reported too because
    # detection reports the instances that proved the pattern.
    assert len(steps) == 6 + 6
    starts = {e["start_ns"] for e in loads}
    for s in steps:
        assert s["start_ns"] in starts                       # starts at a DataLoader call
        assert s["start_ns"] + s["duration_ns"] in starts     # ends at the next one
    assert steps[6]["duration_ns"] > 0
