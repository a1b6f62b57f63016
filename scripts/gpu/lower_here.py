"""Lowers here, with the Debian build's MLIR, what the GPU machine's build
cannot (it has no MLIR, so its staticify has no --lower):

    /usr/bin/python3 scripts/gpu/lower_here.py DIR [--bin build/bin] [--sizes 1e5 1e6 1e7]

writes into DIR
  sampler.pt               the seed sampler (its default size), for test_gpu.py;
  sampler-N-lowered.pt     the sampler as bench/seed000.py builds it for size N;
  idiom-NAME.pt            each idiom of test/e2e/idioms.py that lowers to CUDA
                           kernels, for its dtypes and ranks (every size `?`).
There, `STATICIFY_CARRIED_LOWERED=DIR pytest test/e2e/test_lowered_carried.py` compares the
kernels with their TorchScript and `bench/seed000.py --lowered DIR` times them.
The runtime that launches them links no MLIR, so archives move between builds.
Prints what it wrote and what it skipped; exits 1 if the sampler did not lower."""
import argparse
import pathlib
import shutil
import subprocess
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "test" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))
import sampler  # noqa: E402
from idioms import IDIOMS  # noqa: E402
from seed000 import FEATURES, sub_for  # noqa: E402
from test_lower_corpus import signature  # noqa: E402

SAMPLER_TYPES = f"f32[?,{FEATURES}], i64[?]"


def lower(binary, module, types, out, scratch):
    """Scripts module, lowers it for CUDA into out; the reason when it did
    not lower (the archive is then not written)."""
    original = scratch / (out.stem + ".original.pt")
    torch.jit.script(module).save(str(original))
    proc = subprocess.run([str(binary), str(original), "-o", str(out), "--lower=cuda",
                           "--input-types", types], capture_output=True, text=True)
    if proc.returncode != 0 or "lowered to CUDA kernels" not in proc.stderr:
        out.unlink(missing_ok=True)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        return lines[-1] if lines else f"exit {proc.returncode}"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=pathlib.Path)
    parser.add_argument("--bin", type=pathlib.Path, default=ROOT / "build" / "bin")
    parser.add_argument("--sizes", nargs="+", default=["1e5", "1e6", "1e7"])
    args = parser.parse_args()
    binary = args.bin / "staticify"
    shutil.rmtree(args.dir, ignore_errors=True)
    scratch = args.dir / "scratch"
    scratch.mkdir(parents=True)

    failed = lower(binary, sampler.BalancedSampler(), SAMPLER_TYPES,
                   args.dir / "sampler.pt", scratch)
    for size in args.sizes:
        n = int(float(size))
        failed = failed or lower(binary, sampler.BalancedSampler(sub_for(n)), SAMPLER_TYPES,
                                 args.dir / f"sampler-{n}-lowered.pt", scratch)
    if failed:
        print(f"the sampler did not lower: {failed}", file=sys.stderr)
        return 1
    lowered = []
    for name, _, module, make in IDIOMS:
        types = signature(make(torch.Generator().manual_seed(0), "random"))
        reason = lower(binary, module, types, args.dir / f"idiom-{name}.pt", scratch)
        if reason:
            print(f"not lowered: {name}: {reason}")
            continue
        lowered.append(name)
    shutil.rmtree(scratch)
    size = sum(f.stat().st_size for f in args.dir.iterdir())
    print(f"wrote {args.dir}: the sampler at {len(args.sizes) + 1} sizes and "
          f"{len(lowered)} of {len(IDIOMS)} idioms, {size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
