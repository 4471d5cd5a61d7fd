"""Garbage collection events: one per collection, generation in the
signature's aux (peer), objects collected as the record value."""


CHILD = r'''
import gc, json, time
class Node:
    pass
def garbage(n):
    for _ in range(n):
        a, b = Node(), Node()
        a.other, b.other = b, a
results = []
gc.collect()
t0 = time.time_ns()
for gen, n in ((0, 5), (1, 7), (2, 11)):
    garbage(n)
    results.append((gen, gc.collect(gen)))
t1 = time.time_ns()
print(json.dumps({"results": results, "t0": t0, "t1": t1}))
'''


def test_gc_generations_and_counts(run_traced):
    run = run_traced(CHILD, env={"XPU_PYTHON_TORCH": "0"})
    rep = run.json()
    evs = [e for e in run.events("gc") if rep["t0"] <= e["start_ns"] <= rep["t1"]]
    assert [e["sig"]["peer"] for e in evs] == [0, 1, 2]
    for e, (gen, collected) in zip(evs, rep["results"]):
        assert e["sig"]["name"] == "gc"
        assert e["sig"]["peer"] == gen
        assert e["seq"] == collected
        assert collected >= 2  # each cycle object pair plus their dicts
        assert e["flags"] & (1 << 5)  # XPU_REC_HOST
    assert all(e["duration_ns"] > 0 for e in evs)


def test_automatic_collections_are_traced(run_traced):
    code = r'''
import gc, json
gc.set_threshold(50)
import time
before = gc.get_stats()[0]["collections"]
t0 = time.time_ns()
keep = []
for i in range(20000):
    keep.append([i])
after = gc.get_stats()[0]["collections"]
print(json.dumps({"n": after - before, "t0": t0, "t1": time.time_ns()}))
'''
    run = run_traced(code)
    rep = run.json()
    evs = [e for e in run.events("gc") if rep["t0"] <= e["start_ns"] <= rep["t1"]]
    gen0 = [e for e in evs if e["sig"]["peer"] == 0]
    # every automatic gen-0 collection of the loop shows up in the ring
    assert rep["n"] > 10
    assert len(gen0) == rep["n"]


def test_gc_off_switch(run_traced):
    run = run_traced("import gc; gc.collect()\n", env={"XPU_PYTHON_GC": "0"})
    assert run.events("gc") == []
