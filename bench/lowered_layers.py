"""Models with weights through `--lower=cpu`, side by side in one process:
a head (Linear, ReLU, LayerNorm, Dropout, Linear and the cross entropy of the
rows whose label is not -1) lowered whole with its parameters as kernel
inputs, and a convolution feeding such a head, lowered by regions around the
convolution (which stays an ATen call). Original, staticify's TorchScript
output and the lowered output, 1 thread, interleaved, median of --reps
calls under torch.no_grad(), for --rows rows.

    /usr/bin/python3 bench/lowered_layers.py [--rows 64 4096 65536] [--json OUT] [--docs docs]
"""
import json
import pathlib
import subprocess
import sys
import tempfile

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))
from docs_section import write_section  # noqa: E402
from timing import interleaved, lowering_bench_args  # noqa: E402
from test_lower import ConvThenHead, LayeredHead  # noqa: E402

MODELS = [
    ("head (whole)", LayeredHead, "f32[?,16], i64[?]",
     lambda n: (torch.randn(n, 16), torch.randint(-1, 5, (n,)))),
    ("conv1d + head (regions)", ConvThenHead, "f32[?,4,?], i64[?]",
     lambda n: (torch.randn(n, 4, 16), torch.randint(-1, 5, (n,)))),
]
BEGIN = "<!-- lowered_layers.py: begin -->"
END = "<!-- lowered_layers.py: end -->"


def variants(staticify, workdir, name, module, types):
    path = workdir / f"{name}.pt"
    torch.jit.script(module).save(str(path))
    plain, lowered = workdir / f"{name}-static.pt", workdir / f"{name}-lowered.pt"
    report = workdir / f"{name}-report.json"
    for out, extra in [(plain, []), (lowered, ["--lower=cpu", "--input-types", types,
                                               "--report-json", str(report)])]:
        proc = subprocess.run([str(staticify), str(path), "-o", str(out)] + extra,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(proc.stderr)
    lowering = json.loads(report.read_text())["methods"][0]["lowering"]
    kernels = 1 if lowering["lowered"] else sum(r["lowered"] for r in lowering["regions"])
    if not kernels:
        sys.exit(f"{name} did not lower: {lowering}")
    return {"original": torch.jit.load(str(path)), "staticified": torch.jit.load(str(plain)),
            "lowered": torch.jit.load(str(lowered))}, kernels


def timed(models, args, reps):
    """Median seconds per call of each, interleaved, without autograd."""
    with torch.no_grad():
        return interleaved(models, args, reps)


def main():
    opts = lowering_bench_args(
        __doc__.splitlines()[0], 30,
        lambda p: p.add_argument("--rows", type=int, nargs="+", default=[64, 4096, 65536]))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, cls, types, make in MODELS:
            torch.manual_seed(0)
            models, kernels = variants(pathlib.Path(opts.bin) / "staticify",
                                       pathlib.Path(tmp), cls.__name__, cls().eval(), types)
            for n in opts.rows:
                args = make(n)
                with torch.no_grad():
                    got, expected = models["lowered"](*args), models["original"](*args)
                    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4,
                                               equal_nan=True)
                t = timed(models, args, opts.reps)
                rows.append({"model": label, "rows": n, "kernels": kernels,
                             **{k: v * 1e3 for k, v in t.items()}})
                print(f"{label:26} {n:>6}: original {t['original'] * 1e3:8.3f} ms, "
                      f"staticified {t['staticified'] / t['original']:.2f}x, "
                      f"lowered {t['lowered'] / t['original']:.2f}x")
    if opts.json:
        pathlib.Path(opts.json).write_text(json.dumps(rows, indent=1) + "\n")
    if opts.docs:
        lines = [BEGIN, "", "    /usr/bin/python3 bench/lowered_layers.py --docs docs", "",
                 "| model | rows | original | staticified | lowered | lowered / original |",
                 "|---|---:|---:|---:|---:|---:|"]
        for r in rows:
            lines.append(f"| {r['model']} | {r['rows']} | {r['original']:.3f} ms | "
                         f"{r['staticified']:.3f} ms | {r['lowered']:.3f} ms | "
                         f"{r['lowered'] / r['original']:.2f} |")
        lines += ["", END]
        write_section(pathlib.Path(opts.docs) / "benchmarks.md", BEGIN, END, "\n".join(lines),
                      heading="### Models with weights, lowered (CPU, 1 thread)")


if __name__ == "__main__":
    main()
