"""Per-op profile of one call of the seed sampler: the original, staticify's
output and, when given, the lowered kernels, at one size; torch.profiler over
--calls calls after warm-up. Per variant: the ops (and, on a GPU, the kernels)
that take the most time per call, with how often each runs per call.

    /usr/bin/python3 bench/sampler_profile.py --size 1e5 [--device cpu] [--json OUT]
    python3 bench/sampler_profile.py --device cuda --size 1e6 --bin build-gpu/bin \\
        --lowered .gpu/lowered --json $OUT/sampler-profile-cuda.json"""
import argparse
import json
import pathlib
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from seed000 import FEATURES, build_variants  # noqa: E402

KEEP = ("original", "staticify", "staticify+cuda-graphs", "staticify+lower-cuda",
        "staticify+lower-cpu", "handwritten")


def device_us(event):
    """Self time on the device, microseconds (PyTorch 1.13 and 2.x names)."""
    for name in ("self_device_time_total", "self_cuda_time_total"):
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0


def profile_variant(fn, args, calls, device):
    for _ in range(3):
        fn(*args)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(calls):
            fn(*args)
        if device == "cuda":
            torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        rows.append({"op": e.key, "per_call": e.count / calls,
                     "self_cpu_us": e.self_cpu_time_total / calls,
                     "self_device_us": device_us(e) / calls})
    key = "self_device_us" if device == "cuda" else "self_cpu_us"
    rows.sort(key=lambda r: -r[key])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--size", default="1e5")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--lowered", metavar="DIR",
                        help="the lowered sampler from scripts/gpu/lower_here.py")
    parser.add_argument("--json")
    args = parser.parse_args()
    n = int(float(args.size))
    binary = pathlib.Path(args.bin) / "staticify"
    torch.ops.load_library(str(binary.parent.parent / "lib" / "libstaticify_runtime.so"))
    gen = torch.Generator(device=args.device).manual_seed(0)
    x = torch.randn(n, FEATURES, generator=gen, device=args.device)
    labels = torch.randint(0, 2, (n,), generator=gen, device=args.device)
    result = {"device": args.device, "n": n, "calls": args.calls,
              "torch": torch.__version__, "variants": {}}
    key = "self_device_us" if args.device == "cuda" else "self_cpu_us"
    with tempfile.TemporaryDirectory() as tmp:
        variants = build_variants(n, binary, pathlib.Path(tmp), args.device,
                                  args.lowered, compiled=False)
        for name in KEEP:
            if name not in variants:
                continue
            rows = profile_variant(variants[name], (x, labels), args.calls, args.device)
            total = sum(r[key] for r in rows)
            result["variants"][name] = {"total_us": total, "ops": rows}
            print(f"\n{name}: {total:.1f} us of {key[5:]} per call (N={n})")
            for r in rows[:args.top]:
                print(f"  {r[key]:>10.1f} us  x{r['per_call']:<5g} {r['op']}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
