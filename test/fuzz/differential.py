#!/usr/bin/env python3
"""Differential fuzzer for staticify.

Generates random TorchScript programs that use data-dependent ops the way real
code does (masks from comparisons, x[m], torch.where(m)[0], nonzero,
masked_select, reductions of selections, x[m] = v stores, .item()/int()/float(),
`if` on tensor values and in-place writes under them, loops that break on data,
x[:k] with a data-derived k, cat/topk/sort/unique of
selections, torch.arange(k), padding masks sized by a read, dead code, helper-method calls,
plain static ops),
packs many of them as exported methods of one module, runs the real staticify
binary once per pack, and then checks every program:

  * wrong output: the staticified method returns something different from the
    original (structure, dtype, shape, value; floats to rtol 1e-5 / atol 1e-6,
    NaN equal to NaN), mutates its inputs differently, or raises where the
    original did not. Inputs on which the original raises are skipped: the
    contract lets the rewritten program differ only there.
  * contradicted static claim: the report says `after.static` but the saved
    method (inlined, nested blocks included) still contains an op that is always
    data-dependent (nonzero, where(cond), masked_select, unique, item, Int of a
    Tensor, tolist, bincount, index by a bool mask, ...).
  * binary crash (killed by a signal, directly or in staticify's supervised
    child, or timed out) / binary error (any other non-zero exit; "internal"
    when staticify says so): the failing program is isolated by bisecting the
    pack.

Every failing case is written to --out DIR (source as a standalone module,
inputs, the difference, a repro.py). The exit status is 1 when any wrong
output, contradicted claim or crash was found (--strict: or internal error).

    /usr/bin/python3 test/fuzz/differential.py --programs 300 --seed 1 --out /tmp/fuzz

Programs are reproducible from (seed, index): `--seed S --start I --programs 1`
regenerates program I alone.
"""
import argparse
import dataclasses
import importlib.util
import json
import math
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from typing import List, Optional

ROOT = pathlib.Path(__file__).resolve().parents[2]

ARGS = "x, y, t, xi"  # every program's signature (after self)

# staticify's flags for every pack (and REPRO below): loops that stop on data
# run on to their bound (off by default: slower where they stop early), so
# that the rewrite is checked too.
FLAGS = ["--static-loops"]

# Helper methods every pack (and every standalone repro) carries; programs call
# them live or as dead code, as real code calls small helpers. staticify
# inlines them (the saved graph may keep the call).
HELPERS = '''
    def h_count(self, m):
        return int(m.sum())

    def h_select_sum(self, a, m):
        return a[m].sum()

    def h_positions(self, m):
        return torch.nonzero(m)

    def h_first(self, a, m):
        return a[torch.where(m)[0]]
'''


# --------------------------------------------------------------------------
# The generator

# Productions whose result depends on data through a data-dependent op.
DD_FEATURES = {"store-const", "store-0d", "store-sel", "store-sel-var", "store-augmented",
               "store-rmw", "store-derived", "histogram-sel", "topk-count", "runs",
               "columns", "rows-more", "grid-put",
               "index-mask", "masked_select", "index-where", "index_select-where",
               "helper-call", "where", "nonzero", "gather", "int-of-count", "int", "float",
               "num", "numel", "reduce", "reduce-dim0", "sort", "topk", "unique", "cat",
               "nested-mask", "arange", "slice-k", "narrow-k", "if", "if-elif", "if-shield",
               "recompute-select", "loop", "branch-store", "all-tested",
               "all-tested-normalized", "range-store", "padding-mask",
               "host-branch-select", "row-bounds", "dict-records"}


@dataclasses.dataclass
class Var:
    name: str
    kind: str            # full, mask, dyn, sc, int, float, num, static
    dtype: str = "f"     # f (float32), i (int64), b (bool)
    mk: str = "elem"     # full/mask: elem (the input shape S) or row (S[:1])
    rank: int = 1        # dyn: number of dims
    sig: tuple = ()      # dyn: equal sig => equal shape (elementwise-safe)
    where_of: Optional[str] = None  # dyn index vector: torch.where(mask)[0]
    red_only: bool = False          # dyn: only reduce it (e.g. nonzero)
    dd: bool = False                # depends on a data-dependent op


@dataclasses.dataclass
class Program:
    index: int
    seed: int
    shape: tuple         # S: the shape of x, y, xi (t is S or S[:1])
    rows: bool           # t (and its masks) are row masks over a 2-D S
    body: List[str]      # method body, unindented
    features: List[str]  # production tags, for the coverage line
    style: str
    returns_dynamic: bool = False  # returns a tensor of data-dependent shape

    @property
    def method(self):
        return f"f{self.index}"

    def method_source(self, name=None, export=True):
        out = ["    @torch.jit.export"] if export else []
        out.append(f"    def {name or self.method}(self, {ARGS}):")
        out.extend("        " + line for line in self.body)
        return "\n".join(out) + "\n"

    def standalone_source(self):
        return (f"# staticify differential fuzzer: seed {self.seed}, program "
                f"{self.index} (shape {list(self.shape)}, rows={self.rows})\n"
                "from typing import Dict\n\nimport torch\n\n\nclass Program(torch.nn.Module):\n"
                + self.method_source("forward", export=False) + HELPERS)

    def input_shapes(self, empty=False):
        s = tuple(self.shape)
        if empty:
            s = (0,) + s[1:]
        return s, (s[:1] if self.rows else s)


class Gen:
    """Builds one program from a seeded random.Random. Variables carry just
    enough shape knowledge (mask kind, a shape signature) that most programs
    are valid and run; the rest raise in the original and are skipped."""

    def __init__(self, rng: random.Random, shape, rows):
        self.r = rng
        self.S = tuple(shape)
        self.rows = rows
        self.lines: List[str] = []
        self.returns_dynamic = False
        self.features: List[str] = []
        self.n = 0
        self.pool = [Var("x", "full"), Var("y", "full"),
                     Var("t", "full", mk="row" if rows else "elem"),
                     Var("xi", "full", dtype="i")]

    # -- helpers --
    def fresh(self, prefix="v"):
        self.n += 1
        return f"{prefix}{self.n}"

    def pick(self, pred, recent=True):
        cands = [v for v in self.pool if pred(v)]
        if not cands:
            return None
        if recent:
            weights = [1 + i for i in range(len(cands))]
            return self.r.choices(cands, weights)[0]
        return self.r.choice(cands)

    def rank_of(self, mk):
        return len(self.S) if mk == "elem" else 1

    def mexpr(self, m, target_mk):
        """m used elementwise against a tensor of target_mk."""
        if m.mk == target_mk:
            return m.name
        return f"{m.name}.unsqueeze(1)"

    @staticmethod
    def mask_fits(m, a):
        return m.mk == a.mk or (a.mk == "elem" and m.mk == "row")

    def emit(self, line, feature):
        self.lines.append(line)
        self.features.append(feature)

    def emit_choice(self, cond, target, arms, feature):
        """`target = arms[0]` if cond, else `target = arms[1]`."""
        self.emit(f"if {cond}:", feature)
        self.emit(f"    {target} = {arms[0]}", feature)
        self.emit("else:", feature)
        self.emit(f"    {target} = {arms[1]}", feature)

    def add(self, var, expr, feature):
        self.emit(f"{var.name} = {expr}", feature)
        names = set(re.findall(r"\b[a-z]+\d+\b", expr))
        var.dd = feature in DD_FEATURES or any(v.dd for v in self.pool if v.name in names)
        self.pool.append(var)
        return True

    def sel_sig(self, m, a):
        return ("idx", m.name, a.mk)

    def c(self, choices):
        return self.r.choice(choices)

    # -- productions: each returns False when nothing fits --
    def p_mask(self, compare=False):
        r = 0.0 if compare else self.r.random()
        if r < 0.65:
            a = self.pick(lambda v: v.kind == "full")
            if self.r.random() < 0.5:
                a = self.pool[2]  # t, the usual source of masks
            if a.dtype == "f":
                op = self.c([">", ">", "<", ">="])
                expr = f"{a.name} {op} {self.c(['0.0', '0.0', '0.25', '-0.25', '0.5'])}"
            else:
                expr = self.c([f"{a.name} > 0", f"({a.name} % 2) == 0",
                               f"{a.name} != 0"])
            return self.add(Var(self.fresh("m"), "mask", "b", a.mk), expr, "mask")
        m1 = self.pick(lambda v: v.kind == "mask")
        if m1 is None:
            return False
        if r < 0.75:
            return self.add(Var(self.fresh("m"), "mask", "b", m1.mk),
                            f"~{m1.name}", "mask-not")
        m2 = self.pick(lambda v: v.kind == "mask" and v.mk == m1.mk and v is not m1)
        if m2 is not None and self.r.random() < 0.6:
            expr = f"{m1.name} {self.c(['&', '|', '^'])} {m2.name}"
        else:
            a = self.pick(lambda v: v.kind == "full" and v.dtype == "f" and v.mk == m1.mk)
            if a is None:
                return False
            expr = f"{m1.name} & ({a.name} < {self.c(['0.5', '1.0'])})"
        return self.add(Var(self.fresh("m"), "mask", "b", m1.mk), expr, "mask-combine")

    def p_full(self):
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
        new = Var(self.fresh(), "full", "f", a.mk)
        r = self.r.random()
        if a.mk == "elem" and self.r.random() < 0.1:
            b = self.pick(lambda v: v.kind == "full" and v.dtype == "i" and v.mk == "elem")
            if b is not None:
                return self.add(Var(new.name, "full", "i", "elem"),
                                self.c([f"{b.name} * 2 + 1", f"{b.name}.abs()",
                                        f"{b.name} - ({a.name} > 0).long()"]), "static-int")
        if r < 0.35:
            expr = self.c([f"torch.relu({a.name})", f"{a.name}.abs()",
                           f"torch.tanh({a.name})", f"{a.name} * 2.0 - 1.0",
                           f"torch.sigmoid({a.name})", f"{a.name}.cumsum(0)",
                           f"{a.name}.flip(0)", f"{a.name}.clamp(min=-0.5, max=0.5)",
                           f"{a.name} - {a.name}.mean()"])
            return self.add(new, expr, "static")
        if r < 0.6:
            b = self.pick(lambda v: v.kind == "full" and v.dtype == "f" and v.mk == a.mk)
            expr = self.c([f"{a.name} + {b.name}", f"{a.name} * {b.name}",
                           f"torch.maximum({a.name}, {b.name})",
                           f"{a.name} - 0.5 * {b.name}"])
            return self.add(new, expr, "static")
        if r < 0.85:
            m = self.pick(lambda v: v.kind == "mask" and self.mask_fits(v, a))
            if m is None:
                return False
            me = self.mexpr(m, a.mk)
            b = self.pick(lambda v: v.kind == "full" and v.dtype == "f" and v.mk == a.mk)
            expr = self.c([f"torch.where({me}, {a.name}, {b.name})",
                           f"{a.name}.masked_fill({me}, 0.0)",
                           f"{a.name} * {me}",
                           f"torch.where({me}, {a.name}, torch.zeros_like({a.name}))"])
            return self.add(new, expr, "mask-elementwise")
        s = self.pick(lambda v: v.kind in ("sc", "int", "float", "num")
                      and not (v.kind == "sc" and v.dtype == "b"))
        if s is None:
            return False
        expr = self.c([f"{a.name} * {s.name}", f"{a.name} + {s.name}"])
        return self.add(new, expr, f"use-{s.kind}")

    def p_store(self):
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
        m = self.pick(lambda v: v.kind == "mask" and self.mask_fits(v, a))
        if m is None:
            return False
        new = Var(self.fresh(), "full", "f", a.mk)
        r = self.r.random()
        val, feat = self.c(["0.0", "-1.0", "2.5"]), "store-const"
        if r < 0.2:
            sc = self.pick(lambda v: v.kind == "sc" and v.dtype == "f")
            if sc is not None:
                val, feat = sc.name, "store-0d"
        elif r < 0.45:
            b = self.pick(lambda v: v.kind == "full" and v.dtype == "f" and v.mk == a.mk)
            val, feat = self.c([f"{b.name}[{m.name}]",
                                f"{b.name}[{m.name}] * 2.0 + 1.0"]), "store-sel"
        elif r < 0.65:
            s = self.pick(lambda v: v.kind == "dyn" and v.dtype == "f"
                          and v.sig == self.sel_sig(m, a))
            if s is not None:
                val, feat = s.name, "store-sel-var"
        elif r < 0.72:
            # Rows computed from a selection by m, not a selection themselves
            # (a sort along the rows: bound's store at a mask).
            b = self.pick(lambda v: v.kind == "full" and v.dtype == "f" and v.mk == a.mk)
            val, feat = f"torch.sort({b.name}[{m.name}], 0)[0]", "store-derived"
        elif r < 0.8:
            # Read-modify-write: x[m] = f(x[m]) (torchaudio's dcshift, phaser).
            val, feat = self.c([f"{new.name}[{m.name}] * 2.0 - 1.0",
                                f"({new.name}[{m.name}] - 0.5).clamp(min=0.0)"]), "store-rmw"
        self.emit(f"{new.name} = {a.name}.clone()", feat)
        if self.r.random() < 0.15 and feat == "store-const":
            self.emit(f"{new.name}[{m.name}] += 1.0", "store-augmented")
        else:
            self.emit(f"{new.name}[{m.name}] = {val}", feat)
        new.dd = True
        self.pool.append(new)
        return True

    def p_recompute(self):
        """One expression of a tensor computed before and after an in-place
        write to it: two values (equal ops must not merge across the write)."""
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
        m = self.pick(lambda v: v.kind == "mask" and self.mask_fits(v, a))
        new = Var(self.fresh(), "full", "f", a.mk)
        self.emit(f"{new.name} = {a.name}.clone()", "static")
        self.pool.append(new)
        forms = [(f"({new.name} > 0.0).sum()", "i", "recompute"),
                 (f"{new.name}.abs().amax()", "f", "recompute")]
        if m is not None:
            forms += [(f"{new.name}[{m.name}].sum()", "f", "recompute-select"),
                      (f"({new.name}[{m.name}] > 0.0).sum()", "i", "recompute-select")]
        expr, dtype, feature = self.c(forms)
        self.add(Var(self.fresh("r"), "sc", dtype), expr, feature)
        self.emit(f"{new.name}.{self.c(['add_(1.0)', 'mul_(-1.0)', 'clamp_(min=0.25)'])}",
                  "recompute")
        return self.add(Var(self.fresh("r"), "sc", dtype), expr, feature)

    def p_select(self):
        a = self.pick(lambda v: v.kind == "full" and v.dtype in "fi")
        m = self.pick(lambda v: v.kind == "mask" and self.mask_fits(v, a))
        if m is None:
            return False
        rank = 1 if m.mk == a.mk else self.rank_of(a.mk)
        forms = [(f"{a.name}[{m.name}]", "index-mask")] * 3
        if m.mk == a.mk:
            forms.append((f"torch.masked_select({a.name}, {m.name})", "masked_select"))
        if m.mk == "row" or len(self.S) == 1:
            forms.append((f"{a.name}[torch.where({m.name})[0]]", "index-where"))
            forms.append((f"torch.index_select({a.name}, 0, torch.where({m.name})[0])",
                          "index_select-where"))
            if a.dtype == "f" and self.r.random() < 0.3:
                forms.append((f"self.h_first({a.name}, {m.name})", "helper-call"))
        expr, feat = self.c(forms)
        return self.add(Var(self.fresh("s"), "dyn", a.dtype, rank=rank,
                            sig=self.sel_sig(m, a)), expr, feat)

    def p_where_idx(self):
        m = self.pick(lambda v: v.kind == "mask")
        if m is None:
            return False
        forms = [(f"torch.where({m.name})[0]", "where"),
                 (f"torch.nonzero({m.name})[:, 0]", "nonzero"),
                 (f"torch.nonzero({m.name}).t()[0]", "nonzero-t")]
        if m.mk == "row" or len(self.S) == 1:
            forms.append((f"torch.nonzero({m.name}).squeeze(1)", "nonzero"))
        expr, feat = self.c(forms)
        return self.add(Var(self.fresh("i"), "dyn", "i", sig=("where", m.name),
                            where_of=m.name), expr, feat)

    def p_gather(self):
        idx = self.pick(lambda v: v.kind == "dyn" and v.where_of is not None)
        if idx is None:
            return False
        a = self.pick(lambda v: v.kind == "full" and v.dtype in "fi")
        m = next(v for v in self.pool if v.name == idx.where_of)
        if m.mk == "row" or len(self.S) == 1:
            sig = self.sel_sig(m, a)
        else:
            sig = ("gather", idx.name, a.mk)
        forms = [f"{a.name}[{idx.name}]", f"torch.index_select({a.name}, 0, {idx.name})"]
        if a.mk == "row" or len(self.S) == 1:
            # Along dim 0 of a vector: gather and take by the rows' indices.
            forms += [f"torch.gather({a.name}, 0, {idx.name})",
                      f"torch.take({a.name}, {idx.name})"]
        elif len(self.S) == 2:
            forms.append(f"torch.gather({a.name}, 0, {idx.name}.unsqueeze(1)"
                         f".expand(-1, {a.name}.size(1)))")
        return self.add(Var(self.fresh("s"), "dyn", a.dtype, rank=self.rank_of(a.mk),
                            sig=sig), self.c(forms), "gather")

    def p_nonzero(self):
        m = self.pick(lambda v: v.kind == "mask")
        if m is None:
            return False
        ndim = 1 if m.mk == "row" else len(self.S)
        return self.add(Var(self.fresh("n"), "dyn", "i", rank=2,
                            sig=("nz", m.name, ndim), red_only=True),
                        self.c([f"torch.nonzero({m.name})", f"self.h_positions({m.name})"]),
                        "nonzero")

    def dyn(self, pred=lambda v: True, create=True):
        """A data-dependent-length tensor; makes a selection when there is none."""
        v = self.pick(lambda v: v.kind == "dyn" and not v.red_only and pred(v))
        if v is None and create and self.p_select():
            v = self.pick(lambda v: v.kind == "dyn" and not v.red_only and pred(v))
        return v

    def int_var(self):
        """A data-derived Python int; makes a count when there is none."""
        n = self.pick(lambda v: v.kind == "int")
        if n is not None:
            return n
        m = self.pick(lambda v: v.kind == "mask")
        s = self.dyn(create=False)
        forms = []
        if m is not None:
            forms += [(f"int({m.name}.sum())", "int-of-count"),
                      (f"self.h_count({m.name})", "helper-call")]
        if s is not None:
            forms += [(f"{s.name}.numel()", "numel"), (f"{s.name}.size(0)", "numel"),
                      (f"{s.name}.shape[0]", "shape-item")]
        if not forms:
            return None
        expr, feat = self.c(forms)
        n = Var(self.fresh("n"), "int")
        self.add(n, expr, feat)
        return n

    def p_dyn_unary(self):
        s = self.dyn()
        if s is None:
            return False
        if s.dtype == "f":
            expr = self.c([f"{s.name} * 2.0", f"torch.relu({s.name})",
                           f"{s.name}.abs() + 1.0", f"torch.exp(-{s.name}.abs())",
                           f"{s.name}.clamp(min=0.0)", f"{s.name} - {s.name}.mean()"])
            dtype = "f"
        else:
            expr, dtype = self.c([(f"{s.name} * 2 + 1", "i"), (f"{s.name}.abs()", "i"),
                                  (f"{s.name}.float() * 0.5", "f"), (f"{s.name} % 3", "i")])
        return self.add(dataclasses.replace(s, name=self.fresh("s"), dtype=dtype,
                                            where_of=None), expr, "dyn-elementwise")

    def p_dyn_binary(self):
        a = self.dyn()
        if a is None:
            return False
        b = self.dyn(lambda v: v.sig == a.sig and v.rank == a.rank and v is not a,
                     create=False)
        if b is None and a.sig[0] == "idx" and self.r.random() < 0.8:
            # x[m] * y[m]: select another base by the same mask.
            base = self.pick(lambda v: v.kind == "full" and v.mk == a.sig[2]
                             and v.dtype in "fi")
            b = Var(self.fresh("s"), "dyn", base.dtype, rank=a.rank, sig=a.sig)
            self.add(b, f"{base.name}[{a.sig[1]}]", "index-mask")
        if b is None:
            # The same value on both inputs of one op (s * s) is rarer in real
            # code: kept at a low rate; otherwise s * 2.0 + s.
            if self.r.random() < 0.25:
                b = a
            else:
                two = "2.0" if a.dtype == "f" else "3"
                return self.add(dataclasses.replace(a, name=self.fresh("s"), where_of=None),
                                f"{a.name} * {two} + {a.name}", "dyn-chain")
        if a.dtype == "f" and b.dtype == "f":
            expr = self.c([f"{a.name} * {b.name} + {a.name}", f"{a.name} - {b.name}",
                           f"torch.maximum({a.name}, {b.name})", f"{a.name} * 2.0 + {b.name}"])
        elif a.dtype == "i" and b.dtype == "i":
            expr = self.c([f"{a.name} + {b.name}", f"{a.name} * {b.name}"])
        else:
            expr = f"{a.name} * {b.name}"
        dtype = "f" if "f" in (a.dtype + b.dtype) else "i"
        return self.add(dataclasses.replace(a, name=self.fresh("s"), dtype=dtype,
                                            where_of=None), expr, "dyn-chain")

    def p_runs(self):
        """Runs of equal rows of a static tensor (unique_consecutive along
        dim 0), or of its elements, with their lengths."""
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
        if a is None:
            return False
        rank = self.rank_of(a.mk)
        keys = f"({a.name} > 0.0).long()"
        if self.r.random() < 0.5:
            return self.add(Var(self.fresh("s"), "dyn", "i", rank=rank, sig=("new", self.n)),
                            f"torch.unique_consecutive({keys}, dim=0)", "runs")
        return self.add(Var(self.fresh("s"), "dyn", "i", sig=("new", self.n)),
                        f"torch.unique_consecutive({keys}, return_counts=True, dim=0)[1]",
                        "runs")

    def p_padding_mask(self):
        """A padding mask `arange(n) < k` whose width n is read from data
        (usually the last dim's size: a clamped maximum), applied to a
        static tensor of that width by broadcasting (x * m, masked_fill,
        where, in place on a clone); n of 1 broadcasts, other widths raise."""
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
        b = self.pick(lambda v: v.kind == "full" and v.dtype == "f" and v.mk == a.mk) \
            if a is not None else None
        if a is None or b is None:
            return False
        width = f"{b.name}.size(-1)"
        read = self.c([f"int(torch.clamp(({a.name}.abs() * 10.0).long(), max={width}).max())",
                       f"torch.clamp(({a.name}.abs() * 10.0).long(), max={width}).max().item()",
                       f"int(({a.name} > 0.0).sum())"])
        n = self.fresh("n")
        self.emit(f"{n} = {read}", "padding-mask")
        keep = self.c(["1", f"{width} - 1", f"{width} // 2"])
        mask = self.c([f"(torch.arange({n}) < {keep})",
                       f"(torch.arange(0, {n}).unsqueeze(0) >= {keep}).squeeze(0)",
                       f"(torch.arange({n}).expand(1, {n}) < {keep})[0]"])
        expr = self.c([f"{b.name} * {mask}",
                       f"{b.name}.masked_fill({mask}, 0.5)",
                       f"torch.where({mask}, {b.name}, -1.0)",
                       f"{b.name}.clone().masked_fill_({mask}, -2.0)"])
        return self.add(Var(self.fresh("v"), "full", "f", mk=b.mk), expr, "padding-mask")

    def p_columns(self):
        """A selection along dim 1 of a 2-D input by a vector mask or its
        positions (x[:, m], index_select(1, nonzero(m))), reduced over the
        selected dim, after elementwise ops or a softmax too."""
        if len(self.S) != 2:
            return False
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f" and v.mk == "elem")
        if a is None:
            return False
        m = f"({a.name}[0] > 0.0)"  # as long as a's columns; no row: raises
        sel = self.c([f"{a.name}[:, {m}]",
                      f"{a.name}.index_select(1, torch.nonzero({m}).flatten())",
                      f"{a.name}[:, torch.where({m})[0]]"])
        expr = self.c([f"{sel}.sum(1)", f"({sel} * 2.0 - 1.0).amax(1)",
                       f"torch.softmax({sel}, 1).amax(dim=1)",
                       f"{sel}.mean(dim=1, keepdim=True)",
                       f"(torch.softmax({sel}, dim=1) * {sel}).sum(-1)"])
        return self.add(Var(self.fresh("r"), "static", "f"), expr, "columns")

    def p_rows_more(self):
        """Consumers of selected rows with transfers of their own: softmax
        along the rows, a row at a constant, the elements viewed as rows,
        expand(-1, c), a grid written at selected coordinates."""
        r = self.r.random()
        if r < 0.25:
            j = self.dyn(lambda v: v.rank == 1 and v.dtype == "i")
            if j is None:
                return False
            value = self.c(["1.0", f"{j.name}.float()"])
            value = value if value == "1.0" else value
            expr = (f"torch.zeros(5, 6).index_put(({j.name}.clamp(-5, 4), "
                    f"({j.name} * 3).clamp(-6, 5)), "
                    + (f"torch.ones_like({j.name}).float()" if value == "1.0" else value)
                    + self.c([")", ", accumulate=True)"]))
            return self.add(Var(self.fresh("r"), "static", "f"), expr, "grid-put")
        s = self.dyn(lambda v: v.rank == 2 and v.dtype == "f")
        if s is None:
            return False
        expr = self.c([f"torch.softmax({s.name}, 0).sum(0)",
                       f"torch.log_softmax({s.name}, dim=0).amax(0)",
                       f"{s.name}[{self.c(['0', '-1', '1'])}]",
                       f"{s.name}.reshape(-1).view(-1, {s.name}.size(1)).sum(0)",
                       f"{s.name}[:, :1].expand(-1, 3).sum(0)"])
        return self.add(Var(self.fresh("r"), "static", "f"), expr, "rows-more")

    def p_all_tested(self):
        """Rows selected only where some are filtered (detectron2's `if not
        valid.all(): boxes = boxes[valid]`), in the test's spellings, of one
        or two tensors by one row mask; then a sum over the selected rows
        divided by their count, out of place or in place (mmdet, mmseg)."""
        m = self.pick(lambda v: v.kind == "mask" and v.mk == "row")
        if m is None:
            return False
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f" and self.mask_fits(m, v))
        if a is None:
            return False
        b = self.pick(lambda v: v.kind == "full" and self.mask_fits(m, v) and v is not a)
        test = self.c([f"not bool({m.name}.all())", f"bool((~{m.name}).any())",
                       f"int({m.name}.sum()) != {a.name}.size(0)",
                       f"{m.name}.sum().item() != len({a.name})"])
        rank = self.rank_of(a.mk)
        outs = [(a, Var(self.fresh("s"), "dyn", a.dtype, rank=rank, sig=self.sel_sig(m, a)))]
        if b is not None and self.r.random() < 0.6:
            outs.append((b, Var(self.fresh("s"), "dyn", b.dtype, rank=self.rank_of(b.mk),
                                sig=self.sel_sig(m, b))))
        for src, out in outs:
            self.emit(f"{out.name} = {src.name}", "all-tested")
        self.emit(f"if {test}:", "all-tested")
        for src, out in outs:
            self.emit(f"    {out.name} = {src.name}[{m.name}]", "all-tested")
        for _, out in outs:
            out.dd = True
            self.pool.append(out)
        s = outs[0][1]
        if self.r.random() < 0.6:
            total = Var(self.fresh("r"), "static", "f")
            count = self.c([f"max({s.name}.size(0), 1)", f"max({s.name}.numel(), 1)"])
            expr = self.c([f"{s.name}.sum(0) / {count}",
                           f"{s.name}.sum().mul_(100.0 / {count})"])
            return self.add(total, expr, "all-tested-normalized")
        return True

    def p_range_store(self):
        """A store into a range bounded by data (torchaudio's
        mask_along_axis, a padding mask row by row): `c[:, a:b] = v` with a
        and b read from a tensor, negative and past the dim included, on a
        copy of a 2-D input."""
        if len(self.S) != 2:
            return False
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f" and v.mk == "elem")
        if a is None:
            return False
        out = Var(self.fresh("c"), "full", "f", "elem")
        lo = self.c([f"int({a.name}[0, 0] * 3.0)", f"int(({a.name} > 0.0).sum()) - 2",
                     f"{a.name}.argmax().item() % 4", ""])
        hi = self.c([f"int({a.name}.sum())", f"int(({a.name} > 0.5).sum())",
                     f"-int(({a.name} < 0.0).sum())", ""])
        if not lo and not hi:
            hi = f"int({a.name}.sum())"
        value = self.c(["0.0", "-1.5", f"{a.name}.amax()"])
        self.emit(f"{out.name} = {a.name}.clone()", "range-store")
        self.emit(f"{out.name}[:, {lo}:{hi}] = {value}", "range-store")
        out.dd = True
        self.pool.append(out)
        return True

    def p_out_variant(self):
        """A value written through out= (PyG's `index_select(m, 0, row,
        out=edge_mask)`): a mask or a float tensor computed into a tensor
        made beforehand, of its shape or empty (out= resizes), then used
        like any other."""
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
        if a is None:
            return False
        if self.r.random() < 0.6:
            out = Var(self.fresh("m"), "mask", "b", a.mk)
            made = self.c([f"torch.zeros_like({a.name}, dtype=torch.bool)",
                           "torch.zeros(0, dtype=torch.bool)"])
            call = self.c([f"torch.gt({a.name}, {self.c(['0.0', '0.25'])}, out={out.name})",
                           f"torch.lt({a.name}, -0.25, out={out.name})"])
        else:
            out = Var(self.fresh("c"), "full", "f", a.mk)
            made = self.c([f"torch.empty_like({a.name})", "torch.empty(0)"])
            call = self.c([f"torch.mul({a.name}, 2.0, out={out.name})",
                           f"torch.index_select({a.name}, 0, "
                           f"torch.arange({a.name}.size(0) - 1, -1, -1), out={out.name})"])
        self.emit(f"{out.name} = {made}", "out-variant")
        self.emit(call, "out-variant")
        self.pool.append(out)
        return True

    def p_dyn_struct(self):
        s = self.dyn()
        if s is None:
            return False
        new = Var(self.fresh("s"), "dyn", s.dtype, rank=s.rank, sig=("new", self.n))
        r = self.r.random()
        if r < 0.12:
            new.rank = 1
            return self.add(new, f"{s.name}[{s.name} > 0]", "nested-mask")
        if r < 0.27:
            b = self.dyn(lambda v: v.dtype == s.dtype and v.rank == s.rank) or \
                self.pick(lambda v: v.kind == "full" and v.dtype == s.dtype
                          and self.rank_of(v.mk) == s.rank)
            if b is None:
                return False
            return self.add(new, f"torch.cat([{s.name}, {b.name}])", "cat")
        if r < 0.45:
            if s.rank == 1:
                new.sig = s.sig
                expr = self.c([f"torch.sort({s.name})[0]",
                               f"torch.sort({s.name}, descending=True)[0]"])
                if self.r.random() < 0.3:
                    new.dtype, expr = "i", f"torch.sort({s.name}, stable=True)[1]"
            else:
                new.sig = s.sig
                expr = f"torch.sort({s.name}, 0)[0]"
            return self.add(new, expr, "sort")
        if r < 0.65 and s.rank == 1 and s.dtype == "i" and self.r.random() < 0.35:
            # Histograms of selected labels: bincount with a minlength, and
            # index_put's accumulating count (negative indices from the end).
            expr = self.c([f"torch.bincount({s.name}.clamp(0, 7), minlength=8).float()",
                           f"torch.zeros(8).index_put(({s.name}.clamp(-8, 7),), "
                           f"torch.ones_like({s.name}).float(), accumulate=True)"])
            return self.add(Var(self.fresh("r"), "static", "f"), expr, "histogram-sel")
        if r < 0.65 and s.rank == 1 and s.dtype == "i" and self.r.random() < 0.5:
            # A histogram viewed as its bins (torchmetrics' confusion matrix):
            # values of 16 or more make the view raise, as the rewrite does.
            return self.add(Var(self.fresh("r"), "static", "f"),
                            f"torch.bincount({s.name}.clamp(0, 17), minlength=16)"
                            f".view(4, 4).float()", "bincount-view")
        if r < 0.65 and s.rank == 1:
            k = self.r.randint(1, 4)
            largest = "" if self.r.random() < 0.6 else ", largest=False"
            return self.add(new, f"torch.topk({s.name}, min({k}, {s.name}.numel()){largest})[0]",
                            "topk")
        if r < 0.65 and s.rank == 2 and s.dtype == "f":
            # Along the last dim of a selection of rows: every row kept.
            k = self.r.randint(1, 3)
            return self.add(new, f"torch.topk({s.name}, min({k}, {s.name}.size(-1)))[0]",
                            "topk-last-dim")

        if r < 0.82:
            new.rank = 1
            if self.r.random() < 0.3:
                new.dtype = "i"
                return self.add(new, f"torch.unique({s.name}, return_counts=True)[1]", "unique")
            return self.add(new, f"torch.unique({s.name})", "unique")
        n = self.int_var()
        if n is None:
            return False
        expr = self.c([f"{s.name}[:{n.name}]",
                       f"{s.name}.narrow(0, 0, min({n.name}, {s.name}.size(0)))"])
        return self.add(new, expr, "slice-k")

    def p_reduce(self):
        if self.r.random() < 0.2:
            return self.p_full_reduce()
        s = self.pick(lambda v: v.kind == "dyn") or self.dyn()
        if s is None:
            return self.p_full_reduce()
        r = self.r.random()
        if s.rank == 2 and r < 0.25 and s.dtype == "f":
            expr = self.c([f"{s.name}.sum(0)", f"{s.name}.amax(0)", f"{s.name}.mean(0)"])
            return self.add(Var(self.fresh("r"), "static", "f"), expr, "reduce-dim0")
        if r < 0.4:
            expr = self.c([f"{s.name}.numel()", f"{s.name}.size(0)", f"len({s.name})",
                           f"{s.name}.shape[0]", f"len(torch.sort({s.name}, 0)[0])",
                           f"{s.name}.argsort(0).size(0)"])
            return self.add(Var(self.fresh("n"), "int"), expr, "numel")
        if s.dtype == "f":
            expr, dtype = self.c([(f"{s.name}.sum()", "f"), (f"{s.name}.sum()", "f"),
                                  (f"{s.name}.mean()", "f"), (f"{s.name}.amax()", "f"),
                                  (f"{s.name}.amin()", "f"), (f"{s.name}.prod()", "f"),
                                  (f"({s.name} > 0.5).any()", "b"),
                                  (f"({s.name} > -1.0).all()", "b"),
                                  (f"torch.count_nonzero({s.name})", "i"),
                                  (f"{s.name}.abs().sum()", "f")])
        else:
            expr, dtype = self.c([(f"{s.name}.sum()", "i"), (f"{s.name}.amax()", "i"),
                                  (f"{s.name}.float().mean()", "f"),
                                  (f"torch.count_nonzero({s.name})", "i"),
                                  (f"({s.name} > 0).any()", "b")])
        return self.add(Var(self.fresh("r"), "sc", dtype), expr, "reduce")

    def p_full_reduce(self):
        m = self.pick(lambda v: v.kind == "mask")
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
        forms = [(f"{a.name}.sum()", "f"), (f"{a.name}.abs().mean()", "f")]
        if m is not None:
            forms += [(f"{m.name}.sum()", "i"), (f"{m.name}.any()", "b"),
                      (f"{m.name}.all()", "b")]
            if self.mask_fits(m, a):
                forms += [(f"{a.name}[{m.name}].sum()", "f"),
                          (f"self.h_select_sum({a.name}, {m.name})", "f")]
        expr, dtype = self.c(forms)
        return self.add(Var(self.fresh("r"), "sc", dtype), expr, "reduce-full")

    def p_scalar(self):
        r = self.r.random()
        if r < 0.55:
            sc = self.pick(lambda v: v.kind == "sc")
            m = self.pick(lambda v: v.kind == "mask")
            if sc is None and m is None:
                return False
            if sc is None or (m is not None and self.r.random() < 0.25):
                return self.add(Var(self.fresh("n"), "int"),
                                self.c([f"int({m.name}.sum())", f"self.h_count({m.name})"]),
                                "int-of-count")
            if sc.dtype == "b":
                return self.add(Var(self.fresh("n"), "int"), f"int({sc.name})", "int")
            kind, expr = self.c([("int", f"int({sc.name})"), ("float", f"float({sc.name})"),
                                 ("num", f"{sc.name}.item()")])
            return self.add(Var(self.fresh("n" if kind == "int" else "f"), kind), expr, kind)
        if r < 0.8:
            n = self.int_var()
            if n is None:
                return False
            n2 = self.pick(lambda v: v.kind == "int") or n
            expr = self.c([f"min({n.name}, {self.r.randint(1, 6)})", f"{n.name} * 2 + 1",
                           f"max({n.name} - {self.r.randint(1, 3)}, 0)",
                           f"{n.name} + {n2.name}"])
            return self.add(Var(self.fresh("n"), "int"), expr, "int-arith")
        if r < 0.9:
            f = self.pick(lambda v: v.kind == "float")
            if f is None:
                return False
            expr = self.c([f"{f.name} * 0.5 + 1.0", f"min({f.name}, 1.0)", f"-{f.name}"])
            return self.add(Var(self.fresh("f"), "float"), expr, "float-arith")
        a = self.pick(lambda v: v.kind == "sc" and v.dtype in "fi")
        if a is None:
            return False
        b = self.pick(lambda v: v.kind == "sc" and v.dtype == "f") or a
        expr = self.c([f"{a.name} * 2.0 + {b.name}", f"{a.name} - {b.name}",
                       f"torch.clamp({a.name}, min=0.0)"])
        return self.add(Var(self.fresh("r"), "sc", "f"), expr, "sc-arith")

    def p_int_use(self):
        n = self.int_var()
        if n is None:
            return False
        r = self.r.random()
        if r < 0.3:
            return self.add(Var(self.fresh("s"), "dyn", "i", sig=("new", self.n)),
                            self.c([f"torch.arange({n.name})",
                                    f"torch.arange({n.name}) * 2"]), "arange")
        if r < 0.4:
            return self.add(Var(self.fresh("s"), "dyn", "f", sig=("new", self.n)),
                            f"torch.arange({n.name}).float() * 0.5", "arange")
        if r < 0.5:
            # The top n of a static tensor (n may exceed its elements: the
            # original raises there, and the input is skipped). Values only:
            # the order of equal values' indices is PyTorch's to choose.
            a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
            return self.add(Var(self.fresh("s"), "dyn", "f", sig=("new", self.n)),
                            self.c([f"torch.topk({a.name}.flatten(), {n.name})[0]",
                                    f"{a.name}.flatten().topk({n.name}, largest=False)[0]"
                                    f" * 2.0"]), "topk-count")
        a = self.pick(lambda v: v.kind == "full" and v.dtype in "fi")
        expr = self.c([f"{a.name}[:{n.name}]",
                       f"{a.name}.narrow(0, 0, min({n.name}, {a.name}.size(0)))"])
        return self.add(Var(self.fresh("s"), "dyn", a.dtype, rank=self.rank_of(a.mk),
                            sig=("new", self.n)), expr,
                        "slice-k" if "[" in expr else "narrow-k")

    def cond(self):
        c = self.pick(lambda v: v.kind in ("sc", "int", "float", "mask"))
        if c is None:
            a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
            return f"bool({a.name}.sum() > 0)"
        if c.kind == "sc":
            if c.dtype == "b":
                return f"bool({c.name})"
            bound = self.c(["0", "1", "2"] if c.dtype == "i" else ["0.0", "0.5", "-0.5"])
            return f"bool({c.name} > {bound})"
        if c.kind == "int":
            return f"{c.name} > {self.r.randint(0, 4)}"
        if c.kind == "float":
            return f"{c.name} < {self.c(['0.0', '0.5'])}"
        return f"bool({c.name}.any())"

    def branch_expr(self, target, base=None):
        if target.kind == "full":
            # Arms from one base are provably of one shape (if-convert needs it).
            a = base or self.pick(lambda v: v.kind == "full" and v.dtype == "f"
                                  and v.mk == target.mk)
            b = a if base else self.pick(lambda v: v.kind == "full" and v.dtype == "f"
                                         and v.mk == target.mk)
            forms = [f"{a.name} * 2.0", f"{a.name} + {b.name}", f"torch.relu({a.name})",
                     f"{a.name} - 1.0", f"{b.name}.clone()"]
            m = self.pick(lambda v: v.kind == "mask" and self.mask_fits(v, a))
            if m is not None:
                forms.append(f"{a.name}.masked_fill({self.mexpr(m, a.mk)}, 0.0)")
            # Ops that may raise on values, which both arms now run (if-convert's
            # shields): an integer division by a tensor that may be 0, and a
            # gather by int64 values that may be out of range.
            forms += [f"torch.div(({a.name} * 8.0).long(), ({b.name} > 0).long(), "
                      f"rounding_mode=\"floor\").float()",
                      f"{b.name}.flatten()[({a.name}.flatten() * 3.0).long().abs()]"
                      f".reshape({a.name}.shape)"]
            return self.c(forms)
        if target.kind == "sc":
            s = self.pick(lambda v: v.kind == "sc" and v.dtype == "f")
            a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
            forms = [f"{a.name}.sum()", f"{a.name}.amax()", "torch.zeros(())"]
            if s is not None:
                forms += [f"{s.name} * 2.0", f"{s.name} + 1.0"]
            m = self.pick(lambda v: v.kind == "mask" and self.mask_fits(v, a))
            if m is not None and self.r.random() < 0.3:
                forms.append(f"{a.name}[{m.name}].sum()")
            return self.c(forms)
        n = self.pick(lambda v: v.kind == "int")
        forms = [str(self.r.randint(0, 5))]
        if n is not None:
            forms += [f"{n.name} + 1", f"{n.name} * 2"]
        return self.c(forms)

    def p_if(self):
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
        kind = self.c(["full", "full", "sc", "int"])
        target = Var(self.fresh("b"), kind, "f", a.mk)  # full: shaped like a
        arms = 3 if self.r.random() < 0.25 else 2
        base = None
        if kind == "full" and self.r.random() < 0.7:
            base = self.pick(lambda v: v.kind == "full" and v.dtype == "f" and v.mk == a.mk)
        for k in range(arms):
            if k == 0:
                self.emit(f"if {self.cond()}:", "if")
            elif k == arms - 1:
                self.emit("else:", "if")
            else:
                self.emit(f"elif {self.cond()}:", "if-elif")
            expr = self.branch_expr(target, base)
            raising = "rounding_mode" in expr or ".long().abs()]" in expr
            self.emit(f"    {target.name} = {expr}", "if-shield" if raising else "if")
        target.dd = True
        self.pool.append(target)
        return True

    def p_loop(self):
        """A loop that stops on data: `for _ in range(k)` with a break on the
        carried tensor, before or after its update (lift-scalars runs it on
        to its bound with an active mask; the update's integer division or
        int64 index, shielded)."""
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
        if a is None:
            return False
        target = Var(self.fresh("l"), "full", "f", a.mk)
        self.emit(f"{target.name} = {a.name}.clone()", "loop")
        self.emit(f"for _ in range({self.r.randint(1, 6)}):", "loop")
        expr = self.branch_expr(target, base=target)
        cond = self.c([f"bool({target.name}.sum() > {self.c(['0.0', '1.0', '-1.0'])})",
                       f"bool(({target.name}.abs() < 0.5).all())",
                       f"bool({target.name}.amax() > 2.0)"])
        update, stop = f"    {target.name} = {expr}", f"    if {cond}:"
        lines = [update, stop, "        break"]
        if self.r.random() < 0.5:
            lines = [stop, "        break", update]
        for line in lines:
            self.emit(line, "loop")
        target.dd = True
        self.pool.append(target)
        return True

    def p_branch_rows(self):
        """Rows and columns of a selection chosen by a branch on data
        (`nonzero(t).view(-1)[0]` after an early-return test, a column of
        the selected rows): both branches run once converted, so a row past
        the selection's takes a stand-in where its branch is not taken, and
        a column keeps its own size (the host's)."""
        s = self.pick(lambda v: v.kind == "dyn" and not v.red_only and v.dtype == "f")
        if s is None:
            return False
        if s.rank == 2 and self.r.random() < 0.5:
            cols = self.S[1] if len(self.S) > 1 else 1
            j1, j2 = self.r.randrange(cols), self.r.randrange(cols)
            target = Var(self.fresh("bc"), "dyn", "f", rank=1, sig=s.sig)
            arms = [f"{s.name}.select(1, {j1})", f"{s.name}[:, {j2}] * 2.0"]
        else:
            k1, k2 = self.r.choice([0, 1, -1, -2]), self.r.choice([0, -1])
            target = Var(self.fresh("br"), "sc", "f")
            arms = [f"{s.name}[{k1}].sum()", f"{s.name}[{k2}].sum() * 2.0"
                    if self.r.random() < 0.5 else f"{s.name}.sum()"]
        self.emit_choice(self.cond(), target.name, arms, "branch-rows")
        target.dd = True
        self.pool.append(target)
        return True

    def p_host_branch_select(self):
        """Selections by one mask on both sides of an if on a host fact
        (PyG's `edge_index[:, mask]`, then `edge_attr[mask]` under `if
        edge_attr is not None`): cut by one read of the mask's count, moved
        before the if where the later cut comes after it; the branch's
        result, returned or read on, leaves the if."""
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
        m = self.pick(lambda v: v.kind == "mask" and self.mask_fits(v, a))
        if m is None:
            return False
        b = self.pick(lambda v: v.kind == "full" and v.dtype in "fi" and self.mask_fits(m, v))
        if b is None:
            return False
        rank = 1 if m.mk == a.mk else self.rank_of(a.mk)
        brank = 1 if m.mk == b.mk else self.rank_of(b.mk)
        first = Var(self.fresh("s"), "dyn", "f", rank=rank, sig=self.sel_sig(m, a))
        self.emit(f"{first.name} = {a.name}[{m.name}]", "host-branch-select")
        k = self.r.randint(0, 6)
        inner = Var(self.fresh("hb"), "dyn", b.dtype, rank=brank, sig=self.sel_sig(m, b))
        self.emit_choice(f"{a.name}.size(0) > {k}", inner.name,
                         [f"{b.name}[{m.name}]", f"{b.name}[{m.name}] + 1"],
                         "host-branch-select")
        inner.dd = True
        self.pool.append(inner)
        # The first selection read after the if (its cut comes after the
        # branch's, in program order).
        return self.add(Var(self.fresh("s"), "dyn", "f", rank=rank, sig=first.sig),
                        f"{first.name} * 2.0", "host-branch-select")

    def p_row_bounds(self):
        """Numbers read from the first and last positions of a 1-D mask
        under an if on their count (librosa's trim): a slice of a vector
        by them, torch.tensor of them; and a prefix of a selection by a
        length whose sign is data (its count less a constant)."""
        m = self.pick(lambda v: v.kind == "mask" and v.mk == "row")
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f" and v.mk == "row")
        if m is None or a is None:
            return False
        p, s, e = self.fresh("p"), self.fresh("n"), self.fresh("n")
        k, j = self.r.randint(0, 2), self.r.randint(0, 2)
        self.emit(f"{p} = torch.nonzero({m.name}).flatten()", "row-bounds")
        self.emit(f"if {p}.numel() > 0:", "row-bounds")
        self.emit(f"    {s} = int({p}[0]) - {k}", "row-bounds")
        self.emit(f"    {e} = min({a.name}.size(0), int({p}[-1]) + {j})", "row-bounds")
        self.emit("else:", "row-bounds")
        self.emit(f"    {s} = 0", "row-bounds")
        self.emit(f"    {e} = 0", "row-bounds")
        r = self.r.random()
        if r < 0.4:
            return self.add(Var(self.fresh("s"), "dyn", "f", rank=1, sig=("new", self.n)),
                            f"{a.name}[{s}:{e}] * 2.0", "row-bounds")
        if r < 0.7:
            return self.add(Var(self.fresh("c"), "sc", "f"),
                            self.c([f"torch.tensor([{s}, {e}], device={a.name}.device).float().sum()",
                                    f"torch.tensor([{s}, {e}]).float().sum().to({a.name}.device)"]),
                            "row-bounds")
        sel = self.fresh("s")
        self.emit(f"{sel} = {a.name}[{m.name}]", "row-bounds")
        q = self.r.randint(0, 3)
        return self.add(Var(self.fresh("s"), "dyn", "f", rank=1, sig=("new", self.n)),
                        f"{sel}[:{sel}.numel() - {q}] + 1.0", "row-bounds")

    def p_dict_records(self):
        """A dict of tensors filtered entry by entry (Segment Anything's
        MaskData.filter: `for k, v in d.items(): out[k] = v[m]`) under an
        if on a host fact, an entry added, tested and read back: a record,
        its entries one selection each."""
        m = self.pick(lambda v: v.kind == "mask")
        if m is None:
            return False
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f" and self.mask_fits(m, v))
        b = self.pick(lambda v: v.kind == "full" and self.mask_fits(m, v) and v is not a)
        if a is None or b is None:
            return False
        d, out, k, v, e = (self.fresh("d"), self.fresh("o"), self.fresh("k"), self.fresh("v"),
                           self.fresh("e"))
        self.emit(f'{d} = {{"a": {a.name}, "b": {b.name}}}', "dict-records")
        early = self.r.random() < 0.5
        if early:
            self.emit(f'{d}["c"] = {a.name} + 1.0', "dict-records")
        self.emit(f"if {a.name}.size(0) > {self.r.randint(0, 6)}:", "dict-records")
        self.emit(f"    {out} = torch.jit.annotate(Dict[str, torch.Tensor], {{}})", "dict-records")
        self.emit(f"    for {k}, {v} in {d}.items():", "dict-records")
        self.emit(f"        {out}[{k}] = {v}[{m.name}]", "dict-records")
        self.emit(f"    {d} = {out}", "dict-records")
        if not early or self.r.random() < 0.5:
            self.emit(f'if "c" not in {d}:', "dict-records")
            self.emit(f'    {d}["c"] = {d}["a"] * 2.0', "dict-records")
        rank = 1 if m.mk == a.mk else self.rank_of(a.mk)
        self.emit(f'{e} = {d}["c"] + float(len({d}))', "dict-records")
        return self.add(Var(self.fresh("s"), "dyn", "f", rank=rank, sig=("new", self.n)),
                        f'{e} - {d}["a"]', "dict-records")

    def p_appended_cat(self):
        """A tensor rebuilt from its rows appended to a list, then cat
        (torchaudio's Emformer `_gen_right_context`): the list holds more
        than its ListConstruct shows, so its cat's rows are no sum of
        what was listed there."""
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
        if a is None:
            return False
        parts, k = self.fresh("pk"), self.fresh("k")
        # A first part of no rows and a's trailing sizes, as constants (so
        # that the list's ListConstruct seems to hold every row: none).
        trailing = list(self.S[1:]) if a.mk == "elem" else []
        sizes = ", ".join(str(d) for d in [0] + trailing)
        self.emit(f"{parts} = [torch.zeros([{sizes}], device={a.name}.device)]", "appended-cat")
        self.emit(f"for {k} in range({a.name}.size(0)):", "appended-cat")
        self.emit(f"    {parts}.append({a.name}[{k}:{k} + 1])", "appended-cat")
        joined = self.fresh("c")
        self.emit(f"{joined} = torch.cat({parts})", "appended-cat")
        # Its rows read back (1.0 where they are a's, as they are).
        return self.add(Var(self.fresh(), "full", "f", a.mk),
                        f"{joined} * float({joined}.size(0) == {a.name}.size(0))",
                        "appended-cat")

    def p_branch_store(self):
        """An in-place write in a branch on data (`if c: y[m] = 0`,
        `y.add_(v)`, `y += a`): branch-writes computes it out of place and
        writes it back once after the if."""
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
        if a is None:
            return False
        y = Var(self.fresh("w"), "full", "f", a.mk)
        self.emit(f"{y.name} = {a.name}.clone()", "branch-store")
        forms = [f"{y.name}.add_(1.5)", f"{y.name} += {a.name}", f"{y.name}.mul_(0.5)"]
        m = self.pick(lambda v: v.kind == "mask" and self.mask_fits(v, a))
        if m is not None:
            forms += [f"{y.name}[{self.mexpr(m, a.mk)}] = 0.0",
                      f"{y.name}.masked_fill_({self.mexpr(m, a.mk)}, -1.0)"]
        self.emit(f"if {self.cond()}:", "branch-store")
        self.emit(f"    {self.c(forms)}", "branch-store")
        y.dd = True
        self.pool.append(y)
        return True

    def p_dead(self):
        m = self.pick(lambda v: v.kind == "mask")
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f")
        forms = [f"torch.unique({a.name})", "torch.unique(xi)"]
        if m is not None:
            forms += [f"torch.nonzero({m.name})", f"torch.where({m.name})[0]",
                      f"self.h_positions({m.name})", f"self.h_count({m.name})",
                      f"int({m.name}.sum())", f"{a.name}.sum().item()"]
            if self.mask_fits(m, a):
                forms += [f"{a.name}[{m.name}]", f"self.h_select_sum({a.name}, {m.name})"]
                if m.mk == a.mk:
                    forms.append(f"torch.masked_select({a.name}, {m.name})")
        self.emit(f"{self.fresh('dead')} = {self.c(forms)}", "dead")
        return True

    def p_helper_dyn(self):
        m = self.pick(lambda v: v.kind == "mask")
        if m is None:
            return False
        a = self.pick(lambda v: v.kind == "full" and v.dtype == "f" and self.mask_fits(m, v))
        if a is None:
            return False
        return self.add(Var(self.fresh("r"), "sc", "f"),
                        f"self.h_select_sum({a.name}, {m.name})", "helper-call")

    PRODUCTIONS = [("p_mask", 12), ("p_full", 8), ("p_store", 7), ("p_select", 16),
                   ("p_where_idx", 5), ("p_gather", 5), ("p_nonzero", 2),
                   ("p_dyn_unary", 6), ("p_dyn_binary", 7), ("p_dyn_struct", 8),
                   ("p_reduce", 16), ("p_scalar", 9), ("p_int_use", 5), ("p_if", 6),
                   ("p_dead", 3), ("p_helper_dyn", 1), ("p_recompute", 3), ("p_loop", 4),
                   ("p_branch_store", 4), ("p_runs", 2), ("p_columns", 2),
                   ("p_rows_more", 3), ("p_all_tested", 3), ("p_range_store", 2),
                   ("p_out_variant", 2), ("p_padding_mask", 3), ("p_appended_cat", 2),
                   ("p_branch_rows", 3), ("p_host_branch_select", 3), ("p_row_bounds", 3),
                   ("p_dict_records", 3)]

    def returnable(self, v):
        return v.kind not in ("num",) and v.name not in ("x", "y", "t", "xi")

    def finish(self):
        cands = [v for v in self.pool if self.returnable(v)]
        if not cands:
            self.emit("v0 = x * 1.0", "static")
            cands = [Var("v0", "full")]
        dd = [v for v in cands if v.dd]
        dd_static = [v for v in dd if v.kind != "dyn"]
        if dd_static and self.r.random() < 0.6:
            first = self.r.choice(dd_static[-2:])   # a reduction, a branch, a store...
        elif dd and self.r.random() < 0.9:
            first = dd[-1]
        else:
            first = cands[-1]
        rest = [v for v in cands if v is not first]
        outs = [first] + self.r.sample(rest, min(len(rest), self.r.choice([0, 1, 1, 2])))
        self.r.shuffle(outs)
        self.returns_dynamic = any(v.kind == "dyn" for v in outs)
        ret = ", ".join(v.name for v in outs)
        if len(outs) == 1 and self.r.random() < 0.2:
            ret += ","  # a one-tuple
        self.lines.append(f"return {ret}")

    def generate(self, style):
        names = [p for p, _ in self.PRODUCTIONS]
        weights = [w for _, w in self.PRODUCTIONS]
        if style == "dead-only":
            # Only static ops live; the data-dependent ops are dead code.
            for _ in range(self.r.randint(2, 5)):
                getattr(self, self.c(["p_mask", "p_full", "p_full", "p_dead"]))()
            self.p_dead()
            # Return only static values.
            self.pool = [v for v in self.pool if v.kind in ("full", "mask")]
            self.finish()
            return
        self.p_mask(compare=True)
        for _ in range(self.r.randint(4, 10)):
            for _attempt in range(6):
                if getattr(self, self.r.choices(names, weights)[0])():
                    break
        self.finish()


def generate_program(seed, index):
    rng = random.Random(f"staticify-fuzz:{seed}:{index}")
    dims = rng.choice([1, 1, 2, 2])
    if dims == 1:
        shape, rows = (rng.choice([1, 5, 8, 12]),), False
    else:
        shape, rows = (rng.choice([3, 6]), rng.choice([2, 4])), rng.random() < 0.4
    style = "dead-only" if rng.random() < 0.08 else "normal"
    g = Gen(rng, shape, rows)
    g.generate(style)
    return Program(index, seed, shape, rows, g.lines, g.features, style, g.returns_dynamic)


def pack_source(programs):
    parts = ["from typing import Dict\n\nimport torch\n\n\nclass Pack(torch.nn.Module):\n",
             "    def forward(self, x):\n        return x\n\n", HELPERS, "\n"]
    for p in programs:
        parts.append(p.method_source() + "\n")
    return "".join(parts)


def import_source(path, modname):
    spec = importlib.util.spec_from_file_location(modname, str(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --------------------------------------------------------------------------
# Inputs and comparison

INPUT_KINDS = ["random", "quant", "none", "all", "empty", "special"]


def make_inputs(prog, kind, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    S, T = prog.input_shapes(empty=(kind == "empty"))

    def quant(shape, lo=-16, hi=16, scale=8.0):
        return torch.randint(lo, hi + 1, shape, generator=g).float() / scale

    if kind == "random":
        x, y = torch.randn(S, generator=g), torch.randn(S, generator=g)
        t = torch.rand(T, generator=g) - 0.5
    elif kind in ("quant", "empty"):
        x, y, t = quant(S), quant(S), quant(T, -4, 4, 4.0)
    elif kind == "none":   # every `> c` mask empty, every `< c` full
        x, y, t = -1.0 - quant(S, 0, 8), -1.0 - quant(S, 0, 8), -1.0 - quant(T, 0, 8)
    elif kind == "all":    # the opposite
        x, y, t = 1.0 + quant(S, 0, 8), 1.0 + quant(S, 0, 8), 1.0 + quant(T, 0, 8)
    elif kind == "special":  # NaN, infinities, signed zeros among the values
        x, y, t = quant(S), quant(S), quant(T, -4, 4, 4.0)
        specials = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0])
        flat = x.view(-1)
        if flat.numel():
            pos = torch.randint(0, flat.numel(), (max(1, flat.numel() // 4),), generator=g)
            flat[pos] = specials[torch.randint(0, 4, pos.shape, generator=g)]
    else:
        raise ValueError(kind)
    xi = torch.randint(-3, 4, S, generator=g)
    return (x, y, t, xi)


def describe(value):
    import torch
    if isinstance(value, torch.Tensor):
        return f"Tensor{list(value.shape)}:{str(value.dtype).replace('torch.', '')}"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(describe(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return f"{type(value).__name__}({value!r})"


def compare(a, b, path="out", rtol=1e-5, atol=1e-6):
    """None when b matches a (the original), else a one-line difference."""
    import torch
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f"{path}: {describe(a)} vs {describe(b)}"
        if a.dtype != b.dtype:
            return f"{path}: dtype {a.dtype} vs {b.dtype}"
        if a.shape != b.shape:
            return f"{path}: shape {list(a.shape)} vs {list(b.shape)}"
        if a.device != b.device:
            return f"{path}: device {a.device} vs {b.device}"
        if a.dtype.is_floating_point or a.dtype.is_complex:
            if not torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
                bad = ~torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
                i = int(torch.nonzero(bad.reshape(-1))[0]) if bad.any() else 0
                return (f"{path}: values differ at {int(bad.sum())} of {a.numel()} "
                        f"(first flat index {i}: {a.reshape(-1)[i].item()!r} vs "
                        f"{b.reshape(-1)[i].item()!r})")
            return None
        if not torch.equal(a, b):
            return f"{path}: values differ: {a.tolist()!r} vs {b.tolist()!r}"
        return None
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        if type(a) is not type(b):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for k, (p, q) in enumerate(zip(a, b)):
            d = compare(p, q, f"{path}[{k}]", rtol, atol)
            if d:
                return d
        return None
    if type(a) is not type(b):
        return f"{path}: {describe(a)} vs {describe(b)}"
    if isinstance(a, float):
        if math.isnan(a) and math.isnan(b):
            return None
        if not math.isclose(a, b, rel_tol=rtol, abs_tol=atol):
            return f"{path}: {a!r} vs {b!r}"
        return None
    if a != b:
        return f"{path}: {a!r} vs {b!r}"
    return None


def call(fn, inputs):
    """(output, inputs after the call, error name or None)."""
    args = tuple(i.clone() for i in inputs)
    try:
        out = fn(*args)
    except Exception as e:  # noqa: BLE001 - any error is a result here
        text = str(e).strip()
        return None, args, f"{type(e).__name__}: {text.splitlines()[-1][:200] if text else ''}"
    return out, args, None


def shape_signature(value):
    """What a static method's output may not vary in between inputs of one
    shape: tensor shapes and dtypes, structure, and Python scalar values (a
    data-dependent host scalar needs a sync)."""
    import torch
    if isinstance(value, torch.Tensor):
        return ("T", tuple(value.shape), str(value.dtype))
    if isinstance(value, (tuple, list)):
        return (type(value).__name__,) + tuple(shape_signature(v) for v in value)
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    return (type(value).__name__, value)


def check_program(original, rewritten, prog, trials, seed, signatures=None):
    """Runs both on every input kind; returns (n_run, n_skipped, failure or None).
    failure = dict(kind, inputs, difference, input_tensors). When given,
    signatures receives (input kind, shape_signature of the rewritten output)
    for every run on inputs of the program's shape (all kinds but empty)."""
    n_run = n_skipped = 0
    kinds = INPUT_KINDS if trials >= len(INPUT_KINDS) else INPUT_KINDS[:trials]
    extra = max(0, trials - len(INPUT_KINDS))
    kinds = kinds + ["random", "quant"] * (extra // 2) + ["random"] * (extra % 2)
    for k, kind in enumerate(kinds):
        inputs = make_inputs(prog, kind, (seed * 1000003 + prog.index * 101 + k) % (2 ** 62))
        out0, args0, err0 = call(original, inputs)
        if err0 is not None:
            n_skipped += 1
            continue
        out1, args1, err1 = call(rewritten, inputs)
        n_run += 1
        diff = None
        if err1 is not None:
            diff = f"the rewritten method raised where the original did not: {err1}"
        else:
            diff = compare(out0, out1)
            if diff is None:
                diff = compare(args0, args1, "inputs after the call")
            if signatures is not None and kind != "empty":
                signatures.append((kind, shape_signature(out1)))
        if diff is not None:
            return n_run, n_skipped, {
                "input_kind": kind, "inputs": describe(inputs), "difference": diff,
                "original_output": describe(out0),
                "rewritten_output": describe(out1) if err1 is None else err1,
                "input_tensors": inputs}
    return n_run, n_skipped, None


# --------------------------------------------------------------------------
# Static claims

ALWAYS_DYNAMIC = {
    "aten::nonzero", "aten::nonzero_numpy", "aten::argwhere", "aten::masked_select",
    "aten::unique", "aten::unique_dim", "aten::unique_consecutive", "aten::_unique",
    "aten::_unique2", "aten::unique_dim_consecutive", "aten::item",
    "aten::_local_scalar_dense", "aten::tolist", "prim::tolist", "aten::bincount",
}
SCALAR_READS = {"aten::Int", "aten::Float", "aten::Bool", "aten::ScalarImplicit",
                "aten::IntImplicit", "aten::FloatImplicit"}
BOOL_PRODUCERS = {"aten::gt", "aten::lt", "aten::ge", "aten::le", "aten::eq", "aten::ne",
                  "aten::logical_and", "aten::logical_or", "aten::logical_xor",
                  "aten::logical_not", "aten::isnan", "aten::isinf", "aten::isfinite",
                  "aten::isclose", "aten::signbit"}
BOOL_PASSTHROUGH = {"aten::__and__", "aten::__or__", "aten::__xor__", "aten::bitwise_and",
                    "aten::bitwise_or", "aten::bitwise_xor", "aten::bitwise_not",
                    "aten::__not__", "aten::clone", "aten::contiguous", "aten::view",
                    "aten::reshape", "aten::expand", "aten::expand_as", "aten::unsqueeze",
                    "aten::squeeze", "aten::flatten", "aten::detach"}


def _is_tensor(value):
    return value.type().kind() == "TensorType"


def _is_bool_tensor(value, depth=0):
    """Whether a Tensor value is provably a bool tensor (from how it is made:
    TorchScript graphs carry no dtypes)."""
    if depth > 12 or not _is_tensor(value):
        return False
    node = value.node()
    kind = node.kind()
    if kind in BOOL_PRODUCERS:
        return True
    if kind == "aten::to":
        for inp in list(node.inputs())[1:]:
            n = inp.node()
            if n.kind() == "prim::Constant" and n.hasAttribute("value") and \
                    inp.type().kind() == "IntType" and n.i("value") == 11:  # torch.bool
                return True
        return False
    if kind in BOOL_PASSTHROUGH:
        ins = [i for i in node.inputs() if _is_tensor(i)]
        return bool(ins) and _is_bool_tensor(ins[0], depth + 1)
    return False


def _index_list_has_bool(value):
    node = value.node()
    if node.kind() != "prim::ListConstruct":
        return False
    return any(_is_tensor(i) and _is_bool_tensor(i) for i in node.inputs())


def _only_raises(block):
    """As staticify's onlyRaises: one of the block's own nodes raises."""
    return any(node.kind() == "prim::RaiseException" for node in block.nodes())


def _hits(g):
    """(op, node text, in_else, error_path): in_else when the node is in the
    second block of an if (where a guard's fallback is), error_path when it
    is in a block that only raises."""
    found = []

    def visit(nodes, in_else=False, error_path=False):
        for node in nodes:
            kind = node.kind()
            ins = list(node.inputs())
            hit = None
            if kind in ALWAYS_DYNAMIC:
                hit = kind
            elif kind == "aten::where" and len(ins) == 1:
                hit = "aten::where(cond)"
            elif kind in SCALAR_READS and ins and _is_tensor(ins[0]):
                hit = f"{kind} of a Tensor"
            elif kind == "aten::repeat_interleave":
                # repeat_interleave(repeats) or (self, Tensor repeats, dim,
                # output_size=None): the length is the sum of the repeats.
                tensors = [i for i in ins if _is_tensor(i)]
                no_size = ins and ins[-1].type().kind() == "NoneType"
                if (len(ins) <= 2 and len(tensors) == 1) or (len(tensors) >= 2 and no_size):
                    hit = "aten::repeat_interleave with tensor repeats"
            elif kind in ("aten::index", "aten::index_put", "aten::index_put_") and \
                    len(ins) >= 2 and _index_list_has_bool(ins[1]):
                hit = f"{kind} with a bool mask"
            if hit:
                found.append((hit, str(node).strip().splitlines()[0], in_else, error_path))
            for i, b in enumerate(node.blocks()):
                visit(b.nodes(), in_else or (kind == "prim::If" and i == 1),
                      error_path or (kind == "prim::If" and _only_raises(b)))

    visit(g.nodes())
    return found


def dynamic_ops(graph):
    """The always-data-dependent ops left in a method graph (an inlined copy,
    nested blocks included): a list of {"op", "node", "dead"}, where dead means
    that peephole, tuple lowering and dead-code elimination of the same copy
    remove it (an approximation by op counts). The module owning the graph
    must stay alive while this runs (the calls inlined refer to its code)."""
    import collections
    import torch
    g = graph.copy()
    torch._C._jit_pass_inline(g)
    hits = _hits(g)
    if not hits:
        return []
    live_graph = g.copy()
    for cleanup in ("_jit_pass_peephole", "_jit_pass_lower_all_tuples", "_jit_pass_dce"):
        try:  # a copy: only what survives matters
            getattr(torch._C, cleanup)(live_graph)
        except RuntimeError:
            pass
    live = collections.Counter(op for op, _, _, _ in _hits(live_graph))
    out = []
    for op, node, in_else, error_path in hits:
        dead = live[op] <= 0
        if not dead:
            live[op] -= 1
        out.append({"op": op, "node": node, "dead": dead, "in_else": in_else,
                    "error_path": error_path})
    return out


def contradicting(ops, fallback_sync_points, error_path_sync_points=0):
    """The dynamic ops a static claim cannot have: all of them, less as many
    in the second branches of ifs as the report counts in guards' fallbacks
    (an if on host facts whose fallback computes what the original did), and
    as many in branches that only raise as it counts on error paths."""
    allowed = fallback_sync_points
    allowed_raising = error_path_sync_points
    out = []
    for o in ops:
        if o.get("error_path") and not o["dead"] and allowed_raising > 0:
            allowed_raising -= 1
            continue
        if o["in_else"] and not o["dead"] and allowed > 0:
            allowed -= 1
            continue
        out.append(o)
    return out


def ops_summary(ops):
    """'aten::nonzero (dead code), aten::Bool of a Tensor' for a dynamic_ops list."""
    seen = []
    for o in ops:
        s = o["op"] + (" (dead code)" if o["dead"] else "")
        if s not in seen:
            seen.append(s)
    return ", ".join(seen)


# --------------------------------------------------------------------------
# Running the binary

def default_binary():
    env = os.environ.get("STATICIFY_BIN")
    base = pathlib.Path(env) if env else ROOT / "build" / "bin"
    return base / "staticify"


def run_binary(binary, pack_pt, methods, workdir, tag):
    out = workdir / f"out-{tag}.pt"
    rep = workdir / f"report-{tag}.json"
    cmd = [str(binary), str(pack_pt), "-o", str(out), "--report-json", str(rep), *FLAGS]
    for m in methods:
        cmd += ["--method", m]
    timeout = 120 + 10 * len(methods)
    for attempt in range(6):
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            break
        except subprocess.TimeoutExpired:
            return {"status": "crash", "rc": None, "stderr": f"timed out after {timeout} s",
                    "cmd": cmd}
        except OSError:
            # The binary is being relinked (EACCES/ETXTBSY): wait for it.
            if attempt == 5:
                raise
            time.sleep(5)
    # staticify runs its work in a forked child (tools/Supervisor.h): a child
    # killed by a signal is reported as one line and exit status 1.
    if proc.returncode < 0 or "staticify crashed (signal" in proc.stderr:
        return {"status": "crash", "rc": proc.returncode, "stderr": proc.stderr[-4000:],
                "cmd": cmd}
    if proc.returncode != 0:
        return {"status": "error", "rc": proc.returncode, "stderr": proc.stderr[-4000:],
                "cmd": cmd, "internal": "internal error" in proc.stderr}
    return {"status": "ok", "out": out, "report": json.loads(rep.read_text()), "cmd": cmd}


def isolate(binary, pack_pt, methods, workdir, counter, budget=None):
    """Runs methods as one batch; on failure bisects. Returns {method: result}.
    counter[0] counts binary runs; past `budget` runs a failing batch is not
    split further: its result, marked "group", stands for all its methods."""
    counter[0] += 1
    res = run_binary(binary, pack_pt, methods, workdir, f"b{counter[0]}")
    if res["status"] == "ok" or len(methods) == 1:
        return {m: res for m in methods}
    if budget is not None and counter[0] >= budget:
        res = dict(res, group=list(methods))
        return {m: res for m in methods}
    half = len(methods) // 2
    out = isolate(binary, pack_pt, methods[:half], workdir, counter, budget)
    out.update(isolate(binary, pack_pt, methods[half:], workdir, counter, budget))
    return out


# --------------------------------------------------------------------------
# One pack, end to end

def write_case(out_dir, category, prog, info):
    import torch
    if out_dir is None:
        return None
    d = pathlib.Path(out_dir) / f"{category}-seed{prog.seed}-p{prog.index}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "program.py").write_text(prog.standalone_source())
    tensors = info.pop("input_tensors", None)
    if tensors is not None:
        torch.save(tensors, str(d / "inputs.pt"))
    info = dict(info, category=category, seed=prog.seed, program=prog.index,
                method=prog.method, shape=list(prog.shape), rows=prog.rows,
                rerun=f"test/fuzz/differential.py --seed {prog.seed} --start {prog.index} "
                      f"--programs 1")
    (d / "case.json").write_text(json.dumps(info, indent=2, default=str) + "\n")
    (d / "repro.py").write_text(REPRO)
    return str(d)


REPRO = '''#!/usr/bin/env python3
"""Reproduces one fuzzer case: /usr/bin/python3 repro.py [path/to/staticify]"""
import json, os, subprocess, sys
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from program import Program  # noqa: E402

case = json.load(open(os.path.join(here, "case.json")))
binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join("build", "bin", "staticify")
module = torch.jit.script(Program())
module.save(os.path.join(here, "program.pt"))
proc = subprocess.run([binary, os.path.join(here, "program.pt"), "-o",
                       os.path.join(here, "static.pt"), "--report-json",
                       os.path.join(here, "report.json"), "--static-loops"])
print("staticify exited", proc.returncode)
if proc.returncode != 0:
    sys.exit(1)
static = torch.jit.load(os.path.join(here, "static.pt"))
report = json.load(open(os.path.join(here, "report.json")))
print("after.static =", report["methods"][0]["after"]["static"])
print(static.forward.graph)
if os.path.exists(os.path.join(here, "inputs.pt")):
    inputs = torch.load(os.path.join(here, "inputs.pt"))
    print("inputs:", [tuple(i.shape) for i in inputs])
    print("original: ", module(*[i.clone() for i in inputs]))
    print("rewritten:", static(*[i.clone() for i in inputs]))
print("recorded:", case.get("difference") or case.get("ops") or case.get("stderr"))
'''


def empty_stats():
    return {"generated": 0, "scripted": 0, "script_failures": 0, "binary_ok": 0,
            "internal_errors": 0, "checked": 0, "inputs_run": 0, "inputs_skipped": 0, "never_ran": 0,
            "wrong_outputs": 0, "contradicted_claims": 0, "varying_in_fallback": 0,
            "crashes": 0, "errors": 0,
            "load_failures": 0, "made_static": 0, "already_static": 0, "left_dynamic": 0,
            "left_dynamic_returning_dynamic": 0, "rewritten_some": 0,
            "fuzzer_errors": 0, "features": {}, "failures": [],
            "script_failure_samples": [], "time": {"script": 0.0, "binary": 0.0, "run": 0.0}}


def process_pack(seed, indices, binary, out_dir, trials, workroot=None, keep=False,
                 isolation_runs=None):
    """Generates, scripts, staticifies and checks programs `indices`."""
    import torch
    torch.set_num_threads(1)
    stats = empty_stats()
    progs = [generate_program(seed, i) for i in indices]
    stats["generated"] = len(progs)
    for p in progs:
        for f in set(p.features):
            stats["features"][f] = stats["features"].get(f, 0) + 1
    workdir = pathlib.Path(tempfile.mkdtemp(prefix=f"fuzz-{seed}-{indices[0]}-",
                                            dir=workroot))
    try:
        t0 = time.time()
        # Script; a program that does not script is a generator bug: drop it.
        good = list(progs)
        scripted = None
        for attempt in range(len(progs) + 1):
            if not good:
                break
            src = workdir / f"pack_{seed}_{indices[0]}_{attempt}.py"
            src.write_text(pack_source(good))
            try:
                mod = import_source(src, src.stem)
                scripted = torch.jit.script(mod.Pack())
                break
            except Exception:  # noqa: BLE001
                scripted = None
                bad = []
                for p in good:
                    one = workdir / f"one_{seed}_{p.index}.py"
                    one.write_text(pack_source([p]))
                    try:
                        torch.jit.script(import_source(one, one.stem).Pack())
                    except Exception as e:  # noqa: BLE001
                        bad.append(p)
                        stats["script_failures"] += 1
                        if len(stats["script_failure_samples"]) < 5:
                            stats["script_failure_samples"].append(
                                {"program": p.index, "error": str(e).strip()[:600],
                                 "source": p.method_source()})
                if not bad:  # the pack fails but no program alone does
                    stats["fuzzer_errors"] += 1
                    stats["failures"].append({"category": "fuzzer-error", "program": indices,
                                              "difference": traceback.format_exc()[-2000:]})
                    good = []
                    break
                good = [p for p in good if p not in bad]
        stats["scripted"] = len(good)
        stats["time"]["script"] += time.time() - t0
        if not good or scripted is None:
            return stats
        pack_pt = workdir / "pack.pt"
        scripted.save(str(pack_pt))

        t0 = time.time()
        results = isolate(binary, pack_pt, [p.method for p in good], workdir, [0],
                          isolation_runs)
        stats["time"]["binary"] += time.time() - t0

        t0 = time.time()
        loaded = {}
        groups_seen = set()
        for p in good:
            res = results[p.method]
            if res["status"] != "ok":
                cat = "crash" if res["status"] == "crash" else "error"
                info = {"rc": res["rc"], "stderr": res["stderr"], "command": res["cmd"]}
                program = p.index
                if res.get("group"):
                    # Not isolated (--isolation-runs spent): one failure for
                    # the batch, written under its first program.
                    key = tuple(res["group"])
                    if key in groups_seen:
                        continue
                    groups_seen.add(key)
                    info["not_isolated"] = res["group"]
                    program = "/".join(m[1:] for m in res["group"])
                stats["crashes" if cat == "crash" else "errors"] += 1
                stats["internal_errors"] += bool(res.get("internal"))
                stats["failures"].append({"category": cat, "program": program,
                                          "difference": f"rc={res['rc']}: " + res["stderr"][-300:],
                                          "dir": write_case(out_dir, cat, p, info)})
                continue
            stats["binary_ok"] += 1
            out_path = str(res["out"])
            if out_path not in loaded:
                try:
                    loaded[out_path] = torch.jit.load(out_path)
                except Exception as e:  # noqa: BLE001
                    loaded[out_path] = e
            module = loaded[out_path]
            if isinstance(module, Exception):
                stats["load_failures"] += 1
                stats["failures"].append({"category": "load-failure", "program": p.index,
                                          "difference": str(module)[:300],
                                          "dir": write_case(out_dir, "load-failure", p,
                                                            {"difference": str(module)})})
                continue
            entry = next(m for m in res["report"]["methods"] if m["name"] == p.method)
            claims_static = bool(entry["after"]["static"])
            if entry["before"]["static"]:
                stats["already_static"] += 1
            elif claims_static:
                stats["made_static"] += 1
            else:
                stats["left_dynamic"] += 1
                stats["left_dynamic_returning_dynamic"] += p.returns_dynamic
            if any(f["action"] == "rewritten" for f in entry["findings"]):
                stats["rewritten_some"] += 1
            rewritten = getattr(module, p.method)
            claim_hit = False
            if claims_static:
                ops = contradicting(dynamic_ops(rewritten.graph),
                                    entry["after"].get("fallback_sync_points", 0),
                                    entry["after"].get("error_path_sync_points", 0))
                if ops:
                    claim_hit = True
                    stats["contradicted_claims"] += 1
                    info = {"ops": ops, "difference": "reported static but contains: "
                            + ops_summary(ops), "graph": str(rewritten.graph)}
                    stats["failures"].append({
                        "category": "contradicted-claim", "program": p.index,
                        "difference": info["difference"], "ops": ops_summary(ops),
                        "dir": write_case(out_dir, "contradicted-claim", p, info)})
            original = getattr(scripted, p.method)
            signatures = []
            try:
                n_run, n_skip, fail = check_program(original, rewritten, p, trials, seed,
                                                    signatures)
            except Exception:  # noqa: BLE001 - a bug of the fuzzer, not of staticify
                stats["fuzzer_errors"] += 1
                stats["failures"].append({"category": "fuzzer-error", "program": p.index,
                                          "difference": traceback.format_exc()[-2000:]})
                continue
            guarded = entry["after"].get("fallback_sync_points", 0) > 0
            if claims_static and guarded and len({sig for _, sig in signatures}) > 1:
                # Static where the guards' host facts hold (the report says
                # so, and counts the fallbacks' reads apart): a fact of the
                # inputs' shapes (a padding mask pinned by a size of 1)
                # sends every run of one shape to the fallback, the original.
                stats["varying_in_fallback"] += 1
            elif claims_static and len({sig for _, sig in signatures}) > 1:
                # One shape per input-shape signature: the runs on inputs of
                # one shape must agree on output shapes and host scalars.
                stats["contradicted_claims"] += not claim_hit  # one per program
                varying = "; ".join(f"{k}: {sig}" for k, sig in signatures)
                info = {"difference": "reported static but its outputs vary with data "
                        f"on inputs of one shape: {varying}", "graph": str(rewritten.graph)}
                stats["failures"].append({
                    "category": "contradicted-claim", "program": p.index,
                    "difference": info["difference"], "ops": "output shape varies with data",
                    "dir": write_case(out_dir, "contradicted-claim-shape", p, info)})
            stats["checked"] += 1
            stats["inputs_run"] += n_run
            stats["inputs_skipped"] += n_skip
            if n_run == 0:
                stats["never_ran"] += 1
            if fail is not None:
                stats["wrong_outputs"] += 1
                fail["graph"] = str(rewritten.graph)
                stats["failures"].append({
                    "category": "wrong-output", "program": p.index,
                    "difference": f"[{fail['input_kind']}] {fail['difference']}",
                    "dir": write_case(out_dir, "wrong-output", p, fail)})
        stats["time"]["run"] += time.time() - t0
        return stats
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def merge(total, part):
    for k, v in part.items():
        if k == "features":
            for f, n in v.items():
                total[k][f] = total[k].get(f, 0) + n
        elif k == "time":
            for t, s in v.items():
                total[k][t] += s
        elif isinstance(v, list):
            total[k].extend(v)
        else:
            total[k] += v
    return total


def _pack_job(args):
    return process_pack(*args)


def run_fuzz(programs=100, seed=0, pack=40, binary=None, out_dir=None, jobs=1,
             trials=len(INPUT_KINDS), start=0, keep=False, log=None, isolation_runs=None):
    """Runs the fuzzer; returns the merged stats dict (with 'elapsed')."""
    binary = pathlib.Path(binary or default_binary())
    if not binary.exists():
        raise FileNotFoundError(f"{binary}: build staticify first")
    if out_dir is not None:
        pathlib.Path(out_dir).mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    indices = list(range(start, start + programs))
    packs = [indices[i:i + pack] for i in range(0, len(indices), pack)]
    jobs_args = [(seed, p, str(binary), out_dir, trials, None, keep, isolation_runs)
                 for p in packs]
    total = empty_stats()
    if jobs <= 1:
        for k, a in enumerate(jobs_args):
            merge(total, process_pack(*a))
            if log:
                log(f"pack {k + 1}/{len(packs)} done ({time.time() - t0:.1f} s)")
    else:
        import concurrent.futures
        import multiprocessing
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx) as ex:
            for k, part in enumerate(ex.map(_pack_job, jobs_args)):
                merge(total, part)
                if log:
                    log(f"pack {k + 1}/{len(packs)} done ({time.time() - t0:.1f} s)")
    total["elapsed"] = time.time() - t0
    total["failures"].sort(key=lambda f: (f["category"], str(f["program"])))
    return total


def failed(stats, strict=False):
    """Wrong outputs, contradicted claims and crashes fail a run; with
    strict, so do staticify's internal errors (an exception it did not expect)."""
    return bool(stats["wrong_outputs"] or stats["contradicted_claims"] or stats["crashes"]
                or (strict and stats["internal_errors"]))


def summary(stats):
    s = stats
    lines = [
        f"programs generated      {s['generated']}",
        f"scripted                {s['scripted']}  (generator failures: {s['script_failures']})",
        f"staticify ok            {s['binary_ok']}  (crashes: {s['crashes']}, errors: {s['errors']}, "
        f"unloadable outputs: {s['load_failures']})",
        f"checked                 {s['checked']}  (inputs run: {s['inputs_run']}, skipped because the "
        f"original raised: {s['inputs_skipped']}, programs with no runnable input: {s['never_ran']})",
        f"made static             {s['made_static']}  (already static: {s['already_static']}, "
        f"left dynamic: {s['left_dynamic']}, of which {s['left_dynamic_returning_dynamic']} return a "
        f"data-dependent shape; programs with a finding rewritten: {s['rewritten_some']})",
        f"wrong outputs           {s['wrong_outputs']}",
        f"contradicted claims     {s['contradicted_claims']}  (static behind guards whose "
        f"fallback ran, outputs varying there: {s['varying_in_fallback']})",
        f"binary crashes          {s['crashes']}",
        f"binary errors           {s['errors']}  (internal errors: {s['internal_errors']})",
        f"fuzzer errors           {s['fuzzer_errors']}",
        f"elapsed                 {s.get('elapsed', 0.0):.1f} s  (script {s['time']['script']:.1f}, "
        f"staticify {s['time']['binary']:.1f}, run {s['time']['run']:.1f}; summed over jobs)",
        "coverage (programs using each production): " + ", ".join(
            f"{k} {v}" for k, v in sorted(s["features"].items(), key=lambda kv: -kv[1])),
    ]
    groups = {}
    for f in s["failures"]:
        key = f["category"] + (": " + f["ops"] if f.get("ops") else "")
        groups[key] = groups.get(key, 0) + 1
    for key, n in sorted(groups.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {n:4d} x {key}")
    for f in s["failures"]:
        where = f" -> {f['dir']}" if f.get("dir") else ""
        lines.append(f"  FAIL {f['category']} program {f['program']}: "
                     f"{str(f['difference']).strip().splitlines()[0][:240]}{where}")
    for sf in s["script_failure_samples"]:
        lines.append(f"  generator bug, program {sf['program']}: "
                     f"{sf['error'].splitlines()[0][:200]}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0,
                    help="index of the first program (reruns one program with --programs 1)")
    ap.add_argument("--pack", type=int, default=40, help="programs per module / staticify run")
    ap.add_argument("--binary", default=None,
                    help="staticify binary (default: $STATICIFY_BIN/staticify or build/bin/staticify)")
    ap.add_argument("--out", default=None, help="directory for failing cases")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--trials", type=int, default=len(INPUT_KINDS),
                    help=f"inputs per program (the first {len(INPUT_KINDS)} are "
                         f"{', '.join(INPUT_KINDS)})")
    ap.add_argument("--keep", action="store_true", help="keep the work directories")
    ap.add_argument("--isolation-runs", type=int, default=None,
                    help="at most this many staticify runs per pack when bisecting a "
                         "failing pack (default: no limit)")
    ap.add_argument("--print", dest="print_only", action="store_true",
                    help="print the generated programs and exit")
    ap.add_argument("--json", default=None, help="also write the stats as JSON here")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 on staticify's internal errors too")
    a = ap.parse_args(argv)
    if a.print_only:
        for i in range(a.start, a.start + a.programs):
            p = generate_program(a.seed, i)
            print(f"# program {i} shape={list(p.shape)} rows={p.rows} style={p.style}")
            print(p.method_source())
        return 0
    stats = run_fuzz(a.programs, a.seed, a.pack, a.binary, a.out, a.jobs, a.trials,
                     a.start, a.keep, log=lambda m: print(m, file=sys.stderr, flush=True),
                     isolation_runs=a.isolation_runs)
    print(summary(stats))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(stats, indent=2, default=str) + "\n")
    return 1 if failed(stats, a.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
