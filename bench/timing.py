"""Interleaved timing the bench scripts share: each function warmed up,
then called in turn --reps times; the median seconds per call of each. And
the command line and set-up of the lowering benches."""
import argparse
import pathlib
import statistics
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def lowering_bench_args(description, reps, extra):
    """The lowering benches' options (--reps, --bin, --json, --docs and
    \p extra's), parsed; then one thread and the runtime library loaded,
    which the lowered kernels need."""
    import torch
    parser = argparse.ArgumentParser(description=description)
    extra(parser)
    parser.add_argument("--reps", type=int, default=reps)
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--json")
    parser.add_argument("--docs")
    opts = parser.parse_args()
    torch.set_num_threads(1)
    torch.ops.load_library(str(pathlib.Path(opts.bin).parent / "lib" /
                               "libstaticify_runtime.so"))
    return opts


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
