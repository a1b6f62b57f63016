"""Interleaved timing the bench scripts share: each function warmed up,
then called in turn --reps times; the median seconds per call of each."""
import statistics
import time


def interleaved(fns, args, reps, warmup=3):
    """{name: median seconds} of fns (name -> callable) on args."""
    times = {k: [] for k in fns}
    for fn in fns.values():
        for _ in range(warmup):
            fn(*args)
    for _ in range(reps):
        for k, fn in fns.items():
            start = time.perf_counter()
            fn(*args)
            times[k].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}
