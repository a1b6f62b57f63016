"""The compiler's own time, written into docs/benchmarks.md: the analysis,
normalization and the whole default pipeline on generated graphs of about
1k, 10k and 100k nodes (staticify-bench-analysis), and `staticify -o` on
torchvision's Faster R-CNN (bench/fasterrcnn.py).

    /usr/bin/python3 bench/compiler_time.py [--bin build/bin] [--docs docs] [--runs 3]"""
import argparse
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--docs")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    scaling = subprocess.run([str(pathlib.Path(args.bin) / "staticify-bench-analysis"),
                              str(args.runs)], check=True, capture_output=True,
                             text=True).stdout
    frcnn = subprocess.run([sys.executable, str(ROOT / "bench" / "fasterrcnn.py"),
                            "--bin", args.bin, "--runs", str(args.runs)], check=True,
                           capture_output=True, text=True).stdout.strip()
    rows = ["| nodes | findings | analysis | per node | normalize | per node | "
            "whole pipeline | per node |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for line in scaling.splitlines()[1:]:
        n, f, a, an, z, zn, p, pn = line.split()
        rows.append(f"| {int(n):,} | {int(f):,} | {float(a):.2f} ms | {int(an) / 1000:.2f} µs | "
                    f"{float(z):.1f} ms | {int(zn) / 1000:.1f} µs | {float(p):.1f} ms | "
                    f"{int(pn) / 1000:.0f} µs |")
    body = "\n".join([
        "<!-- compiler:begin -->",
        f"Command: `/usr/bin/python3 bench/compiler_time.py --docs docs --runs {args.runs}`",
        "",
        *rows,
        "",
        f"Faster R-CNN: {frcnn}",
        "<!-- compiler:end -->"])
    print(body)
    if args.docs:
        doc = pathlib.Path(args.docs) / "benchmarks.md"
        text = doc.read_text()
        begin, end = "<!-- compiler:begin -->", "<!-- compiler:end -->"
        if begin in text:
            text = text[:text.index(begin)] + body + text[text.index(end) + len(end):]
        else:
            text = text.rstrip() + "\n\n" + body + "\n"
        doc.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
