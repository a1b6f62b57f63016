#!/usr/bin/env python3
"""The batch differential fuzzer: differential.py's random programs,
staticified with --batch; wherever `f<i>_batched` is added, each row of its
results must equal the original program run on that row alone.

    /usr/bin/python3 test/fuzz/batch_differential.py --programs 1000 --seed 7 \\
        [--binary build/bin/staticify] [--rows 3]

Programs are packed by their input types (one --input-types per run, with the
program's sizes); each batched method is called on rows of different input
kinds (random, quantised, all-false and all-true masks, NaN and infinities,
empty), and a row the original raises on is left out. Exit status 1 on any
wrong output or crash, with the program and inputs printed."""
import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import differential as D  # noqa: E402

DTYPES = {"f": "f32", "i": "i64"}


def signature(prog):
    s, t = prog.input_shapes()
    dims = lambda shape: ",".join(map(str, shape))  # noqa: E731
    return f"f32[{dims(s)}], f32[{dims(s)}], f32[{dims(t)}], i64[{dims(s)}]"


def script_pack(progs, workdir, tag):
    """The pack scripted and saved, dropping programs that do not script."""
    import torch
    good = list(progs)
    while good:
        src = workdir / f"pack_{tag}_{len(good)}.py"
        src.write_text(D.pack_source(good))
        try:
            mod = D.import_source(src, src.stem)
            path = workdir / f"pack_{tag}.pt"
            torch.jit.script(mod.Pack()).save(str(path))
            return good, mod, path
        except Exception:  # noqa: BLE001 - drop one and retry
            good = good[:-1]
    return [], None, None


def rows_of(prog, kinds, seed):
    import torch
    rows = [D.make_inputs(prog, kind, seed + r) for r, kind in enumerate(kinds)]
    return rows, [torch.stack([row[i] for row in rows]) for i in range(4)]


def row_of(out, b):
    import torch
    if isinstance(out, torch.Tensor):
        return out[b]
    if isinstance(out, (tuple, list)):
        return type(out)(row_of(o, b) for o in out)
    return out


def run_batch_fuzz(programs=200, seed=0, rows=3, binary=None, echo=print):
    """Generates, packs, staticifies with --batch and checks `programs`
    programs; returns the counts (see main)."""
    import torch
    torch.set_num_threads(1)
    binary = str(binary or D.default_binary())
    progs = [D.generate_program(seed, i) for i in range(programs)]
    groups = {}
    for p in progs:
        if not p.returns_dynamic:
            groups.setdefault(signature(p), []).append(p)
    stats = {"programs": len(progs), "batched": 0, "rows compared": 0, "wrong": 0,
             "crashes": 0, "not batched": 0}
    reasons = {}
    stats["reasons"] = reasons
    kinds_cycle = ["random", "quant", "none", "all", "special"]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = pathlib.Path(tmp)
        for g, (sig, members) in enumerate(groups.items()):
            for start in range(0, len(members), 40):
                good, mod, path = script_pack(members[start:start + 40], workdir, f"{g}_{start}")
                if not good:
                    continue
                out = workdir / f"out_{g}_{start}.pt"
                report = workdir / f"report_{g}_{start}.json"
                cmd = [binary, str(path), "-o", str(out), "--batch", "--input-types", sig,
                       "--report-json", str(report), *D.FLAGS]
                for p in good:
                    cmd += ["--method", p.method]
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                if proc.returncode != 0:
                    stats["crashes"] += 1
                    echo(f"staticify failed on {sig}: {proc.stderr[-2000:]}")
                    continue
                original, batched = torch.jit.load(str(path)), torch.jit.load(str(out))
                for m in json.loads(report.read_text())["methods"]:
                    reason = (m.get("batch") or {}).get("reason")
                    if reason:
                        # The op named, without the value's number.
                        key = re.sub(r"'%[^']*'", "'%v'", reason)
                        reasons[key] = reasons.get(key, 0) + 1
                for p in good:
                    check_batched(p, original, batched, rows, seed, kinds_cycle, stats, echo)
    return stats


def check_batched(p, original, batched, rows, seed, kinds_cycle, stats, echo):
    """Program p's batched method against the original on each row."""
    import torch  # noqa: F401
    name = p.method + "_batched"
    if not hasattr(batched, name):
        stats["not batched"] += 1
        return
    stats["batched"] += 1
    for trial in range(3):
        kinds = [kinds_cycle[(trial + r) % len(kinds_cycle)] for r in range(rows)]
        at = (seed * 1000003 + p.index * 101 + trial * 7) % (2 ** 62)
        inputs, stacked = rows_of(p, kinds, at)
        want = [D.call(getattr(original, p.method), row) for row in inputs]
        if any(err for _, _, err in want):
            continue  # the original raises on a row
        got, after, err = D.call(getattr(batched, name), stacked)
        problem = err and f"the batched method raised: {err}"
        for b in range(rows):
            if problem:
                break
            problem = (D.compare(want[b][0], row_of(got, b))
                       or D.compare(want[b][1], row_of(tuple(after), b),
                                    "inputs after the call"))
            stats["rows compared"] += 1
        if problem:
            stats["wrong"] += 1
            echo(f"WRONG seed {p.seed} program {p.index} {kinds}: {problem}\n"
                 f"{p.standalone_source()}")
            return


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", type=int, default=3)
    ap.add_argument("--binary", default=None)
    args = ap.parse_args(argv)
    stats = run_batch_fuzz(args.programs, args.seed, args.rows, args.binary)
    reasons = stats.pop("reasons")
    for key, value in stats.items():
        print(f"{key:<16}{value}")
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {n:>5}  not batched: {reason}")
    return 1 if stats["wrong"] or stats["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())
