"""CPU time per call of seed 002's two examples, original vs staticified vs
staticified and lowered to a CPU kernel (--lower=cpu), measured side by side
in one process.

    /usr/bin/python3 bench/seed002.py [--bin build/bin] [--sizes 1e4 1e6]
                                      [--json OUT.json]

Each example is scripted, saved, run through the real `staticify` binary,
and both modules are loaded here. For each size: warm-up, then the median
(and interquartile range) of many timed calls of each, interleaved so that
machine noise hits both alike. Masks keep about half the elements."""
import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "e2e"))
import models  # noqa: E402


def inputs(example, n, gen):
    keep = torch.rand(n, generator=gen) < 0.5
    if example == "example1":
        return torch.randn(n, generator=gen), keep.long()  # targets != 0
    return (torch.randn(n, generator=gen), torch.randn(n, generator=gen),
            torch.where(keep, 1, -1))


def time_calls(fn, args, repeats):
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        samples.append(time.perf_counter() - start)
    return samples


def summarize(samples):
    q = statistics.quantiles(samples, n=4)
    return {"median_us": statistics.median(samples) * 1e6,
            "iqr_us": (q[2] - q[0]) * 1e6}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--sizes", nargs="+", default=["1e4", "1e6"])
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    # The lowered outputs hold a staticify.LoweredMethod: the runtime library.
    torch.ops.load_library(str(pathlib.Path(args.bin).resolve().parent / "lib" /
                               "libstaticify_runtime.so"))
    gen = torch.Generator().manual_seed(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in (("example1", models.Seed002Example1()),
                            ("example2", models.Seed002Example2())):
            src = os.path.join(tmp, f"{name}.pt")
            dst = os.path.join(tmp, f"{name}_static.pt")
            torch.jit.script(model).save(src)
            lowered_path = os.path.join(tmp, f"{name}_lowered.pt")
            subprocess.run([os.path.join(args.bin, "staticify"), src, "-o", dst],
                           check=True, capture_output=True)
            types = "f32[?], i64[?]" if name == "example1" else "f32[?], f32[?], i64[?]"
            subprocess.run([os.path.join(args.bin, "staticify"), src, "-o", lowered_path,
                            "--lower=cpu", "--input-types", types],
                           check=True, capture_output=True)
            original, static = torch.jit.load(src), torch.jit.load(dst)
            lowered = torch.jit.load(lowered_path)
            for size in args.sizes:
                n = int(float(size))
                data = inputs(name, n, gen)
                repeats = 2000 if n <= 10**4 else 60
                for _ in range(max(10, repeats // 20)):  # warm-up, all
                    original(*data)
                    static(*data)
                    lowered(*data)
                a, b, c = [], [], []
                for _ in range(5):  # interleaved rounds
                    a += time_calls(original, data, repeats // 5)
                    b += time_calls(static, data, repeats // 5)
                    c += time_calls(lowered, data, repeats // 5)
                ra, rb, rc = summarize(a), summarize(b), summarize(c)
                kernel_calls = lowered._staticify_lowered_forward.counts()[0]
                rows.append({"example": name, "n": n, "original": ra,
                             "staticified": rb, "lowered": rc,
                             "kernel_calls": kernel_calls,
                             "ratio": rb["median_us"] / ra["median_us"],
                             "lowered_ratio": rc["median_us"] / ra["median_us"]})
    print(f"CPU, 1 thread, {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}")
    print(f"{'example':10} {'N':>9} {'original us':>14} {'static us':>14} "
          f"{'lowered us':>14} {'static/orig':>12} {'lowered/orig':>13}")
    for r in rows:
        print(f"{r['example']:10} {r['n']:>9} "
              f"{r['original']['median_us']:>9.1f} ±{r['original']['iqr_us']:<4.0f}"
              f"{r['staticified']['median_us']:>9.1f} ±{r['staticified']['iqr_us']:<4.0f}"
              f"{r['lowered']['median_us']:>9.1f} ±{r['lowered']['iqr_us']:<4.0f}"
              f"{r['ratio']:>12.2f} {r['lowered_ratio']:>13.2f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {"torch": torch.__version__, "threads": 1, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
