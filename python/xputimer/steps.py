"""Training-step detection from DataLoader and optimizer events (PerfTracker).

A PyTorch training iteration is some DataLoader.__next__ calls followed by
some optimizer.step() calls; how many of each depends on gradient
accumulation, pipeline parallelism, multiple optimizers. We do not guess:

Detection. Events are reduced to a kind sequence over {D, O}. Whenever a D
follows an O (a candidate iteration boundary), we look for the shortest
period P (1 <= P <= max_period) such that the last `repeats` * P events
repeat with period P and the period starts with D (so it ends with O). The
first match is the *iteration pattern*, e.g. "DO", "DDDDO" (4 micro-batches
of gradient accumulation) or "DOO" (two optimizers). The `repeats` instances
that proved the pattern are reported as steps retroactively (their
timestamps are known), so no step is lost to detection.

Tracking. Each event must be the pattern's next kind. A step spans from the
start of the first D of one instance to the start of the first D of the next
instance (steps tile time, so steps/s is exact); it is emitted (xpu_mark_step)
when that next D arrives. Samples per step = sum of the batch sizes carried
by its D events (0 if unknown).

Re-detection. An event that does not match (gradient accumulation changed,
an eval loop that runs D without O, a checkpoint epoch) drops the detector
back to detection, keeping only the events of the broken instance, so the
new pattern is found after `repeats` new instances. Eval loops therefore
produce no steps, which is what throughput should mean.

Not here: when no Python events exist (a C++ trainer, a traced process
without the Python side), the engine detects iterations from the periodicity
of the collective sequence instead; that fallback lives in engine/.
Stalls (no event for 5x the mean step time) are judged by the engine too,
since a stalled process emits nothing.

Thread-safety: on_event() takes a lock; it is called from traced wrappers on
whatever thread runs the DataLoader or the optimizer.
"""

import collections
import threading

from . import _hook

D = "D"
O = "O"

Step = collections.namedtuple("Step", "step_id start_ns end_ns samples")


class StepDetector:
    def __init__(self, repeats=3, max_period=64, window=50, on_step=None):
        if repeats < 2 or max_period < 2:
            raise ValueError("repeats and max_period must be >= 2")
        self.repeats = repeats
        self.max_period = max_period
        self._on_step = on_step
        self._lock = threading.Lock()
        # (kind, start_ns, end_ns, value) since the last confirmed boundary.
        self._history = collections.deque(maxlen=repeats * max_period + 1)
        self.pattern = None          # tuple of kinds once detected
        self._pos = 0                # index of the next expected kind
        self._instance = []          # events of the instance in progress
        self.next_step_id = 0
        self.detections = 0          # how many times a pattern was (re)detected
        self.breaks = 0              # how many times a pattern broke
        self._recent = collections.deque(maxlen=window)  # recent Steps

    # -- input ---------------------------------------------------------------
    def on_event(self, kind, start_ns, end_ns, value=0):
        """Feeds one event: kind is D (dataloader) or O (optimizer)."""
        with self._lock:
            ev = (kind, start_ns, end_ns, value)
            if self.pattern is None:
                self._history.append(ev)
                self._detect()
            else:
                self._track(ev)

    # -- output --------------------------------------------------------------
    def steps(self):
        with self._lock:
            return list(self._recent)

    def throughput(self):
        """{'steps_per_s', 'samples_per_s' (None if batch size unknown), 'steps'}
        over the recent window of steps."""
        with self._lock:
            recent = list(self._recent)
        if not recent:
            return {"steps_per_s": 0.0, "samples_per_s": None, "steps": 0}
        span = recent[-1].end_ns - recent[0].start_ns
        if span <= 0:
            return {"steps_per_s": 0.0, "samples_per_s": None, "steps": len(recent)}
        samples = sum(s.samples for s in recent)
        unknown = any(s.samples <= 0 for s in recent)
        return {
            "steps_per_s": len(recent) * 1e9 / span,
            "samples_per_s": None if unknown else samples * 1e9 / span,
            "steps": len(recent),
        }

    # -- internals (lock held) ----------------------------------------------
    def _detect(self):
        h = self._history
        n = len(h)
        if n < 2 * self.repeats or h[-1][0] != D or h[-2][0] != O:
            return
        kinds = [e[0] for e in h]
        body = kinds[:-1]  # the candidate instances end just before the new D
        m = len(body)
        for p in range(1, min(self.max_period, m // self.repeats) + 1):
            need = p * self.repeats
            seg = body[m - need:]
            if seg[0] != D:
                continue
            if any(seg[i] != seg[i + p] for i in range(need - p)):
                continue
            self._lock_pattern(tuple(seg[:p]), list(h)[n - 1 - need:])
            return

    def _lock_pattern(self, pattern, events):
        """events = `repeats` full instances followed by the D starting the next."""
        self.pattern = pattern
        self.detections += 1
        p = len(pattern)
        for i in range(self.repeats):
            inst = events[i * p:(i + 1) * p]
            self._emit(inst, events[(i + 1) * p][1])
        self._instance = [events[-1]]
        self._pos = 1 % p
        self._history.clear()

    def _track(self, ev):
        pattern = self.pattern
        if ev[0] != pattern[self._pos]:
            self.breaks += 1
            self.pattern = None
            self._history.clear()
            self._history.extend(self._instance)
            self._history.append(ev)
            self._instance = []
            self._detect()
            return
        if self._pos == 0:
            self._emit(self._instance, ev[1])
            self._instance = []
        self._instance.append(ev)
        self._pos = (self._pos + 1) % len(pattern)

    def _emit(self, instance, end_ns):
        start_ns = instance[0][1]
        samples = sum(e[3] for e in instance if e[0] == D)
        if any(e[0] == D and e[3] <= 0 for e in instance):
            samples = 0
        step = Step(self.next_step_id, start_ns, end_ns, samples)
        self.next_step_id += 1
        self._recent.append(step)
        if self._on_step is not None:
            try:
                self._on_step(step)
            except Exception:
                pass


def mark_in_ring(step):
    """on_step callback that writes the step marker through the hook."""
    _hook.mark_step(step.step_id, step.start_ns, step.end_ns)


def batch_size(batch):
    """Length of the first dimension of the first tensor-like in a batch
    (a tensor, or a list/tuple/dict of them); 0 when unknown."""
    for _ in range(4):  # bounded descent into nested containers
        shape = getattr(batch, "shape", None)
        if shape is not None:
            try:
                return int(shape[0]) if len(shape) else 0
            except (TypeError, IndexError, ValueError):
                return 0
        if isinstance(batch, dict):
            if not batch:
                return 0
            batch = next(iter(batch.values()))
        elif isinstance(batch, (list, tuple)):
            if not batch:
                return 0
            first = batch[0]
            if getattr(first, "shape", None) is None and not isinstance(first, (list, tuple, dict)):
                return len(batch)  # a plain list of samples
            batch = first
        else:
            return 0
    return 0
