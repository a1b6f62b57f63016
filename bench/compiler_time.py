"""The compiler's own time, written into docs/benchmarks.md: the analysis,
normalization and the whole default pipeline on generated graphs of about
1k, 10k and 100k nodes (staticify-bench-analysis), and `staticify -o` on
torchvision's Faster R-CNN (bench/fasterrcnn.py).

    /usr/bin/python3 bench/compiler_time.py [--bin build/bin] [--old-bin DIR]
                                            [--docs docs] [--runs 3]

With --old-bin, an older build's binaries are measured in the same run
(the old first, then the new, each a median of --runs), and the table gives
both."""
import argparse
import pathlib
import subprocess
import sys

from docs_section import write_section

ROOT = pathlib.Path(__file__).resolve().parents[1]


def scaling(bindir, runs):
    """{nodes: (findings, analysis ms, normalize ms, pipeline ms, analysis of
    a fresh copy ms or None)}: an older build's binary has no last column."""
    out = subprocess.run([str(pathlib.Path(bindir) / "staticify-bench-analysis"), str(runs)],
                         check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines()[1:]:
        n, f, a, _, z, _, p, _, *fresh = line.split()
        rows[int(n)] = (int(f), float(a), float(z), float(p),
                        float(fresh[0]) if fresh else None)
    return rows


def frcnn(bindir, runs):
    return subprocess.run([sys.executable, str(ROOT / "bench" / "fasterrcnn.py"),
                           "--bin", str(bindir), "--runs", str(runs)], check=True,
                          capture_output=True, text=True).stdout.strip()


def table(new, old=None):
    head = ("| nodes | findings | analysis | normalize | whole pipeline | pipeline / analysis |"
            if old is None else
            "| nodes | findings | analysis (old, new) | normalize (old, new) | "
            "whole pipeline (old, new) | pipeline / analysis (old, new) |")
    head += " analysis of a fresh copy | pipeline / that |"
    rows = [head, "|---:|" * 1 + "---:|" * (head.count("|") - 2)]
    for n, (f, a, z, p, fresh) in sorted(new.items()):
        if old is None:
            row = f"| {n:,} | {f:,} | {a:.1f} ms | {z:.1f} ms | {p:.1f} ms | {p / a:.1f}x |"
        else:
            _, oa, oz, op, _ = old[n]
            row = (f"| {n:,} | {f:,} | {oa:.1f} ms, {a:.1f} ms | {oz:.1f} ms, {z:.1f} ms | "
                   f"{op:.1f} ms, {p:.1f} ms | {op / oa:.1f}x, {p / a:.1f}x |")
        rows.append(row + f" {fresh:.1f} ms | {p / fresh:.1f}x |")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--old-bin", help="an older build's bin directory, measured alongside")
    parser.add_argument("--docs")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    old = scaling(args.old_bin, args.runs) if args.old_bin else None
    new = scaling(args.bin, args.runs)
    old_frcnn = frcnn(args.old_bin, args.runs) if args.old_bin else None
    new_frcnn = frcnn(args.bin, args.runs)
    command = "/usr/bin/python3 bench/compiler_time.py --docs docs --runs {}{}".format(
        args.runs, " --old-bin OLD/bin" if args.old_bin else "")
    lines = ["<!-- compiler:begin -->", f"Command: `{command}`", "", *table(new, old), ""]
    if old_frcnn:
        lines += [f"Faster R-CNN, old: {old_frcnn}", "", f"Faster R-CNN, new: {new_frcnn}"]
    else:
        lines += [f"Faster R-CNN: {new_frcnn}"]
    lines.append("<!-- compiler:end -->")
    body = "\n".join(lines)
    print(body)
    if args.docs:
        write_section(pathlib.Path(args.docs) / "benchmarks.md",
                      "<!-- compiler:begin -->", "<!-- compiler:end -->", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
