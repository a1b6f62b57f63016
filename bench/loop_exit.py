"""Loops that stop on data, timed: a recurrent step (`h = tanh(h @ W + x)`)
under `for _ in range(bound)` with `if bool(...): break`, the original
against staticify's output with --static-loops (the loop run on to its
bound with an active mask, no read of the device), side by side in one process, interleaved,
medians (on CUDA the static loop also runs once under
`torch.cuda.set_sync_debug_mode("error")`: no sync). The loop stops after
`stop` steps, an input, so the table shows the
price of running on (stop much below the bound) beside the reads saved (one
per step the original takes).

    /usr/bin/python3 bench/loop_exit.py [--bin build/bin] [--device cpu|cuda]
        [--sizes 64 512] [--threads 1] [--seconds 1] [--json OUT] [--docs docs]
    /usr/bin/python3 bench/loop_exit.py --make DIR     # the two archives, here
    python3 bench/loop_exit.py --made DIR --device cuda --json R  # on a GPU
    /usr/bin/python3 bench/loop_exit.py --render R --docs docs    # its table

On a CPU a read of the device costs nothing, so the static loop is slower
by the steps it runs past the exit; on a GPU each read waits for the queue
to drain. Prints the table; with --docs, writes it into docs/benchmarks.md
between the loop-exit markers (one section per device)."""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from torch import Tensor

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from docs_section import write_section  # noqa: E402

BOUND = 32


class Recurrence(torch.nn.Module):
    """A recurrent step until a per-row done flag covers every row (a
    decoder's `finished`); `stop` decides when (a step counter on the
    device, compared with it, as a data-dependent test is)."""

    def forward(self, x: Tensor, w: Tensor, stop: Tensor) -> Tensor:
        h = torch.zeros_like(x)
        steps = torch.zeros_like(stop)
        for _ in range(32):
            h = torch.tanh(h @ w + x)
            steps = steps + 1
            if bool((steps >= stop).all()):
                break
        return h


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, inputs, device):
    sync(device)
    start = time.perf_counter()
    fn(*inputs)
    sync(device)
    return time.perf_counter() - start


def measure(original, static, inputs, seconds, device):
    """Median seconds per call of each, interleaved after warm-up."""
    for _ in range(5):
        original(*inputs)
        static(*inputs)
    a, b = [], []
    start = time.perf_counter()
    while len(a) < 20 or time.perf_counter() - start < seconds:
        a.append(timed(original, inputs, device))
        b.append(timed(static, inputs, device))
    return statistics.median(a), statistics.median(b)


def captured(model, inputs):
    """model captured once into a CUDA graph on inputs (after warm-up calls
    on a side stream): a call replays it and returns the captured output."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model(*inputs)

    def replay(*_):
        graph.replay()
        return out
    return replay


def make(binary, tmp):
    """The original and staticify's output, scripted and saved, and the
    report's sync points (before, after)."""
    path, out, rep = tmp / "loop.pt", tmp / "loop-s.pt", tmp / "loop.json"
    torch.jit.script(Recurrence()).save(str(path))
    subprocess.run([str(binary), str(path), "-o", str(out), "--report-json", str(rep),
                    "--static-loops"],
                   check=True, capture_output=True, text=True)
    method = json.loads(rep.read_text())["methods"][0]
    return path, out, (method["before"]["sync_points"], method["after"]["sync_points"])


def run(args):
    device = args.device
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        if args.made:
            made = pathlib.Path(args.made)
            path, out = made / "loop.pt", made / "loop-s.pt"
            syncs = tuple(json.loads((made / "syncs.json").read_text()))
        else:
            path, out, syncs = make(pathlib.Path(args.bin) / "staticify", tmp)
        original = torch.jit.load(str(path), map_location=device)
        static = torch.jit.load(str(out), map_location=device)
        gen = torch.Generator().manual_seed(0)
        rows = []
        for size in args.sizes:
            x = torch.randn(64, size, generator=gen).to(device)
            w = (torch.randn(size, size, generator=gen) / size ** 0.5).to(device)
            for stop in (1, 4, 16, BOUND):
                inputs = (x, w, torch.tensor(stop, device=device))
                torch.testing.assert_close(static(*inputs), original(*inputs))
                if device == "cuda":
                    # The static loop must not wait on the device once.
                    torch.cuda.set_sync_debug_mode("error")
                    try:
                        static(*inputs)
                    finally:
                        torch.cuda.set_sync_debug_mode(0)
                t0, t1 = measure(original, static, inputs, args.seconds, device)
                row = {"size": size, "stop": stop, "original_us": t0 * 1e6,
                       "static_us": t1 * 1e6, "ratio": t1 / t0}
                if device == "cuda":
                    # What zero syncs buy: the static loop, all its steps, in
                    # one CUDA graph (the original cannot be captured).
                    replay = captured(static, inputs)
                    torch.testing.assert_close(replay(), original(*inputs))
                    t0, t2 = measure(original, replay, inputs, args.seconds, device)
                    row.update(graph_us=t2 * 1e6, graph_ratio=t2 / t0)
                rows.append(row)
                print(f"d={size:<5} stop {stop:>2}/{BOUND}  {row['original_us']:9.1f} us -> "
                      f"{t1 * 1e6:9.1f} us  x{t1 / row['original_us'] * 1e6:.2f}"
                      + (f"  graph {row['graph_us']:9.1f} us x{row['graph_ratio']:.2f}"
                         if "graph_us" in row else ""), flush=True)
    return {"device": device, "syncs": syncs, "rows": rows,
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name() if device == "cuda" else None}


def render(result, command):
    device = result["device"]
    begin, end = (f"<!-- loop-exit-{device}:begin -->", f"<!-- loop-exit-{device}:end -->")
    where = result["gpu"] or "this machine's CPU, 1 thread"
    graphs = any("graph_us" in r for r in result["rows"])
    lines = [begin, f"Command: `{command}` ({where}, PyTorch {result['torch']}).", "",
             f"Sync points per call (report): {result['syncs'][0]} → {result['syncs'][1]}; "
             f"the original reads the device once per step it takes (`stop`), the static "
             f"loop never, and runs all {BOUND} steps"
             + (", which lets it be captured into one CUDA graph (last columns: the "
                "captured static loop replayed; the original cannot be captured)"
                if graphs else "") + ".", "",
             "| state width | stop after | original | staticify | ratio |"
             + (" captured | ratio |" if graphs else ""),
             "|---:|---:|---:|---:|---:|" + ("---:|---:|" if graphs else "")]
    for r in result["rows"]:
        lines.append(f"| {r['size']} | {r['stop']} of {BOUND} | {r['original_us']:.1f} us | "
                     f"{r['static_us']:.1f} us | {r['ratio']:.2f}x |"
                     + (f" {r['graph_us']:.1f} us | {r['graph_ratio']:.2f}x |"
                        if "graph_us" in r else ""))
    lines.append(end)
    return begin, end, "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--made", help="a folder with loop.pt, loop-s.pt and syncs.json "
                        "made elsewhere (--make writes one): no staticify needed")
    parser.add_argument("--make", help="write loop.pt, loop-s.pt and syncs.json here, then stop")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 512])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--json")
    parser.add_argument("--docs")
    parser.add_argument("--render", help="a --json result (made on a GPU machine): its "
                        "table only, into --docs")
    args = parser.parse_args()
    if args.render:
        result = json.loads(pathlib.Path(args.render).read_text())
        begin, end, text = render(result, result["command"])
        print(text)
        if args.docs:
            write_section(pathlib.Path(args.docs) / "benchmarks.md", begin, end, text,
                          heading=f"## Loops that stop on data ({result['device'].upper()})")
        return 0
    if args.make:
        folder = pathlib.Path(args.make)
        folder.mkdir(parents=True, exist_ok=True)
        path, out, syncs = make(pathlib.Path(args.bin) / "staticify", folder)
        (folder / "syncs.json").write_text(json.dumps(list(syncs)))
        return 0
    torch.set_num_threads(args.threads)
    command = " ".join(["/usr/bin/python3 bench/loop_exit.py"] + sys.argv[1:])
    result = run(args)
    result["command"] = command
    begin, end, text = render(result, command)
    print(text)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=1))
    if args.docs:
        write_section(pathlib.Path(args.docs) / "benchmarks.md", begin, end, text,
                      heading=f"## Loops that stop on data ({result['device'].upper()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
