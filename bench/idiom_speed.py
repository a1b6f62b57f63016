"""The idiom corpus (test/e2e/idioms.py) timed: each idiom's original and
staticify's output side by side in one process, on the idiom's own inputs
("random" kind), interleaved, medians; with the sync points and the ops per
call of staticify's report before and after.

    /usr/bin/python3 bench/idiom_speed.py [--bin build/bin] [--threads 1]
        [--seconds 0.5] [--docs docs]

A rewrite is kept to make the model faster: where it removes no sync point
it must not make the model slower. The summary counts the idioms whose
output was rewritten (a finding rewritten, or the ops per call changed)
with as many sync points as before, and the largest time ratio among them
(issue 46's bound: 1.05x). Prints the table; with --docs, writes it into
docs/benchmarks.md between the idiom-speed markers."""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))
import idioms  # noqa: E402
from docs_section import write_section  # noqa: E402
from idiom_table import sync_points  # noqa: E402

BEGIN, END = "<!-- idiom-speed:begin -->", "<!-- idiom-speed:end -->"
LIMIT = 1.05


def timed(fn, inputs):
    """Seconds of one call (the caller interleaves)."""
    start = time.perf_counter()
    fn(*inputs)
    return time.perf_counter() - start


def measure(original, static, inputs, seconds):
    """Median seconds per call of each, interleaved after warm-up."""
    for _ in range(3):
        original(*inputs)
        static(*inputs)
    a, b = [], []
    start = time.perf_counter()
    while len(a) < 20 or time.perf_counter() - start < seconds:
        a.append(timed(original, inputs))
        b.append(timed(static, inputs))
    return statistics.median(a), statistics.median(b)


def run(binary, seconds):
    rows = []
    gen = torch.Generator().manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for name, source, module, make_inputs in idioms.IDIOMS:
            scripted = torch.jit.script(module)
            path, out, rep = tmp / f"{name}.pt", tmp / f"{name}-s.pt", tmp / f"{name}.json"
            scripted.save(str(path))
            proc = subprocess.run([str(binary), str(path), "-o", str(out),
                                   "--report-json", str(rep)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                rows.append({"name": name, "skipped": proc.stderr.strip().splitlines()[-1]})
                continue
            report = json.loads(rep.read_text())
            method = report["methods"][0]
            before, after = sync_points(report)
            ops = (method["before"]["ops_per_call"], method["after"]["ops_per_call"])
            rewritten = (any(f["action"] == "rewritten" for f in method["findings"])
                         or ops[0] != ops[1])
            original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
            inputs = make_inputs(gen, "random")
            t0, t1 = measure(original, static, inputs, seconds)
            rows.append({"name": name, "syncs": (before, len(after)), "ops": ops,
                         "rewritten": rewritten, "original_us": t0 * 1e6,
                         "static_us": t1 * 1e6, "ratio": t1 / t0})
            print(f"{name:<32} syncs {before}->{len(after)}  ops {ops[0]}->{ops[1]}  "
                  f"{t0 * 1e6:8.1f} us -> {t1 * 1e6:8.1f} us  x{t1 / t0:.2f}", flush=True)
    return rows


def render(rows, command):
    timed_rows = [r for r in rows if "skipped" not in r]
    equal = [r for r in timed_rows if r["rewritten"] and r["syncs"][0] == r["syncs"][1]]
    fewer = [r for r in timed_rows if r["syncs"][1] < r["syncs"][0]]
    worst = max(equal, key=lambda r: r["ratio"]) if equal else None
    lines = [BEGIN, f"Command: `{command}`", "",
             f"{len(timed_rows)} idioms timed. Rewritten with as many sync points as "
             f"before: {len(equal)}"
             + (f", the slowest at {worst['ratio']:.2f}x ({worst['name']}); over "
                f"{LIMIT:.2f}x: {sum(r['ratio'] > LIMIT for r in equal)}" if worst else "")
             + f". With fewer sync points: {len(fewer)}, median time ratio "
             + (f"{statistics.median(r['ratio'] for r in fewer):.2f}x" if fewer else "n/a")
             + " (on a CPU a sync costs nothing: the ratio is the static form's price).",
             "",
             "| idiom | sync points | ops per call | original | staticify | ratio |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['name']} | | | {r['skipped']} | | |")
            continue
        mark = " (rewritten, same syncs)" if r in equal else ""
        lines.append(f"| {r['name']}{mark} | {r['syncs'][0]} → {r['syncs'][1]} | "
                     f"{r['ops'][0]} → {r['ops'][1]} | {r['original_us']:.1f} us | "
                     f"{r['static_us']:.1f} us | {r['ratio']:.2f}x |")
    lines.append(END)
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=0.5,
                        help="time budget per idiom (at least 20 calls of each)")
    parser.add_argument("--docs")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    command = " ".join(["/usr/bin/python3 bench/idiom_speed.py"] + sys.argv[1:])
    rows = run(pathlib.Path(args.bin) / "staticify", args.seconds)
    text = render(rows, command)
    print(text)
    if args.docs:
        write_section(pathlib.Path(args.docs) / "benchmarks.md", BEGIN, END, text,
                      heading="## The idiom corpus, timed (CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
