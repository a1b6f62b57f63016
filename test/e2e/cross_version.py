"""Models rewritten under one PyTorch, run under another.

    python3 test/e2e/cross_version.py write DIR [--bin build/bin]
    python3 test/e2e/cross_version.py check DIR [--devices cpu cuda]

`write` scripts the seed sampler and the bounded-form models with this
PyTorch, saves each (original.pt) and staticify's output of it (static.pt).
`check`, typically under another PyTorch (Debian's 1.13 writes, a 2.x wheel
on the GPU machine checks), loads both and compares them on random inputs:
the deterministic models must return equal tensors of equal dtypes, the
sampler must keep its invariants (rows are input rows, no row twice, the
seed's class counts). Prints one line per model and device; exits 1 on any
mismatch. The test suite runs both halves under one PyTorch
(test_cross_version.py)."""
import argparse
import pathlib
import subprocess
import sys

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "examples"))
import sampler  # noqa: E402
from test_bounded import EXACT_CASES, expected_counts  # noqa: E402

TRIALS = 200


def models():
    yield "sampler", sampler.BalancedSampler
    for name, (cls, _) in sorted(EXACT_CASES.items()):
        yield name, cls


def write(directory, bin_dir):
    for name, cls in models():
        folder = directory / name
        folder.mkdir(parents=True, exist_ok=True)
        torch.jit.script(cls()).save(str(folder / "original.pt"))
        subprocess.run([str(bin_dir / "staticify"), str(folder / "original.pt"),
                        "-o", str(folder / "static.pt")], check=True, capture_output=True)
        print(f"wrote {folder} (torch {torch.__version__})")


def check_sampler(original, static, device, gen):
    for trial in range(TRIALS):
        labels = (torch.rand(4000, generator=gen) < (0.05, 0.3, 0.95)[trial % 3]).long()
        labels = labels.to(device)
        x = torch.arange(4000, dtype=torch.float32, device=device).unsqueeze(1).repeat(1, 16)
        num_pos, num_neg = expected_counts(int(labels.sum()), int((labels == 0).sum()))
        for model in (original, static):
            rows, out_labels = model(x, labels)
            ids = rows[:, 0].long()
            if not (rows.shape == (1000, 16) and torch.equal(rows, x[ids])
                    and torch.equal(out_labels, labels[ids])
                    and ids.unique().numel() == 1000
                    and int(out_labels.sum()) == num_pos
                    and int((out_labels == 0).sum()) == num_neg):
                return f"trial {trial}: the sample breaks an invariant"
    return None


def check_exact(name, original, static, device, gen):
    _, inputs = EXACT_CASES[name]
    for trial in range(TRIALS):
        kind = ("none", "all", "random")[trial % 3]
        args = [t.to(device) for t in inputs(gen, kind)]
        a, b = original(*args), static(*args)
        for p, q in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            same = (isinstance(q, torch.Tensor) and p.dtype == q.dtype and torch.equal(p, q)) \
                if isinstance(p, torch.Tensor) else p == q
            if not same:
                return f"trial {trial}: outputs differ ({p} vs {q})"
    return None


def check(directory, devices):
    """Every model that `write` put in directory (an older bundle may lack
    newer models; a model this script does not know is a failure)."""
    known = dict(models())
    written = sorted(p.name for p in directory.iterdir() if (p / "static.pt").exists())
    failures = 0
    for name in written:
        if name not in known:
            print(f"FAIL {name:<20} unknown model")
            failures += 1
            continue
        original = torch.jit.load(str(directory / name / "original.pt"))
        static = torch.jit.load(str(directory / name / "static.pt"))
        for device in devices:
            gen = torch.Generator().manual_seed(3)
            torch.manual_seed(3)
            if name == "sampler":
                error = check_sampler(original, static, device, gen)
            else:
                error = check_exact(name, original, static, device, gen)
            failures += error is not None
            print(f"{'FAIL' if error else 'ok  '} {name:<20} {device:<5} {error or ''}")
    print(f"torch {torch.__version__}: {len(written)} models, {failures} failure(s)")
    return 1 if failures or not written else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["write", "check"])
    parser.add_argument("dir", type=pathlib.Path)
    parser.add_argument("--bin", type=pathlib.Path, default=HERE.parents[1] / "build" / "bin")
    parser.add_argument("--devices", nargs="+",
                        default=["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
    args = parser.parse_args()
    if args.mode == "write":
        write(args.dir, args.bin)
        return 0
    return check(args.dir, args.devices)


if __name__ == "__main__":
    sys.exit(main())
