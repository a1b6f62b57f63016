"""Seed 000's table, side by side: the original `sample_data` (scripted),
the article's hand-written `opt_sample_data`, and staticify's output of the
original (its --cuda-graphs form, and its --lower=cpu or --lower=cuda
kernels), for N in 1e4..1e7 and batch 1 and 32, in one process.

    /usr/bin/python3 bench/seed000.py [--device cpu|cuda] [--sizes 1e4 1e5 1e6 1e7]
        [--batches 1 32] [--out bench/results] [--docs docs] [--smoke]

As in the article, SUB_SAMPLE = N // 10 and inputs are [N, 16] floats with
0/1 labels; batch 32 runs the original (and staticify's output, which keeps
the original's 1-D signature) in a Python loop over the batch, as the
article's `batched_sample_data` does, and the hand-written sampler on the
batch at once. On PyTorch 2.x each variant is also timed under
torch.compile. Every configuration is warmed up, then timed over interleaved
repetitions (median and interquartile range); on a GPU with CUDA events, and
host syncs per call are counted with torch.cuda.set_sync_debug_mode. Ratios
are against the original, measured in the same run; ops per call are
counted as staticify's report counts them. Writes OUT/sampler-LABEL.json
and .csv, and with --docs the table into docs/benchmarks.md and the plot
docs/sampler-LABEL.png (LABEL: --label, by default the device).

--smoke runs tiny sizes with few repetitions (the test suite does) and
writes nothing unless --out is given."""
import argparse
import csv
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
import handwritten  # noqa: E402
from docs_section import write_section  # noqa: E402
import sampler  # noqa: E402

FEATURES = 16
MAX_INPUT_BYTES = {"cpu": 3 << 30, "cuda": 24 << 30}


def batched(fn):
    """The article's batched_sample_data: a Python loop over the batch."""
    def run(inputs, labels):
        outs = [fn(inputs[i], labels[i]) for i in range(inputs.size(0))]
        return torch.stack([o[0] for o in outs]), torch.stack([o[1] for o in outs])
    return run


def sub_for(n):
    """The sampler's subsample size at input size n."""
    return max(n // 10, 2)


def build_variants(n, staticify_bin, workdir, device="cpu", carried=None, compiled=True):
    """The variants timed at size n. carried: a folder of archives lowered
    elsewhere (scripts/gpu/lower_here.py), for a staticify built without MLIR."""
    sub = sub_for(n)
    original = torch.jit.script(sampler.BalancedSampler(sub))
    path = workdir / f"sampler-{n}.pt"
    out = workdir / f"sampler-{n}-static.pt"
    original.save(str(path))
    graphed = workdir / f"sampler-{n}-graphs.pt"
    subprocess.run([str(staticify_bin), str(path), "-o", str(out)], check=True,
                   capture_output=True)
    subprocess.run([str(staticify_bin), str(path), "-o", str(graphed), "--cuda-graphs"],
                   check=True, capture_output=True)
    # forward_batched (--batch): the batch in one call; the example run takes
    # this N (a sampler of SUB_SAMPLE rows needs as many inputs).
    batch_out = workdir / f"sampler-{n}-batched.pt"
    subprocess.run([str(staticify_bin), str(path), "-o", str(batch_out), "--batch",
                    "--input-types", f"f32[{n},{FEATURES}], i64[{n}]"],
                   check=True, capture_output=True)
    # The fused kernels (--lower=cpu on a CPU, --lower=cuda on a GPU), when
    # they build.
    target = "cpu" if device == "cpu" else "cuda"
    lowered = workdir / f"sampler-{n}-lowered.pt"
    if carried:
        lowered = pathlib.Path(carried) / lowered.name
        if not lowered.exists():
            sys.exit(f"{lowered} is missing: make it with scripts/gpu/lower_here.py")
    else:
        proc = subprocess.run([str(staticify_bin), str(path), "-o", str(lowered),
                               f"--lower={target}", "--input-types",
                               f"f32[?,{FEATURES}], i64[?]"], capture_output=True, text=True)
        made = "lowered to a CPU kernel" if target == "cpu" else "lowered to CUDA kernels"
        if proc.returncode != 0 or made not in proc.stderr:
            print(f"--lower={target} did not lower the sampler: {proc.stderr.strip()}",
                  flush=True)
            lowered = None
    variants = {
        "original": original,
        "handwritten": torch.jit.script(handwritten.OptSampler(sub)),
        "staticify": torch.jit.load(str(out)),
        # CUDA graphs on a GPU; on a CPU the runner's fallback (plain run).
        "staticify+cuda-graphs": torch.jit.load(str(graphed)),
        "staticify+batch": torch.jit.load(str(batch_out)),
    }
    if lowered:
        variants[f"staticify+lower-{'cuda' if carried else target}"] = torch.jit.load(str(lowered))
    if compiled and hasattr(torch, "compile"):  # PyTorch 2.x: the eager modules, compiled
        variants["original+compile"] = torch.compile(sampler.BalancedSampler(sub))
        variants["handwritten+compile"] = torch.compile(handwritten.OptSampler(sub))
    return variants


PLUMBING = {"prim::Constant", "prim::ListConstruct", "prim::ListUnpack",
            "prim::TupleConstruct", "prim::TupleUnpack"}


def ops_per_call(module):
    """The ops one call runs, counted as staticify's report counts them
    (`ops per call`): every node of the inlined forward graph but constants
    and list/tuple plumbing, a loop's body once, both branches of an if.
    A call of a runtime op (staticify::..., a lowered kernel or NMS) is one
    op. Takes a scripted module or function; None for what is not
    TorchScript (torch.compile)."""
    try:
        graph = module.graph.copy()
    except (AttributeError, RuntimeError):
        return None
    torch._C._jit_pass_inline(graph)
    if any(n.kind() == "prim::CallFunction" for n in graph.nodes()):
        return None

    def count(block):
        ops = 0
        for node in block.nodes():
            if node.kind() in PLUMBING:
                continue
            ops += 1 + sum(count(b) for b in node.blocks())
        return ops
    return count(graph)


def timer(device):
    if device == "cuda":
        def measure(fn, args):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*args)
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) * 1e3  # us
        return measure

    def measure(fn, args):
        start = time.perf_counter()
        fn(*args)
        return (time.perf_counter() - start) * 1e6
    return measure


def pipelined(fn, args, median_us, budget_us=2e5, bursts=3):
    """Time per call when calls are queued back to back and the host waits
    once at the end (CUDA events around a burst): what a training loop sees.
    A call that syncs cannot run ahead of the GPU; a sync-free one can."""
    k = max(1, min(20, int(budget_us / max(median_us, 1.0))))
    times = []
    for _ in range(bursts):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(k):
            fn(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / k)
    return statistics.median(times)


def count_syncs(fn, args):
    """Host syncs in one call, as torch.cuda.set_sync_debug_mode reports."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn(*args)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def run(args, on_rows=None):
    device = args.device
    sizes = [int(float(s)) for s in args.sizes]
    measure = timer(device)
    staticify_bin = pathlib.Path(args.bin) / "staticify"
    # The --cuda-graphs outputs need the runtime library: loaded once.
    torch.ops.load_library(str(staticify_bin.parent.parent / "lib" /
                               "libstaticify_runtime.so"))
    rows = []
    gen = torch.Generator(device=device).manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            variants = build_variants(n, staticify_bin, pathlib.Path(tmp), device,
                                      args.lowered, not args.no_compile)
            for batch in args.batches:
                nbytes = batch * n * FEATURES * 4
                if nbytes > MAX_INPUT_BYTES[device]:
                    rows.append({"n": n, "batch": batch, "variant": "all",
                                 "skipped": f"input of {nbytes / 2**30:.1f} GiB "
                                            "exceeds this machine's budget"})
                    continue
                shape = (n,) if batch == 1 else (batch, n)
                x = torch.randn(shape + (FEATURES,), generator=gen, device=device)
                labels = torch.randint(0, 2, shape, generator=gen, device=device)
                fns = {}
                for name, module in variants.items():
                    if name == "staticify+batch":
                        # forward_batched takes the batch; at batch 1 it is
                        # staticify's output with a dimension more: not timed.
                        if batch > 1:
                            fns[name] = module.forward_batched
                        continue
                    native = name.startswith("handwritten")
                    fns[name] = module if batch == 1 or native else batched(module)
                # Warm-up (compilation, caches), then interleaved repetitions.
                # A variant that fails here (torch.compile's backend has
                # failed on the original) is reported, and the rest run.
                for name, fn in list(fns.items()):
                    try:
                        for _ in range(args.warmup):
                            fn(x, labels)
                    except Exception as e:  # noqa: BLE001 - reported, not hidden
                        # The line that names the error, not dynamo's advice.
                        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
                        line = next((ln for ln in lines if "Error:" in ln),
                                    lines[0] if lines else "")
                        reason = f"{type(e).__name__}: {line[:200]}"
                        rows.append({"n": n, "batch": batch, "variant": name,
                                     "skipped": f"failed in warm-up: {reason}"})
                        print(f"N={n:>8} batch={batch:>2} {name:<20} failed: {reason}",
                              flush=True)
                        del fns[name]
                samples = {name: [] for name in fns}
                if device == "cuda":
                    torch.cuda.synchronize()
                budget = args.seconds
                reps = 0
                start = time.perf_counter()
                while reps < args.min_repeats or (
                        reps < args.max_repeats and time.perf_counter() - start < budget):
                    for name, fn in fns.items():
                        samples[name].append(measure(fn, (x, labels)))
                    reps += 1
                base = statistics.median(samples["original"])
                for name, s in samples.items():
                    q = statistics.quantiles(s, n=4) if len(s) > 1 else [s[0]] * 3
                    row = {"n": n, "batch": batch, "variant": name,
                           "loop": batch > 1 and not name.startswith("handwritten")
                           and name != "staticify+batch",
                           "median_us": statistics.median(s),
                           "iqr_us": q[2] - q[0], "repeats": len(s),
                           "ratio_vs_original": statistics.median(s) / base}
                    if device == "cuda":
                        row["syncs_per_call"] = count_syncs(fns[name], (x, labels))
                        row["pipelined_us"] = pipelined(fns[name], (x, labels),
                                                        row["median_us"])
                    if batch == 1 and ops_per_call(variants[name]) is not None:
                        row["ops_per_call"] = ops_per_call(variants[name])
                    rows.append(row)
                    print(f"N={n:>8} batch={batch:>2} {name:<20} "
                          f"{row['median_us']:>12.1f} us  x{row['ratio_vs_original']:.2f}"
                          + (f"  syncs {row['syncs_per_call']}  pipelined "
                             f"{row['pipelined_us']:.1f} us" if device == "cuda" else ""),
                          flush=True)
                if on_rows:
                    on_rows(rows)  # partial results survive a time limit
    return rows


def fresh_page_us(mib=8, repeats=9):
    """Microseconds to touch one fresh 4 KiB page (anonymous mmap, first
    write): what an allocation that the allocator takes from the kernel
    costs per page. About 0.1-0.3 us on bare metal; a virtual machine whose
    memory the host maps lazily pays far more, and a program that
    allocates more large temporaries pays it more often."""
    import mmap
    size, times = mib << 20, []
    for _ in range(repeats):
        m = mmap.mmap(-1, size)
        start = time.perf_counter()
        for off in range(0, size, 4096):
            m[off] = 1
        times.append(time.perf_counter() - start)
        m.close()
    return statistics.median(times) * 1e6 / (size // 4096)


def machine(device):
    info = {"python": platform.python_version(), "torch": torch.__version__,
            "platform": platform.platform(), "processor": platform.processor(),
            "threads": torch.get_num_threads()}
    if os.environ.get("GLIBC_TUNABLES"):
        info["glibc_tunables"] = os.environ["GLIBC_TUNABLES"]
    info["fresh_page_us"] = round(fresh_page_us(), 2)
    try:
        info["cpu"] = next(line.split(":", 1)[1].strip()
                           for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
    return info


def shown(us):
    return f"{us / 1e3:.2f} ms" if us >= 1000 else f"{us:.1f} us"


def table(rows):
    """Markdown; on a GPU with the pipelined time and its ratio too."""
    gpu = any("pipelined_us" in r for r in rows)
    base = {(r["n"], r["batch"]): r["pipelined_us"] for r in rows
            if r.get("variant") == "original" and "pipelined_us" in r}
    lines = ["| N | batch | variant | median | IQR | vs original | syncs/call | ops/call |"
             + (" pipelined | vs original |" if gpu else ""),
             "|---:|---:|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if gpu else "")]
    for r in rows:
        if "skipped" in r:
            why = r["skipped"]
            if why.startswith("failed in warm-up: "):  # the exception's type; the page says more
                why = why.split(":", 2)[0] + ": " + why.split(":", 2)[1].strip()
            lines.append(f"| {r['n']:.0e} | {r['batch']} | {r['variant']} | {why} | | | | |")
            continue
        name = r["variant"] + (" (loop)" if r["loop"] else "")
        line = (f"| {r['n']:.0e} | {r['batch']} | {name} | {shown(r['median_us'])} | "
                f"{shown(r['iqr_us'])} | {r['ratio_vs_original']:.2f}x | "
                f"{r.get('syncs_per_call', '')} | {r.get('ops_per_call', '')} |")
        if gpu:
            line += (f" {shown(r['pipelined_us'])} | "
                     f"{r['pipelined_us'] / base[r['n'], r['batch']]:.2f}x |")
        lines.append(line)
    return "\n".join(lines)


def plot(rows, path, device):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    keys = sorted({(r["variant"], r["batch"]) for r in rows if "skipped" not in r})
    for variant, batch in keys:
        pts = sorted((r["n"], r["median_us"] / 1e3) for r in rows
                     if r.get("variant") == variant and r["batch"] == batch)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                linestyle="-" if batch == 1 else "--", label=f"{variant}, batch {batch}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("N (input rows)")
    ax.set_ylabel("time per call (ms)")
    ax.set_title(f"seed 000 sampler on {device}: time per call vs N")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def update_docs(docs, device, rows, info, command, label):
    doc = docs / "benchmarks.md"
    begin, end = f"<!-- sampler:{label}:begin -->", f"<!-- sampler:{label}:end -->"
    body = "\n".join([
        begin,
        f"Machine: {info.get('cpu', info['processor'])}"
        + (f", {info['gpu']} (CUDA {info['cuda']})" if "gpu" in info else "")
        + f"; {info['platform']}; PyTorch {info['torch']}, Python {info['python']}, "
          f"torch threads: {info['threads']}"
        + (f"; GLIBC_TUNABLES={info['glibc_tunables']}" if "glibc_tunables" in info else "")
        + (f"; a fresh 4 KiB page costs {info['fresh_page_us']} us" if "fresh_page_us" in info
           else "")
        + ".",
        "",
        f"Command: `{command}`",
        "",
        table(rows),
        "",
        f"![time per call vs N](sampler-{label}.png)",
        end])
    write_section(doc, begin, end, body)


FIELDS = ["n", "batch", "variant", "loop", "median_us", "iqr_us", "repeats",
          "ratio_vs_original", "syncs_per_call", "ops_per_call", "pipelined_us",
          "skipped"]


def write_results(out, label, rows, info, command):
    """OUT/sampler-LABEL.json (everything) and .csv (the rows)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"sampler-{label}.json").write_text(json.dumps(
        {"machine": info, "command": command, "rows": rows}, indent=1))
    with open(out / f"sampler-{label}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: r.get(k, "") for k in FIELDS})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--sizes", nargs="+", default=["1e4", "1e5", "1e6", "1e7"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 32])
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--out")
    parser.add_argument("--docs")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--min-repeats", type=int, default=5)
    parser.add_argument("--max-repeats", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=8.0,
                        help="time budget per configuration")
    parser.add_argument("--lowered", metavar="DIR",
                        help="take the lowered sampler from DIR (scripts/gpu/lower_here.py "
                             "made it with a build that has MLIR) instead of lowering here")
    parser.add_argument("--no-compile", action="store_true",
                        help="leave out the torch.compile variants (their compile time)")
    parser.add_argument("--render", metavar="JSON",
                        help="measure nothing: write --docs from a sampler-DEVICE.json")
    parser.add_argument("--threads", type=int,
                        help="torch.set_num_threads (default: PyTorch's)")
    parser.add_argument("--label",
                        help="names the results, the plot and the docs section "
                             "(default: the device)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, few repetitions: checks the harness runs")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.batches = ["2e3"], [1, 2]
        args.warmup, args.min_repeats, args.max_repeats, args.seconds = 1, 2, 2, 0.0
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.render:  # results measured elsewhere (the GPU machine): docs only
        saved = json.loads(pathlib.Path(args.render).read_text())
        rows, info, command = saved["rows"], saved["machine"], saved["command"]
        device = "cuda" if "gpu" in info else "cpu"
    else:
        python = "/usr/bin/python3" if args.device == "cpu" else "python3"
        command = f"{python} bench/seed000.py " + " ".join(sys.argv[1:])
        info = machine(args.device)
        device = args.device
        label = args.label or device
        save = (lambda rows: write_results(pathlib.Path(args.out), label, rows, info,
                                           command)) if args.out else None
        rows = run(args, save)
    label = args.label or device
    if args.docs:
        docs = pathlib.Path(args.docs)
        plot(rows, docs / f"sampler-{label}.png", device)
        update_docs(docs, device, rows, info, command, label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
