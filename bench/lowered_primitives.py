"""The lowered seed sampler's primitives, each lowered on its own and timed
beside PyTorch's op at one size (1 thread, median of --reps interleaved
calls): what the sampler's kernel spends its time on. The staticified
sampler draws one random order of all N rows (randperm), and per class
gathers its mask in that order, ranks it (cumsum) and scatters the first k;
the article's fused floor would be one draw of keys (rand) and a top-k.

    /usr/bin/python3 bench/lowered_primitives.py [--size 1e6] [--json OUT] [--docs docs]
"""
import json
import pathlib
import subprocess
import sys
import tempfile

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from docs_section import write_section  # noqa: E402
from timing import interleaved, lowering_bench_args  # noqa: E402

BEGIN = "<!-- lowered_primitives.py: begin -->"
END = "<!-- lowered_primitives.py: end -->"


class Randperm(torch.nn.Module):
    def forward(self, y: torch.Tensor):
        return torch.randperm(y.numel())


class Rand(torch.nn.Module):
    def forward(self, y: torch.Tensor):
        return torch.rand(y.numel())


class Compare(torch.nn.Module):
    def forward(self, y: torch.Tensor):
        return (y == 1).long()


class Gather(torch.nn.Module):
    def forward(self, y: torch.Tensor, perm: torch.Tensor):
        return y.index_select(0, perm)


class Cumsum(torch.nn.Module):
    def forward(self, y: torch.Tensor):
        return y.cumsum(0)


class RankInOrder(torch.nn.Module):
    """One class's rank in the random order: the mask gathered, cumsum."""

    def forward(self, y: torch.Tensor, perm: torch.Tensor):
        g = (y == 1).index_select(0, perm)
        return g.cumsum(0) * g


class Scatter(torch.nn.Module):
    def forward(self, y: torch.Tensor, slot: torch.Tensor, perm: torch.Tensor):
        return torch.zeros(y.numel() + 1, dtype=torch.long).scatter(0, slot, perm)


class TopK(torch.nn.Module):
    def forward(self, keys: torch.Tensor, k_of: torch.Tensor):
        return torch.topk(keys, k_of.numel(), largest=False)[1]


def main():
    opts = lowering_bench_args(
        __doc__.splitlines()[0], 21, lambda p: p.add_argument("--size", default="1e6"))
    n = int(float(opts.size))
    gen = torch.Generator().manual_seed(0)
    y = (torch.rand(n, generator=gen) < 0.3).long()
    perm = torch.randperm(n, generator=gen)
    slot = torch.randint(0, n, (n,), generator=gen)
    keys = torch.rand(n, generator=gen)
    cases = [("randperm(N)", Randperm(), "i64[?]", (y,)),
             ("rand(N)", Rand(), "i64[?]", (y,)),
             ("labels == 1", Compare(), "i64[?]", (y,)),
             ("index_select by a permutation", Gather(), "i64[?], i64[?]", (y, perm)),
             ("cumsum", Cumsum(), "i64[?]", (y,)),
             ("a class's rank in the order", RankInOrder(), "i64[?], i64[?]", (y, perm)),
             ("scatter of N", Scatter(), "i64[?], i64[?], i64[?]", (y, slot, perm)),
             ("topk of N/10 (smallest)", TopK(), "f32[?], f32[?]",
              (keys, torch.empty(n // 10)))]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, module, types, args in cases:
            src, out = pathlib.Path(tmp) / "m.pt", pathlib.Path(tmp) / "l.pt"
            torch.jit.script(module).save(str(src))
            proc = subprocess.run([str(pathlib.Path(opts.bin) / "staticify"), str(src), "-o",
                                   str(out), "--lower=cpu", "--input-types", types],
                                  capture_output=True, text=True)
            if "lowered to a CPU kernel" not in proc.stderr:
                sys.exit(f"{label}: {proc.stderr}")
            fns = {"pytorch": torch.jit.script(module), "lowered": torch.jit.load(str(out))}
            row = {"primitive": label, **{k: v * 1e3 for k, v in
                                          interleaved(fns, args, opts.reps).items()}}
            rows.append(row)
            print(f"{label:32} PyTorch {row['pytorch']:7.2f} ms, lowered {row['lowered']:7.2f} ms")
    if opts.json:
        pathlib.Path(opts.json).write_text(json.dumps({"n": n, "rows": rows}, indent=1) + "\n")
    if opts.docs:
        lines = [BEGIN, "", f"    /usr/bin/python3 bench/lowered_primitives.py --size {opts.size} "
                 "--docs docs", "", f"| primitive (N = {n:,}) | PyTorch | lowered |",
                 "|---|---:|---:|"]
        lines += [f"| {r['primitive']} | {r['pytorch']:.2f} ms | {r['lowered']:.2f} ms |"
                  for r in rows]
        lines += ["", END]
        write_section(pathlib.Path(opts.docs) / "lowering.md", BEGIN, END, "\n".join(lines))


if __name__ == "__main__":
    main()
