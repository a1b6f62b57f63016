#!/usr/bin/env python3
"""Mutation fuzzer of the staticify command line: hostile inputs must fail cleanly.

staticify reads TorchScript archives a user was handed. Whatever the bytes, a run
must end either in success or in a clean failure: exit status 1 (2 for a bad
command line), stderr exactly one line `staticify: error: ...` (after any number
of `staticify: warning: ...` lines), no output or report file and no `*.tmp.*`
file left behind, the input untouched. It must never crash, hang, or show
libtorch's internal text (`INTERNAL ASSERT FAILED`, `Exception raised from`,
C++ frames), which tells the user nothing about what to fix. And it must not
refuse what PyTorch itself loads: an archive `torch.jit.load` accepts (a corrupt
`debug_pkl`, which only holds optional source locations, say) is one a user
expects to work.

The fuzzer scripts three small valid seed archives (a data-dependent module with
a parameter, a buffer, list/dict attributes and a traced child whose tensor
constant lands in constants.pkl; a module tree with submodules and a second
method; a torchvision Conv-BN-ReLU + squeeze-excitation block), derives one
mutant per case with a seeded `random.Random`, runs

    staticify IN -o OUT --report-json R.json        (in a fresh directory)

and sorts the run into the first matching class, most severe first:

    crash              killed by a signal, an exit status 128+signal, or stderr
                       with "terminate called", "Segmentation fault",
                       "internal error"
    hang               still running after --timeout seconds (then killed)
    modified-input     the input file's bytes changed
    leaked-internals   libtorch's internal text in the output (LEAK_PATTERNS)
    bad-message        a failure whose stderr is not warning lines plus one
                       `staticify: error: ` line, or whose exit status is not 1/2
    leftover           a failed run left a new file (OUT, R.json, anything), or
                       any run left a `*.tmp.*` file
    refused-undocumented  refused-but-loads (below) with a message that names
                       no row of docs/reliability.md's Limits table
                       (DOCUMENTED_LIMITS): a false refusal
    refused-but-loads  staticify exits 1 on an archive that torch.jit.load
                       accepts. Checked only for such failures, by a helper that
                       imports torch once and forks a child per check (with the
                       timeout and memory limit: torch itself may crash or hang
                       on hostile input). Counted, but not fatal, when the
                       message names a documented limit; the summary counts
                       them by limit.
    ok                 anything else

The mutators (MUTATORS) cover raw bytes (flips, splices, truncation); entry
contents rewritten with correct CRCs by `zipfile` (entry names and order kept,
STORED): the code (deep nesting, very long expressions, huge literals, token
edits), data.pkl and constants.pkl (byte flips, deep nesting and cycles built
from raw opcodes, stack abuse such as REDUCE on an empty stack, truncation,
unknown opcodes, out-of-range integers, odd strings and globals), the optional
debug_pkl source locations, `version`, tensor storages; the zip structure written
by hand (DEFLATE bombs of 256 MiB to 4 GiB, central directories that lie about
sizes and offsets, many/long/duplicate/missing entries); odd kinds of file (a
FIFO, a directory, /dev/zero, a symlink loop, an empty file); and bad command
lines (`-o ""`, malformed `--bound`, a repeated `--method`, unknown options, `-o`
equal to the input or in a missing directory...). The first len(MUTATORS) cases
run every mutator once; later ones draw them by weight.

Each non-ok case is written to --out DIR/<class>/caseNNNNN-<mutator>/: files/
(the case's files), repro.sh (recreates the case in a temporary directory and runs
the binary under the same memory limit), stdout.txt, stderr.txt, case.json (the
exact mutation, command, classes, torch's verdict). A summary table goes to
stdout; the exit status is 1 when any case is in a fatal class (FATAL).

Cases are reproducible from (seed, case id), whatever --jobs:

    nice -n 10 /usr/bin/python3 test/fuzz/cli_fuzz.py --cases 5000 --seed 1 --out /tmp/cli-fuzz
    nice -n 10 /usr/bin/python3 test/fuzz/cli_fuzz.py --seed 1 --case 17      # case 17 alone

Runs of the binary are limited to --mem-limit MiB of address space (ulimit -v) so
that a zip bomb cannot take the machine down; an allocation failure must then
still end in a clean message.
"""
import argparse
import collections
import concurrent.futures
import dataclasses
import functools
import hashlib
import json
import math
import os
import pathlib
import pickle
import pickletools
import random
import re
import resource
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import zipfile
import zlib
from typing import Callable, Dict, List, Optional, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[2]

# --------------------------------------------------------------------------
# Classes of outcome
# --------------------------------------------------------------------------

CLASSES = ["crash", "hang", "modified-input", "leaked-internals", "bad-message",
           "leftover", "refused-undocumented", "refused-but-loads", "ok"]
FATAL = {"crash", "hang", "modified-input", "leaked-internals", "bad-message", "leftover",
         "refused-undocumented"}

# The rows of docs/reliability.md's "Limits" table, and the refusals that name
# each. An archive torch.jit.load loads may be refused only under one of them
# (refused-but-loads); a refusal that names none is refused-undocumented.
DOCUMENTED_LIMITS = [(row, re.compile(pattern)) for row, pattern in [
    ("a limit of ArchiveLimits", r"exceeds a safety limit \("),
    ("pickle nesting", r"a pickle nests values more than"),
    ("expression depth in code", r"code nests an expression more than"),
    ("nested blocks in code", r"code nests blocks more than"),
    ("items in one bracketed display", r"code has a display of more than"),
    ("memo slot", r"a pickle (uses|reads) memo slot"),
    ("tensor storage", r"holds \d+ bytes, but its tensor needs|reads past its storage"),
    ("pickle opcodes", r"a pickle (adds items|sets a dict item|builds a|memoizes from"
                       r"|uses opcode|has a LONG1|lacks its protocol|ends before"
                       r"|is cut short)"),
    ("class attributes", r"code assigns class attribute"),
    ("DEFLATE integrity", r"compressed bytes do not inflate to the bytes"),
    ("typed containers", r"a (list|dict) of .* holds (a value|an item) of"),
    ("quantized tensors", r"a quantized tensor of dtype \S+ holds no quantization"),
]]


def documented_limit(stderr: str) -> Optional[str]:
    """The row of the Limits table a refusal names, if any."""
    for row, pattern in DOCUMENTED_LIMITS:
        if pattern.search(stderr):
            return row
    return None

CRASH_EXIT_CODES = {128 + s for s in (signal.SIGILL, signal.SIGTRAP, signal.SIGABRT,
                                      signal.SIGBUS, signal.SIGFPE, signal.SIGKILL,
                                      signal.SIGSEGV)}
CRASH_TEXT = ("terminate called", "Segmentation fault", "internal error")
# libtorch's own text: none of it tells the user what is wrong with their file.
LEAK_PATTERNS = [re.compile(p) for p in (
    r"INTERNAL ASSERT FAILED", r"please report a bug to PyTorch", r"\[enforce fail at",
    r"Exception raised from", r"inline_container\.cc", r"frame #\d+",
    r"torch/csrc/", r"aten/src/", r"c10/util/", r"caffe2/serialize",
    r"\(no backtrace available\)", r"std::bad_alloc",
)]
ERROR_PREFIX = "staticify: error: "
WARNING_PREFIX = "staticify: warning: "


@dataclasses.dataclass
class Mutation:
    """One case's input, as a mutator made it (in the case directory)."""
    what: str                                 # the exact mutation, for the reproducer
    input: str = "input.pt"                   # the path given to the binary
    argv: Optional[List[str]] = None          # the whole command line, if not the default
    setup: List[str] = dataclasses.field(default_factory=list)  # shell lines run first
    archive: bool = True                      # a mutated archive: torch is the oracle

    def command(self) -> List[str]:
        if self.argv is not None:
            return list(self.argv)
        return [self.input, "-o", "out.pt", "--report-json", "report.json"]


@dataclasses.dataclass
class Outcome:
    """What one run of the binary did."""
    command: List[str]
    returncode: Optional[int]                 # None: timed out (and killed)
    stdout: str
    stderr: str
    elapsed: float
    new_files: List[str]                      # created by the run
    tmp_files: List[str]                      # any *.tmp.* after the run
    input_modified: bool
    oracle: Optional[dict] = None             # torch.jit.load's verdict, when asked
    setup_files: List[str] = dataclasses.field(default_factory=list)  # made by m.setup


def classify(o: Outcome) -> List[str]:
    """Every problem of an outcome, most severe first (CLASSES order); [] is ok."""
    problems = []
    both = o.stdout + o.stderr
    crashed = o.returncode is not None and (
        o.returncode < 0 or o.returncode in CRASH_EXIT_CODES
        or any(t in o.stderr for t in CRASH_TEXT))
    if crashed:
        problems.append("crash")
    if o.returncode is None:
        problems.append("hang")
    if o.input_modified:
        problems.append("modified-input")
    if any(p.search(both) for p in LEAK_PATTERNS):
        problems.append("leaked-internals")
    if o.returncode not in (None, 0) and not crashed:
        if o.returncode not in (1, 2) or not clean_message(o.stderr):
            problems.append("bad-message")
    # A run we killed may leave anything: only judge the files of runs that ended.
    if o.returncode is not None:
        if o.tmp_files or (o.returncode != 0 and o.new_files):
            problems.append("leftover")
    if o.returncode == 1 and o.oracle and o.oracle.get("verdict") == "loads":
        problems.append("refused-but-loads")
        if documented_limit(o.stderr) is None:
            problems.append("refused-undocumented")
    return sorted(problems, key=CLASSES.index)


def clean_message(stderr: str) -> bool:
    """Warning lines, then exactly one error line, nothing else."""
    lines = stderr[:-1].split("\n") if stderr.endswith("\n") else stderr.split("\n")
    if not lines or not lines[-1].startswith(ERROR_PREFIX):
        return False
    return all(line.startswith(WARNING_PREFIX) for line in lines[:-1])


# --------------------------------------------------------------------------
# Seeds
# --------------------------------------------------------------------------

@dataclasses.dataclass
class Seed:
    name: str
    path: pathlib.Path
    data: bytes
    entries: List[tuple]                      # (name, bytes) in archive order


def make_seeds(directory: pathlib.Path) -> List[Seed]:
    """Scripts the seed archives into directory (about two seconds)."""
    import torch
    torch.manual_seed(0)
    directory.mkdir(parents=True, exist_ok=True)
    scale = torch.arange(1.0, 5.0)

    class Scale(torch.nn.Module):
        def forward(self, x):
            return x * scale  # traced: `scale` becomes CONSTANTS.c0 (constants.pkl)

    class DataDep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(4))
            self.register_buffer("offset", torch.ones(4))
            self.sizes = [1, 2, 3]
            self.table = {"a": 1.0, "b": 2.0}
            self.scale = torch.jit.trace(Scale(), torch.zeros(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.scale(x * self.weight + self.offset)
            total = y[y > 0].sum()
            return total + self.sizes[0] + self.table["a"]

    class Child(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = torch.relu(self.proj(x))
            return h[h.sum(1) > 0]

        @torch.jit.export
        def count(self, x: torch.Tensor) -> int:
            return torch.nonzero(x).size(0)

    class Nested(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
            self.child = Child()

        def forward(self, x):
            return self.child(self.body(x))

        @torch.jit.export
        def count(self, x: torch.Tensor) -> int:
            return self.child.count(x)

    modules = {"datadep": DataDep(), "nested": Nested()}
    try:
        from torchvision.ops import SqueezeExcitation
        from torchvision.ops.misc import Conv2dNormActivation
        modules["tvblock"] = torch.nn.Sequential(Conv2dNormActivation(3, 8),
                                                 SqueezeExcitation(8, 4)).eval()
    except ImportError:
        pass
    seeds = []
    for name, module in modules.items():
        path = directory / f"{name}.pt"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.jit.script(module).save(str(path))
        with zipfile.ZipFile(path) as z:
            entries = [(i.filename, z.read(i.filename)) for i in z.infolist()]
        seeds.append(Seed(name, path, path.read_bytes(), entries))
    return seeds


# --------------------------------------------------------------------------
# Helpers: archives, pickles, randomness
# --------------------------------------------------------------------------

def write_zip(path: pathlib.Path, entries) -> None:
    """The entries, in order, STORED, with correct CRCs (by zipfile)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in entries:
            z.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)


@dataclasses.dataclass
class RawEntry:
    """A zip entry for write_raw_zip; the cd_* fields make the central directory lie."""
    name: str
    payload: bytes                            # as stored (compressed when method 8)
    method: int = 0
    crc: Optional[int] = None                 # default: crc32(payload)
    usize: Optional[int] = None               # default: len(payload)
    cd_csize: Optional[int] = None
    cd_usize: Optional[int] = None
    cd_offset: Optional[int] = None


def write_raw_zip(path: pathlib.Path, entries: List[RawEntry], eocd_count=None,
                  eocd_cd_offset=None) -> None:
    """A zip written field by field, so that any field can hold any value."""
    def some(value, default):
        return default if value is None else value

    out, central = bytearray(), bytearray()
    for e in entries:
        offset = len(out)
        name = e.name.encode("utf-8", "surrogateescape")
        crc = some(e.crc, zlib_crc(e.payload))
        csize, usize = len(e.payload), some(e.usize, len(e.payload))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, e.method, 0, 0x21, crc,
                           csize, usize, len(name), 0) + name + e.payload
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, e.method, 0,
                               0x21, crc, some(e.cd_csize, csize) & 0xFFFFFFFF,
                               some(e.cd_usize, usize) & 0xFFFFFFFF, len(name), 0, 0, 0,
                               0, 0, some(e.cd_offset, offset) & 0xFFFFFFFF) + name
    cd_offset = len(out)
    out += central
    count = min(some(eocd_count, len(entries)), 0xFFFF)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(central),
                       some(eocd_cd_offset, cd_offset) & 0xFFFFFFFF, 0)
    path.write_bytes(bytes(out))


def zlib_crc(data: bytes, value: int = 0) -> int:
    return zlib.crc32(data, value)


MIB = 1 << 20


@functools.lru_cache(maxsize=None)
def _zero_blocks():
    """Raw DEFLATE of 1 MiB of zeros: a non-final block ending in a full flush
    (repeatable back to back) and a final one."""
    chunk = bytes(MIB)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    middle = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return middle, c.compress(chunk) + c.flush()


@functools.lru_cache(maxsize=None)
def _zeros_crc(mib: int) -> int:
    chunk, crc = bytes(16 * MIB), 0
    for _ in range(mib // 16):
        crc = zlib_crc(chunk, crc)
    return zlib_crc(bytes((mib % 16) * MIB), crc)


def deflate_bomb(mib: int):
    """(payload, crc): a DEFLATE stream of about mib KiB inflating to mib MiB of zeros."""
    middle, last = _zero_blocks()
    return middle * (mib - 1) + last, _zeros_crc(mib)


def pickle_ops(data: bytes):
    """[(opcode name, argument, start, end)] of a pickle (up to its STOP)."""
    ops = list(pickletools.genops(data))
    result = []
    for k, (op, arg, pos) in enumerate(ops):
        end = ops[k + 1][2] if k + 1 < len(ops) else pos + 1
        result.append((op.name, arg, pos, end))
    return result


def pickle_int(value: int) -> bytes:
    if -2**31 <= value < 2**31:
        return b"J" + struct.pack("<i", value)
    body = pickle.encode_long(value)
    return b"\x8a" + bytes([len(body)]) + body


PICKLE_OPCODES = {op.code.encode("latin-1") for op in pickletools.opcodes}
UNKNOWN_OPCODES = [bytes([b]) for b in range(256) if bytes([b]) not in PICKLE_OPCODES]
# Valid for Python's pickle, not (all) for TorchScript's unpickler.
PYTHON_ONLY_OPCODES = [b"i", b"o", b"\x93", b"\x94", b"\x95", b"\x96", b"\x97", b"I",
                       b"S", b"V", b"F", b"P", b"\x81", b"\x92", b"\x8c", b"L", b"\x98"]


def log_int(rng: random.Random, lo: int, hi: int) -> int:
    """An int between lo and hi, log-uniform (as many small as large)."""
    return int(round(10 ** rng.uniform(math.log10(lo), math.log10(hi))))


def clip(text: str, limit=80) -> str:
    """text cut in the middle to about limit characters."""
    if len(text) <= limit:
        return text
    return f"{text[:limit * 2 // 3]}...{text[-limit // 3:]} ({len(text)} chars)"


def short(value, limit=80) -> str:
    """repr of value, clipped."""
    return clip(repr(value), limit)


def display_args(args: List[str]) -> str:
    """A command line for reading: shell quoting, control characters escaped."""
    return " ".join(shlex.quote(a) if a.isprintable() else "$" + repr(a) for a in args)


def entries_matching(seed: Seed, predicate) -> List[str]:
    return [n for n, _ in seed.entries if predicate(n)]


def replace_entry(seed: Seed, name: str, data: Optional[bytes]):
    """The seed's entries with name's content replaced (dropped when data is None)."""
    return [(n, data if n == name else d) for n, d in seed.entries
            if n != name or data is not None]


def entry(seed: Seed, name: str) -> bytes:
    return dict(seed.entries)[name]


def is_code(name):
    return "/code/" in name and name.endswith(".py")


def is_pickle(name):
    return name.endswith("/data.pkl") or name.endswith("/constants.pkl")


def is_debug(name):
    return "/code/" in name and name.endswith(".debug_pkl")


def copy_seed(seed: Seed, d: pathlib.Path, name="input.pt") -> None:
    (d / name).write_bytes(seed.data)


# --------------------------------------------------------------------------
# Mutators
# --------------------------------------------------------------------------

MutatorFn = Callable[[random.Random, List[Seed], pathlib.Path], Mutation]
MUTATORS: Dict[str, Tuple[MutatorFn, float]] = {}  # name -> (function, weight)


def mutator(name: str, weight: float = 1.0):
    def register(fn):
        MUTATORS[name] = (fn, weight)
        return fn
    return register


# ---- raw bytes -----------------------------------------------------------

@mutator("bytes.flip", 3)
def _bytes_flip(rng, seeds, d):
    seed = rng.choice(seeds)
    data = bytearray(seed.data)
    changes = []
    for _ in range(rng.choice([1, 1, 2, 4, 16, 64])):
        i = rng.randrange(len(data))
        old = data[i]
        data[i] = old ^ (1 << rng.randrange(8)) if rng.random() < 0.5 else rng.randrange(256)
        changes.append(f"{i}:{old:02x}->{data[i]:02x}")
    (d / "input.pt").write_bytes(bytes(data))
    return Mutation(f"{seed.name}.pt: {len(changes)} bytes changed (offset:old->new) "
                    + " ".join(changes[:12]) + (" ..." if len(changes) > 12 else ""))


@mutator("bytes.splice", 2)
def _bytes_splice(rng, seeds, d):
    seed = rng.choice(seeds)
    data = bytearray(seed.data)
    i = rng.randrange(len(data))
    n = log_int(rng, 1, 4096)
    kind = rng.choice(["overwrite", "insert", "delete", "duplicate"])
    if kind == "overwrite":
        data[i:i + n] = rng.randbytes(n)
    elif kind == "insert":
        data[i:i] = rng.randbytes(n)
    elif kind == "delete":
        del data[i:i + n]
    else:
        data[i:i] = data[i:i + n]
    (d / "input.pt").write_bytes(bytes(data))
    return Mutation(f"{seed.name}.pt: {kind} {n} bytes at offset {i} (of {len(seed.data)})")


@mutator("bytes.truncate", 2)
def _bytes_truncate(rng, seeds, d):
    seed = rng.choice(seeds)
    n = len(seed.data)
    # Half the cuts in the last 200 bytes: the central directory and its end record.
    cut = rng.randrange(n) if rng.random() < 0.5 else max(0, n - rng.randint(1, 200))
    (d / "input.pt").write_bytes(seed.data[:cut])
    return Mutation(f"{seed.name}.pt truncated to {cut} of {n} bytes")


# ---- the TorchScript code -------------------------------------------------

def _insert_statements(rng, seeds, d, make_lines, label):
    """Inserts make_lines() (statements) before a random `return` of a code file."""
    candidates = []
    for seed in seeds:
        for name in entries_matching(seed, is_code):
            lines = entry(seed, name).decode("utf-8").split("\n")
            returns = [k for k, line in enumerate(lines) if re.match(r"\s+return\b", line)]
            if returns:
                candidates.append((seed, name, lines, returns))
    seed, name, lines, returns = rng.choice(candidates)
    k = rng.choice(returns)
    indent = re.match(r"\s*", lines[k]).group(0)
    new = [indent + s for s in make_lines()]
    source = "\n".join(lines[:k] + new + lines[k:])
    write_zip(d / "input.pt", replace_entry(seed, name, source.encode("utf-8")))
    shown = [short(s, 90) for s in new]
    if len(shown) > 3:  # nested blocks: the first two lines and the last
        shown = shown[:2] + [f"... ({len(new) - 3} more lines)", shown[-1]]
    shown = "; ".join(shown)
    return Mutation(f"{seed.name}.pt: {name}: {label}; inserted before line {k + 1} "
                    f"({lines[k].strip()!r}): {shown}")


@mutator("code.nesting", 2)
def _code_nesting(rng, seeds, d):
    kind = rng.choice(["parentheses", "brackets", "calls", "not", "unary-minus", "ifs"])
    depth = log_int(rng, 100, 2000 if kind == "ifs" else 100000)

    def make():
        if kind == "parentheses":
            return ["_fz = " + "(" * depth + "1" + ")" * depth]
        if kind == "brackets":
            return ["_fz = " + "[" * depth + "1" + "]" * depth]
        if kind == "calls":
            return ["_fz = " + "int(" * depth + "1" + ")" * depth]
        if kind == "not":
            return ["_fz = " + "not " * depth + "True"]
        if kind == "unary-minus":
            return ["_fz = " + "- " * depth + "1"]
        # nested blocks, one space more each
        return [" " * j + "if True:" for j in range(depth)] + [" " * depth + "_fz = 1"]
    return _insert_statements(rng, seeds, d, make, f"{kind} nested {depth} deep")


@mutator("code.long-expr", 2)
def _code_long_expr(rng, seeds, d):
    kind = rng.choice(["+", "and", "ternary"])
    terms = log_int(rng, 1000, 1000000)

    def make():
        if kind == "+":
            return ["_fz0 = 1", "_fz = " + " + ".join(["_fz0"] * terms)]
        if kind == "and":
            return ["_fz0 = True", "_fz = " + " and ".join(["_fz0"] * terms)]
        return ["_fz0 = True", "_fz = " + "1 if _fz0 else " * terms + "0"]
    return _insert_statements(rng, seeds, d, make, f"a `{kind}` chain of {terms} terms")


@mutator("code.huge-literal", 2)
def _code_huge_literal(rng, seeds, d):
    kind = rng.choice(["int-list", "float-list", "str-list", "tuple", "dict", "string"])
    n = log_int(rng, 1000, 1000000)

    def make():
        if kind == "int-list":
            body = "[" + ", ".join(str(i) for i in range(n)) + "]"
        elif kind == "float-list":
            body = "[" + ", ".join(f"{i}.5" for i in range(n)) + "]"
        elif kind == "str-list":
            body = "[" + ", ".join(f'"s{i}"' for i in range(n)) + "]"
        elif kind == "tuple":
            body = "(" + ", ".join(str(i) for i in range(n)) + ",)"
        elif kind == "dict":
            body = "{" + ", ".join(f'"k{i}": {i}' for i in range(n)) + "}"
        else:
            body = '"' + "a" * (10 * n) + '"'
        return ["_fz = " + body]
    return _insert_statements(rng, seeds, d, make, f"a {kind} literal of {n} elements")


_TOKEN_RE = re.compile(r"""\s+|[A-Za-z_]\w*|\d+(?:\.\d*)?|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|.""",
                       re.S)
_TOKEN_POOL = ["(", ")", "[", "]", "{", "}", ":", ",", ".", "=", "==", "+", "*", "**", "->",
               "if", "else", "elif", "for", "in", "while", "def", "return", "class", "self",
               "None", "Tensor", "List[int]", "Optional[", "annotate", "torch.nonzero",
               "__torch__", "CONSTANTS.c0", "CONSTANTS.c99", "ops.nope.op", "0", "-1",
               "1e309", "99999999999999999999", "0x", "\n", "\n    ", "\n\n", "\t", " ",
               '"', "'", "\\", "#", "...", "lambda", "\x00", "\x7f", "\u00e9", "\u2028",
               "\ufeff", "\udcff"]  # \udcff: the byte 0xff, invalid UTF-8


@mutator("code.tokens", 3)
def _code_tokens(rng, seeds, d):
    seed = rng.choice(seeds)
    name = rng.choice(entries_matching(seed, is_code))
    tokens = _TOKEN_RE.findall(entry(seed, name).decode("utf-8"))
    edits = []
    for _ in range(rng.choice([1, 1, 2, 3, 5, 10])):
        i = rng.randrange(len(tokens))
        op = rng.choice(["delete", "duplicate", "swap", "replace", "insert"])
        new = rng.choice(_TOKEN_POOL)
        if op == "delete":
            edits.append(f"deleted token {i} {tokens[i]!r}")
            del tokens[i]
        elif op == "duplicate":
            edits.append(f"duplicated token {i} {tokens[i]!r}")
            tokens.insert(i, tokens[i])
        elif op == "swap" and i + 1 < len(tokens):
            edits.append(f"swapped tokens {i} {tokens[i]!r} and {i + 1} {tokens[i + 1]!r}")
            tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
        elif op == "replace":
            edits.append(f"replaced token {i} {tokens[i]!r} by {new!r}")
            tokens[i] = new
        else:
            edits.append(f"inserted {new!r} before token {i} {tokens[i]!r}")
            tokens.insert(i, new)
    source = "".join(tokens).encode("utf-8", "surrogateescape")
    write_zip(d / "input.pt", replace_entry(seed, name, source))
    return Mutation(f"{seed.name}.pt: {name}: " + "; ".join(edits))


# ---- pickles: data.pkl, constants.pkl (and debug_pkl below) ---------------

def _deep_pickle(kind: str, depth: int, wrap: bool) -> bytes:
    """A pickle of a value nested depth deep, from raw opcodes."""
    if kind == "list":      # ] ( <inner> e : EMPTY_LIST MARK ... APPENDS
        body = b"](" * depth + b"]" + b"e" * depth
    elif kind == "tuple":   # ( <inner> t : MARK ... TUPLE
        body = b"(" * depth + b")" + b"t" * depth
    elif kind == "dict":    # } ( K0 <inner> u : EMPTY_DICT MARK key value SETITEMS
        body = b"}(K\x00" * depth + b"}" + b"u" * depth
    else:                   # a list holding itself, depth times over (memo cycles)
        body = b"]q\x00" + b"h\x00h\x00a" * depth + b"0h\x00"
    return b"\x80\x02" + (b"(" + body + b"t" if wrap else body) + b"."


@mutator("pickle.flip", 2)
def _pickle_flip(rng, seeds, d):
    seed = rng.choice(seeds)
    name = rng.choice(entries_matching(seed, is_pickle))
    data = bytearray(entry(seed, name))
    changes = []
    for _ in range(rng.choice([1, 1, 2, 4, 8])):
        i = rng.randrange(len(data))
        old = data[i]
        data[i] = old ^ (1 << rng.randrange(8)) if rng.random() < 0.5 else rng.randrange(256)
        changes.append(f"{i}:{old:02x}->{data[i]:02x}")
    write_zip(d / "input.pt", replace_entry(seed, name, bytes(data)))
    return Mutation(f"{seed.name}.pt: {name}: bytes changed (offset:old->new) " + " ".join(changes))


@mutator("pickle.deep", 2)
def _pickle_deep(rng, seeds, d):
    seed = rng.choice(seeds)
    name = rng.choice(entries_matching(seed, is_pickle))
    kind = rng.choice(["list", "list", "tuple", "dict", "cycle"])
    depth = log_int(rng, 1000, 1000000)
    wrap = name.endswith("constants.pkl") and rng.random() < 0.7
    data = _deep_pickle(kind, depth, wrap)
    write_zip(d / "input.pt", replace_entry(seed, name, data))
    what = (f"a list appending itself {depth} times" if kind == "cycle"
            else f"a {kind} nested {depth} deep")
    return Mutation(f"{seed.name}.pt: {name} replaced by a pickle of {what}"
                    + (" inside a tuple" if wrap else "") + f" ({len(data)} bytes, "
                    f"starts {data[:24]!r})")


STACK_ABUSE = {
    "REDUCE on an empty stack": b"R",
    "REDUCE on a MARK": b"(R",
    "APPENDS without a MARK": b"]e",
    "APPEND on an empty stack": b"a",
    "SETITEMS without a MARK": b"}u",
    "SETITEM on an empty stack": b"s",
    "BUILD on an empty stack": b"b",
    "TUPLE3 on one item": b"K\x01\x87",
    "TUPLE without a MARK": b"t",
    "BINPERSID on an empty stack": b"Q",
    "BINGET of an unset memo slot": b"h\x07",
    "LONG_BINGET of slot 2^32-1": b"j\xff\xff\xff\xff",
    "BINPUT on an empty stack": b"q\x00",
    "POP on an empty stack": b"0",
    "POP_MARK without a MARK": b"1",
    "DUP on an empty stack": b"2",
    "NEWOBJ on an empty stack": b"\x81",
    "a GLOBAL without its newlines": b"ctorch",
    "BINUNICODE longer than the file": b"X\xff\xff\xff\x7fabc",
    "BINSTRING of negative length": b"T\xff\xff\xff\xff",
    "LONG1 of 255 bytes": b"\x8a\xff" + b"\x7f" * 255,
    "LONG4 of 2^31-1 bytes": b"\x8b\xff\xff\xff\x7f",
    "a MARK alone": b"(",
    "nothing": b"",
}


@mutator("pickle.stack", 2)
def _pickle_stack(rng, seeds, d):
    seed = rng.choice(seeds)
    name = rng.choice(entries_matching(seed, is_pickle))
    label, ops = rng.choice(sorted(STACK_ABUSE.items()))
    original = entry(seed, name)
    if rng.random() < 0.5 or not ops:
        data = b"\x80\x02" + ops + b"."
        what = f"replaced by PROTO 2, {label} ({ops[:16]!r}), STOP"
    else:  # inserted between two opcodes of the real pickle
        _, _, pos, _ = rng.choice(pickle_ops(original)[1:])
        data = original[:pos] + ops + original[pos:]
        what = f"with {label} ({ops[:16]!r}) inserted at offset {pos}"
    write_zip(d / "input.pt", replace_entry(seed, name, data))
    return Mutation(f"{seed.name}.pt: {name} {what}")


@mutator("pickle.truncate", 1)
def _pickle_truncate(rng, seeds, d):
    seed = rng.choice(seeds)
    name = rng.choice(entries_matching(seed, is_pickle))
    data = entry(seed, name)
    cut = rng.randrange(len(data))
    write_zip(d / "input.pt", replace_entry(seed, name, data[:cut]))
    return Mutation(f"{seed.name}.pt: {name} truncated to {cut} of {len(data)} bytes")


@mutator("pickle.opcode", 1.5)
def _pickle_opcode(rng, seeds, d):
    seed = rng.choice(seeds)
    name = rng.choice(entries_matching(seed, is_pickle))
    data = entry(seed, name)
    kind = rng.choice(["unknown", "unknown", "python-only"])
    op = rng.choice(UNKNOWN_OPCODES if kind == "unknown" else PYTHON_ONLY_OPCODES)
    _, _, pos, end = rng.choice(pickle_ops(data))
    if rng.random() < 0.5:
        data, how = data[:pos] + op + data[pos:], "inserted"
    else:
        data, how = data[:pos] + op + data[pos + 1:], "overwrote an opcode with"
    write_zip(d / "input.pt", replace_entry(seed, name, data))
    return Mutation(f"{seed.name}.pt: {name}: at offset {pos} {how} the {kind} opcode {op!r}")


INT_VALUES = [-1, 0, 1, 7, 255, 65535, 2**31 - 1, -2**31, 2**32, 2**40, 2**63 - 1,
              -2**63, 2**64, 10**30, -10**30]
STRING_VALUES = ["", "cuda", "cuda:7", "meta", "mps", "xla:0", "9999", "0", "../version",
                 "constants.pkl", "QInt8Storage", "BogusStorage", "__torch__.Nope",
                 "A" * 100000, "\x00", "\u00e9", ".", "/etc/passwd", "FORMAT_WITH_STRING_TABLE"]
GLOBAL_VALUES = [("os", "system"), ("builtins", "eval"), ("torch._utils", "_rebuild_qtensor"),
                 ("torch", "BogusStorage"), ("torch", "QInt8Storage"), ("__torch__", "M"),
                 ("__torch__.nope", "Nope"), ("collections", "OrderedDict"),
                 ("torch.jit._pickle", "build_tensorlist"),
                 ("torch.jit._pickle", "restore_type_tag"), ("", ""),
                 ("torch._utils", "_rebuild_sparse_tensor"), ("torch", "HalfStorage")]


def _mutate_values(rng, data: bytes, count: int):
    """Replaces count int / string / GLOBAL opcodes of a pickle; (data, changes)."""
    ops = [o for o in pickle_ops(data)
           if o[0] in ("BININT", "BININT1", "BININT2", "LONG1", "BINUNICODE", "GLOBAL")]
    changes = []
    for name, arg, pos, end in sorted(rng.sample(ops, min(count, len(ops))),
                                      key=lambda o: -o[2]):  # back to front
        if name == "GLOBAL":
            module, attr = rng.choice(GLOBAL_VALUES)
            new = b"c" + module.encode() + b"\n" + attr.encode() + b"\n"
            changes.append(f"GLOBAL {arg!r} at {pos} -> {module} {attr}")
        elif name == "BINUNICODE":
            value = rng.choice(STRING_VALUES)
            raw = value.encode("utf-8")
            new = b"X" + struct.pack("<I", len(raw)) + raw
            changes.append(f"string {short(arg, 40)} at {pos} -> {short(value, 40)}")
        else:
            value = rng.choice(INT_VALUES + [rng.randrange(-2**40, 2**40)])
            new = pickle_int(value)
            changes.append(f"int {arg} at {pos} -> {value}")
        data = data[:pos] + new + data[end:]
    return data, changes


@mutator("pickle.values", 2)
def _pickle_values(rng, seeds, d):
    seed = rng.choice(seeds)
    name = rng.choice(entries_matching(seed, is_pickle))
    data, changes = _mutate_values(rng, entry(seed, name), rng.choice([1, 1, 2, 3]))
    if not changes:  # an empty constants.pkl: nothing to change there
        name = rng.choice(entries_matching(seed, lambda n: n.endswith("/data.pkl")))
        data, changes = _mutate_values(rng, entry(seed, name), 1)
    write_zip(d / "input.pt", replace_entry(seed, name, data))
    return Mutation(f"{seed.name}.pt: {name}: " + "; ".join(changes))


# ---- debug_pkl: optional source locations ---------------------------------

@mutator("debug.corrupt", 3)
def _debug_corrupt(rng, seeds, d):
    seed = rng.choice(seeds)
    debug = entries_matching(seed, is_debug)
    name = rng.choice(debug)
    data = entry(seed, name)
    kind = rng.choice(["flip", "truncate", "empty", "garbage", "deep", "opcode", "values",
                       "values", "other-pickle", "drop", "swap"])
    detail = ""
    if kind == "flip":
        b = bytearray(data)
        spots = sorted(rng.randrange(len(b)) for _ in range(rng.choice([1, 2, 8])))
        for i in spots:
            b[i] ^= 1 << rng.randrange(8)
        data, detail = bytes(b), f"bits flipped at offsets {spots}"
    elif kind == "truncate":
        cut = rng.randrange(len(data))
        data, detail = data[:cut], f"truncated to {cut} of {len(data)} bytes"
    elif kind == "empty":
        data, detail = b"", "emptied"
    elif kind == "garbage":
        n = log_int(rng, 1, 100000)
        data, detail = rng.randbytes(n), f"replaced by {n} random bytes"
    elif kind == "deep":
        depth = log_int(rng, 1000, 1000000)
        data = _deep_pickle("list", depth, rng.random() < 0.5)
        detail = f"replaced by a pickled list nested {depth} deep"
    elif kind == "opcode":
        op = rng.choice(UNKNOWN_OPCODES + PYTHON_ONLY_OPCODES)
        _, _, pos, _ = rng.choice(pickle_ops(data))
        data, detail = data[:pos] + op + data[pos:], f"opcode {op!r} inserted at {pos}"
    elif kind == "values":  # mostly the source ranges: offsets past the text, negative...
        data, changes = _mutate_values(rng, data, rng.choice([1, 2, 4, 16]))
        detail = "; ".join(changes)
    elif kind == "other-pickle":
        value = rng.choice([1, (), ("FORMAT_WITH_STRING_TABLE", (), ()),
                            ("FORMAT_WITH_STRING_TABLE", ("x",), ((0, ((0,), 0, 1)),)),
                            ((0, ("text", "file.py", 1), 0, 100),), [None]])
        data, detail = pickle.dumps(value, protocol=2), f"replaced by pickle.dumps({value!r})"
    elif kind == "swap" and len(debug) > 1:
        other = rng.choice([n for n in debug if n != name])
        data, detail = entry(seed, other), f"replaced by {other}"
    else:
        data, detail = None, "removed from the archive"
    write_zip(d / "input.pt", replace_entry(seed, name, data))
    return Mutation(f"{seed.name}.pt: {name} {detail}")


# ---- other entries ---------------------------------------------------------

@mutator("entry.version", 0.5)
def _entry_version(rng, seeds, d):
    seed = rng.choice(seeds)
    name = entries_matching(seed, lambda n: n.endswith("/version"))[0]
    value = rng.choice(["", "0", "1", "2", "99", "-1", "3\x00", "abc", "18446744073709551616",
                        " 3", "3\n4", "9" * 1000, "0x3", "3.5", "\xff"])
    write_zip(d / "input.pt", replace_entry(seed, name, value.encode("latin-1")))
    return Mutation(f"{seed.name}.pt: {name} set to {value!r}")


@mutator("entry.storage", 1)
def _entry_storage(rng, seeds, d):
    seed = rng.choice(seeds)
    name = rng.choice(entries_matching(
        seed, lambda n: re.search(r"/(data|constants)/\d+$", n) is not None))
    data = entry(seed, name)
    kind = rng.choice(["empty", "half", "one-short", "one-more", "ten-times"])
    new = {"empty": b"", "half": data[:len(data) // 2], "one-short": data[:-1],
           "one-more": data + b"\x01", "ten-times": data * 10}[kind]
    write_zip(d / "input.pt", replace_entry(seed, name, new))
    return Mutation(f"{seed.name}.pt: tensor storage {name} ({len(data)} bytes) made "
                    f"{len(new)} bytes ({kind})")


# ---- zip structure -----------------------------------------------------------

@mutator("zip.bomb", 1)
def _zip_bomb(rng, seeds, d):
    seed = rng.choice(seeds)
    mib = rng.choice([256, 512, 1024, 2048, 4095])
    payload, crc = deflate_bomb(mib)
    names = [n for n, _ in seed.entries] + [f"{seed.name}/extra/bomb.bin"]
    target = rng.choice(names)
    honest = rng.random() < 0.6  # else the sizes claim the original entry's size
    entries = [RawEntry(n, data) for n, data in seed.entries]
    small = len(dict(seed.entries).get(target, b"x"))
    bomb = RawEntry(target, payload, method=8, crc=crc,
                    usize=mib * MIB if honest else small)
    if target in dict(seed.entries):
        entries = [bomb if e.name == target else e for e in entries]
    else:
        entries.insert(rng.randrange(len(entries) + 1), bomb)
    write_raw_zip(d / "input.pt", entries)
    claim = "claiming its size" if honest else f"claiming {small} bytes"
    return Mutation(f"{seed.name}.pt: {target} is a DEFLATE stream of {len(payload)} bytes "
                    f"inflating to {mib} MiB of zeros, {claim}")


@mutator("zip.duplicate", 1)
def _zip_duplicate(rng, seeds, d):
    """A second record of a name the archive has (libtorch's binary search
    may read either), sometimes differing in case, before or after it."""
    seed = rng.choice(seeds)
    entries = [RawEntry(n, data) for n, data in seed.entries]
    original = rng.choice(entries)
    name = original.name
    if rng.random() < 0.3:
        name = name.upper() if name != name.upper() else name.lower()
    payload = rng.choice([b"", b"\0" * 4, os.urandom(log_int(rng, 1, 4096)),
                          original.payload[: len(original.payload) // 2]])
    where = rng.choice(["after", "before", "end"])
    at = entries.index(original) + (1 if where == "after" else 0)
    entries.insert(len(entries) if where == "end" else at, RawEntry(name, payload))
    write_raw_zip(d / "input.pt", entries)
    return Mutation(f"{seed.name}.pt: a second record '{name}' of {len(payload)} bytes "
                    f"{where} '{original.name}'")


@mutator("export.long-constants", 0.5)
def _export_long_constants(rng, seeds, d):
    """A genuine export that deflates well: a literal list of n zeros in its
    code (torch.jit.save compresses code and debug records). Must load."""
    import torch
    n = rng.choice([100, 1000, 6000, 9000])
    src = d / "long_constants.py"
    src.write_text("import torch\n\n\nclass M(torch.nn.Module):\n"
                   "    def forward(self, x):\n        return x + torch.tensor(["
                   + ", ".join(["0"] * n) + "]).sum()\n")
    sys.path.insert(0, str(d))
    try:
        module = __import__("long_constants")
        torch.jit.script(module.M()).save(str(d / "input.pt"))
    finally:
        sys.path.remove(str(d))
        sys.modules.pop("long_constants", None)
    return Mutation(f"a genuine export whose code holds a list of {n} zeros")


@mutator("zip.lies", 1.5)
def _zip_lies(rng, seeds, d):
    seed = rng.choice(seeds)
    entries = [RawEntry(n, data) for n, data in seed.entries]
    e = rng.choice(entries)
    kind = rng.choice(["usize-huge", "usize-small-deflate", "csize-past-eof", "offset-past-eof",
                       "offset-into-other", "eocd-count", "eocd-cd-offset", "bad-crc",
                       "both-headers-lie"])
    count = offset = None
    if kind == "usize-huge":
        e.cd_usize = rng.choice([0xFFFFFFFF, 0x7FFFFFFF, 2**31 + 7, len(e.payload) * 1000 + 1])
        detail = f"central directory gives {e.name} uncompressed size {e.cd_usize}"
    elif kind == "usize-small-deflate":
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        raw = e.payload or b"x" * 100
        e.payload, e.method, e.crc, e.usize = c.compress(raw) + c.flush(), 8, zlib_crc(raw), len(raw)
        e.cd_usize = rng.randrange(max(1, len(raw)))
        detail = (f"{e.name} DEFLATEd ({len(raw)} bytes), central directory claims "
                  f"{e.cd_usize}")
    elif kind == "csize-past-eof":
        e.cd_csize = rng.choice([0xFFFFFFFF, len(seed.data) + 1, 2**31])
        detail = f"central directory gives {e.name} compressed size {e.cd_csize}"
    elif kind == "offset-past-eof":
        e.cd_offset = rng.choice([0xFFFFFFFF, len(seed.data) + 10, len(seed.data) - 3])
        detail = f"central directory puts {e.name}'s local header at {e.cd_offset}"
    elif kind == "offset-into-other":
        e.cd_offset = rng.choice([0, 1, 30, 64, len(seed.data) // 2])
        detail = f"central directory puts {e.name}'s local header at {e.cd_offset}"
    elif kind == "eocd-count":
        count = rng.choice([0, 1, len(entries) - 1, len(entries) + 1, 0xFFFF])
        detail = f"end record counts {count} entries (of {len(entries)})"
    elif kind == "eocd-cd-offset":
        offset = rng.choice([0, 1, 0xFFFFFFFF, len(seed.data) // 2])
        detail = f"end record puts the central directory at {offset}"
    elif kind == "bad-crc":
        e.crc = zlib_crc(e.payload) ^ (1 << rng.randrange(32))
        detail = f"{e.name}'s CRC is wrong ({e.crc:08x})"
    else:
        e.usize = e.cd_usize = rng.choice([0, 0xFFFFFFFF, len(e.payload) + 1])
        detail = f"both headers give STORED {e.name} ({len(e.payload)} bytes) size {e.usize}"
    write_raw_zip(d / "input.pt", entries, eocd_count=count, eocd_cd_offset=offset)
    return Mutation(f"{seed.name}.pt rewritten by hand: {detail}")


@mutator("zip.entries", 1.5)
def _zip_entries(rng, seeds, d):
    seed = rng.choice(seeds)
    root = seed.entries[0][0].split("/")[0]
    entries = list(seed.entries)
    kind = rng.choice(["many", "many", "long-name", "duplicate", "drop", "reorder", "deep-path",
                       "odd-names", "directory"])
    if kind == "many":
        n = log_int(rng, 1000, 65000)
        extra = [(f"{root}/{rng.choice(['extra', 'fz', 'code/__torch__'])}/f{i}", b"x")
                 for i in range(n)]
        at = rng.randrange(len(entries) + 1)
        entries[at:at] = extra
        detail = f"{n} one-byte entries like {extra[0][0]} inserted at {at}"
    elif kind == "long-name":
        n = log_int(rng, 1000, 65000)
        entries.insert(rng.randrange(len(entries) + 1), (f"{root}/extra/" + "n" * n, b"x"))
        detail = f"an entry with a {n}-character name"
    elif kind == "duplicate":
        i = rng.randrange(len(entries))
        content = rng.choice([b"", b"garbage", entries[i][1][::-1]])
        at = rng.choice([i, i + 1, len(entries)])
        entries.insert(at, (entries[i][0], content))
        detail = f"a second {entries[i][0]} ({content[:16]!r}) inserted at {at}"
    elif kind == "drop":
        i = rng.randrange(len(entries))
        detail = f"{entries[i][0]} removed"
        del entries[i]
    elif kind == "reorder":
        rng.shuffle(entries)
        detail = "entries reordered: " + ", ".join(n for n, _ in entries)
    elif kind == "deep-path":
        n = log_int(rng, 100, 30000)
        entries.insert(rng.randrange(len(entries) + 1), (f"{root}/" + "a/" * n + "x", b"x"))
        detail = f"an entry {n} directories deep"
    elif kind == "odd-names":
        name = rng.choice(["../../evil", "/abs/evil", f"{root}/../../evil", f"{root}/x\x00y",
                           "", f"{root}//data.pkl", f"{root}\\code\\x.py", "\udcff"])
        entries.insert(rng.randrange(len(entries) + 1), (name, b"x"))
        detail = f"an entry named {name!r}"
    else:
        name = rng.choice([f"{root}/code/", f"{root}/data/", f"{root}/extra/d/", f"{root}/"])
        entries.insert(rng.randrange(len(entries) + 1), (name, b"not empty"))
        detail = f"a directory entry {name!r} with content"
    write_raw_zip(d / "input.pt", [RawEntry(n, data) for n, data in entries])
    return Mutation(f"{seed.name}.pt rewritten by hand: {clip(detail, 300)}")


# ---- odd kinds of file -------------------------------------------------------

def _file_kind(what, setup=(), input="input.pt", archive=False):
    def make(rng, seeds, d):
        copy_seed(seeds[0], d, "archive.pt")  # a valid archive beside, for links
        return Mutation(what, input=input, setup=list(setup), archive=archive)
    return make


for _name, _args in {
    "file.fifo": dict(what="the input is a FIFO nobody writes to", setup=["mkfifo input.pt"]),
    "file.directory": dict(what="the input is a directory", setup=["mkdir input.pt"]),
    "file.dev-zero": dict(what="the input is /dev/zero", input="/dev/zero"),
    "file.symlink-loop": dict(what="the input is a symlink loop",
                              setup=["ln -s loop.pt input.pt", "ln -s input.pt loop.pt"]),
    "file.dangling-symlink": dict(what="the input is a dangling symlink",
                                  setup=["ln -s missing.pt input.pt"]),
    "file.symlink": dict(what="the input is a symlink to a valid archive (must succeed)",
                         setup=["ln -s archive.pt input.pt"]),
    "file.empty": dict(what="the input is an empty file", setup=[": > input.pt"],
                       archive=True),
}.items():
    mutator(_name, 0.2)(_file_kind(**_args))


# ---- bad command lines (on a valid archive) ------------------------------------

DEFAULT_TAIL = ["-o", "out.pt", "--report-json", "report.json"]


def _argv(what, args: Callable[[random.Random], List[str]], setup=()):
    def make(rng, seeds, d):
        copy_seed(seeds[0], d)
        argv = args(rng)
        return Mutation(f"{what}: {display_args(argv)}", argv=argv, setup=list(setup),
                        archive=False)
    return make


def _bound(values):
    return lambda rng: ["input.pt", *DEFAULT_TAIL, "--bound", rng.choice(values)]


for _name, (_what, _args, *_setup) in {
    "argv.empty-output": ("-o ''", lambda rng: ["input.pt", "-o", "",
                                               "--report-json", "report.json"]),
    "argv.bound-space-in-value": ("--bound 'x= 5'", _bound(["x= 5", "x =5", " x=5"])),
    "argv.bound-trailing-space": ("--bound 'x=5 '", _bound(["x=5 ", "x=5\t", "x=5\n"])),
    "argv.bound-no-name": ("--bound '=5'", _bound(["=5", "=", ":12=5"])),
    "argv.bound-no-value": ("--bound 'x='", _bound(["x=", "x", "x=="])),
    "argv.bound-unmatched": ("a --bound name matching nothing",
                             _bound(["no_such_variable=5", "nope.py:3=5", "model.py:999999=5"])),
    "argv.bound-odd-number": ("an odd --bound number", _bound(
        ["x=-1", "x=0", "x=99999999999999999999999", "x=0x10", "x=5.5", "x=1e3", "x=5=6",
         "x=+5", "x=\uff15", "x=9223372036854775807"])),
    "argv.report-and-inference": ("--report=..., --inference", lambda rng: [
        "input.pt", *DEFAULT_TAIL, *rng.choice([["--inference"], ["--report=full"],
                                                ["--report=short"], ["--report=bogus"],
                                                ["--report="], ["--inference", "--report"],
                                                ["--inference", "--padded-outputs"]])]),
    "argv.method-repeated": ("--method forward twice", lambda rng: [
        "input.pt", *DEFAULT_TAIL, "--method", "forward", "--method", "forward"]),
    "argv.method-odd": ("an odd --method name", lambda rng: [
        "input.pt", *DEFAULT_TAIL, "--method", rng.choice(["", "forward ", "__init__",
                                                          "weight", "scale.forward", "\xe9"])]),
    "argv.unknown-option": ("an unknown or incomplete option", lambda rng: [
        "input.pt", *DEFAULT_TAIL, *rng.choice([["--frobnicate"], ["-x"], ["---"], ["--"],
                                                ["--bound"], ["--method"], ["--report-json"],
                                                ["--output=out2.pt"], ["-"], ["--passes"]])]),
    "argv.output-is-input": ("-o the input itself", lambda rng: [
        "input.pt", "-o", rng.choice(["input.pt", "./input.pt", "alias.pt", "link.pt"]),
        "--report-json", "report.json"], "ln input.pt alias.pt", "ln -s input.pt link.pt"),
    "argv.output-missing-dir": ("-o in a missing directory", lambda rng: [
        "input.pt", "-o", rng.choice(["missing/out.pt", "missing/deeper/out.pt",
                                      "input.pt/out.pt"]), "--report-json", "report.json"]),
    "argv.output-is-dir": ("-o an existing directory", lambda rng: [
        "input.pt", "-o", rng.choice(["outdir", ".", "outdir/"]),
        "--report-json", "report.json"], "mkdir outdir"),
    "argv.report-missing-dir": ("--report-json in a missing directory", lambda rng: [
        "input.pt", "-o", "out.pt", "--report-json",
        rng.choice(["missing/r.json", "input.pt/r.json", ""])]),
    "argv.passes-odd": ("an odd --passes list", lambda rng: [
        "input.pt", *DEFAULT_TAIL, "--passes", rng.choice(["", ",", ",,inline", "inline,inline",
                                                           "bound", "inline,,normalize",
                                                           "Inline"])]),
    "argv.load-library-bad": ("--load-library of a non-library", lambda rng: [
        "input.pt", *DEFAULT_TAIL, "--load-library",
        rng.choice(["/dev/null", "input.pt", "missing.so", ""])]),
}.items():
    mutator(_name, 0.2)(_argv(_what, _args, _setup))


# --------------------------------------------------------------------------
# Running one case
# --------------------------------------------------------------------------

def _listing(root: pathlib.Path) -> set:
    """Every path under root (not following symlinks), relative."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            found.add(os.path.relpath(os.path.join(dirpath, n), root))
    return found


def _hash(path: pathlib.Path) -> Optional[str]:
    """sha256 of a regular file (through symlinks); None for anything else."""
    try:
        if not path.is_file():
            return None
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def limited(command: List[str], mem_limit_mb: int) -> List[str]:
    """command under an address-space limit (exec'd: signals reach us unchanged)."""
    if not mem_limit_mb:
        return command
    return ["/bin/sh", "-c", f'ulimit -v {mem_limit_mb * 1024} && exec "$0" "$@"', *command]


def execute(binary, case_dir: pathlib.Path, m: Mutation, timeout: float,
            mem_limit_mb: int = 4096, oracle=None) -> Outcome:
    """Runs the binary on the case in case_dir and records what it did."""
    made = _listing(case_dir)
    if m.setup:
        subprocess.run(["/bin/sh", "-ec", "\n".join(m.setup)], cwd=case_dir, check=True)
    input_path = case_dir / m.input
    before_hash = _hash(input_path)
    before = _listing(case_dir)
    command = [str(binary), *m.command()]
    start = time.monotonic()
    proc = subprocess.Popen(limited(command, mem_limit_mb), cwd=case_dir,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the group of this one child
        out, err = proc.communicate()
        rc = None
    elapsed = time.monotonic() - start
    after = _listing(case_dir)
    outcome = Outcome(
        command=command, returncode=rc, elapsed=elapsed,
        stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
        new_files=sorted(after - before),
        tmp_files=sorted(p for p in after if ".tmp." in os.path.basename(p)),
        input_modified=before_hash is not None and _hash(input_path) != before_hash,
        setup_files=sorted(before - made))
    if rc == 1 and m.archive and before_hash is not None and oracle is not None:
        outcome.oracle = oracle.check(input_path)
    return outcome


# --------------------------------------------------------------------------
# The torch oracle: does torch.jit.load accept the input?
# --------------------------------------------------------------------------

def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _oracle_check(torch, path: str, timeout: float, mem_limit_mb: int) -> dict:
    """torch.jit.load(path) in a forked child: loads, rejects, crash or hang."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only this thread, torch already imported
        os.close(r)
        message = "loads"
        try:
            if mem_limit_mb:
                limit = _vm_bytes() + mem_limit_mb * MIB
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            torch.jit.load(path)
        except BaseException as e:  # noqa: B902 -- anything torch raises is a refusal
            lines = str(e).strip().splitlines()
            message = "rejects: " + (lines[0] if lines else type(e).__name__)
        os.write(w, message.encode("utf-8", "replace")[:4000])
        os._exit(0)
    os.close(w)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            return {"verdict": "hang", "detail": f"torch.jit.load still running after {timeout} s"}
        time.sleep(0.01)
    message = os.read(r, 8192).decode("utf-8", "replace")
    os.close(r)
    if os.WIFSIGNALED(status):
        return {"verdict": "crash",
                "detail": f"torch.jit.load killed by {signal.Signals(os.WTERMSIG(status)).name}"}
    if message == "loads":
        return {"verdict": "loads", "detail": "torch.jit.load succeeds"}
    return {"verdict": "rejects", "detail": message[len("rejects: "):]}


def oracle_server(timeout: float, mem_limit_mb: int) -> None:
    """Reads JSON paths from stdin, answers one JSON verdict line each."""
    import torch
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)  # torch's own prints must not corrupt the protocol
    os.dup2(null, 2)
    for line in sys.stdin:
        protocol.write(json.dumps(_oracle_check(torch, json.loads(line), timeout,
                                                mem_limit_mb)) + "\n")


class TorchOracle:
    """Client of one oracle_server process (one per worker thread)."""

    def __init__(self, timeout: float, mem_limit_mb: int):
        self.timeout, self.mem_limit_mb = timeout, mem_limit_mb
        self.proc = None

    def _start(self):
        self.proc = subprocess.Popen(
            [sys.executable, str(pathlib.Path(__file__).resolve()), "--oracle-server",
             "--timeout", str(self.timeout), "--mem-limit", str(self.mem_limit_mb)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)

    def check(self, path: pathlib.Path) -> dict:
        for _ in range(2):
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            try:
                self.proc.stdin.write(json.dumps(str(path)) + "\n")
                self.proc.stdin.flush()
                line = self.proc.stdout.readline()
                if line:
                    return json.loads(line)
            except OSError:
                pass
            self.close()
        return {"verdict": "unknown", "detail": "the torch helper process died"}

    def close(self):
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
            self.proc = None


# --------------------------------------------------------------------------
# The campaign
# --------------------------------------------------------------------------

@dataclasses.dataclass
class CaseResult:
    id: int
    mutator: str
    what: str
    problems: List[str]
    outcome: Outcome
    saved: Optional[str] = None

    @property
    def primary(self) -> str:
        return self.problems[0] if self.problems else "ok"


def schedule(seed: int, ids, names: List[str]) -> Dict[int, str]:
    """The mutator of each case: every one once (a seeded order), then by weight."""
    order = list(names)
    random.Random(f"{seed}/order").shuffle(order)
    weights = [MUTATORS[n][1] for n in names]
    return {i: order[i] if i < len(order)
            else random.Random(f"{seed}/pick/{i}").choices(names, weights)[0] for i in ids}


def _save(result: CaseResult, case_dir: pathlib.Path, m: Mutation, out: pathlib.Path,
          rerun: str, mem_limit_mb: int, binary) -> str:
    """Writes the reproducer of a non-ok case under out/<class>/; rerun: the
    cli_fuzz.py options that regenerate it."""
    o = result.outcome
    dest = out / result.primary / f"case{result.id:05d}-{result.mutator}"
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "files").mkdir(parents=True)
    for rel in sorted(_listing(case_dir)):
        p = case_dir / rel
        if p.is_file() and not p.is_symlink() and rel not in o.new_files + o.setup_files:
            (dest / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dest / "files" / rel)
    (dest / "stdout.txt").write_text(o.stdout)
    (dest / "stderr.txt").write_text(o.stderr)
    args = shlex.join(m.command())
    limit = f"ulimit -v {mem_limit_mb * 1024}\n" if mem_limit_mb else ""
    (dest / "repro.sh").write_text(
        "#!/bin/sh\n"
        f"# case {result.id}, mutator {result.mutator}; regenerate: cli_fuzz.py {rerun}\n"
        f"# {result.what.replace(chr(10), ' ')}\n"
        f"# classified: {', '.join(result.problems)}\n"
        "set -e\n"
        'files=$(cd "$(dirname "$0")/files" && pwd)\n'
        "work=$(mktemp -d)\n"
        'cp -R "$files/." "$work/"\n'
        'cd "$work"\n'
        + "".join(line + "\n" for line in m.setup) + limit
        + f'exec "${{STATICIFY:-{binary}}}" {args}\n')
    (dest / "repro.sh").chmod(0o755)
    info = {"id": result.id, "regenerate": rerun, "mutator": result.mutator, "what": result.what,
            "problems": result.problems, "command": o.command,
            "setup": m.setup, "returncode": o.returncode, "elapsed_s": round(o.elapsed, 3),
            "new_files": o.new_files, "tmp_files": o.tmp_files,
            "input_modified": o.input_modified, "torch": o.oracle}
    (dest / "case.json").write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n")
    return str(dest)


@dataclasses.dataclass
class Report:
    results: List[CaseResult]
    elapsed: float
    seed: int
    jobs: int
    out: pathlib.Path

    def counts(self) -> Dict[str, int]:
        c = collections.Counter(r.primary for r in self.results)
        return {k: c.get(k, 0) for k in CLASSES}

    def fatal(self) -> List[CaseResult]:
        return [r for r in self.results if r.primary in FATAL]

    def summary(self, examples: int = 3) -> str:
        counts = self.counts()
        lines = [f"staticify CLI fuzz: {len(self.results)} cases, seed {self.seed}, "
                 f"{self.jobs} jobs, {self.elapsed:.1f} s", "",
                 f"  {'class':<20}{'cases':>7}{'  (any)':>8}"]
        anywhere = collections.Counter(p for r in self.results for p in r.problems)
        for k in CLASSES:
            mark = "  *" if k in FATAL and counts[k] else ""
            lines.append(f"  {k:<20}{counts[k]:>7}{anywhere.get(k, ''):>8}{mark}")
        lines += ["", "  (any): cases with the problem, as their first one or not; "
                  "*: fatal", "", "  per mutator (cases: class counts)"]
        per = collections.defaultdict(collections.Counter)
        for r in self.results:
            per[r.mutator][r.primary] += 1
        for name in sorted(per):
            total = sum(per[name].values())
            rest = ", ".join(f"{k} {per[name][k]}" for k in CLASSES
                             if per[name][k] and k != "ok")
            lines.append(f"    {name:<28}{total:>5}  {rest}")
        refused = collections.Counter(
            documented_limit(r.outcome.stderr) for r in self.results
            if "refused-but-loads" in r.problems)
        if refused:
            lines += ["", "  refused though torch.jit.load loads them, by the row of "
                      "docs/reliability.md's Limits table they name"]
            for row, n in refused.most_common():
                lines.append(f"    {row or '(none: refused-undocumented)':<40}{n:>5}")
        bad = [r for r in self.results if r.primary != "ok"]
        if bad:
            lines += ["", f"  examples (all {len(bad)} under {self.out}):"]
            for k in CLASSES[:-1]:
                for r in [r for r in bad if r.primary == k][:examples]:
                    o = r.outcome
                    lines.append(f"    [{k}] case {r.id} {r.mutator}: {clip(r.what, 200)}")
                    status = f"exit {o.returncode}" if o.returncode is not None else "timed out"
                    extra = ""
                    if "leftover" in r.problems:
                        extra = f"; left {', '.join(o.tmp_files or o.new_files)}"
                    lines.append(f"        {status} after {o.elapsed:.1f} s{extra}; stderr: "
                                 f"{short(o.stderr, 200) if o.stderr else '(none)'}")
                    if o.oracle:
                        lines.append(f"        torch: {o.oracle['verdict']}: "
                                     f"{clip(o.oracle['detail'], 120)}")
                    lines.append(f"        {r.saved}/repro.sh")
        return "\n".join(lines)


def default_binary() -> pathlib.Path:
    bin_dir = os.environ.get("STATICIFY_BIN")
    return (pathlib.Path(bin_dir) if bin_dir else ROOT / "build" / "bin") / "staticify"


def snapshot_binary(binary: pathlib.Path, directory: pathlib.Path) -> pathlib.Path:
    """A private copy of the binary, so that a rebuild during the campaign (the file
    missing or half written for a moment) cannot pass for staticify's behaviour."""
    copy = directory / binary.name
    for _ in range(30):
        try:
            shutil.copy2(binary, copy)
            if subprocess.run([str(copy), "--version"], capture_output=True,
                              timeout=60).returncode == 0:
                return copy
        except (OSError, subprocess.TimeoutExpired):
            pass
        time.sleep(2)
    raise RuntimeError(f"{binary} does not run (`--version` fails)")


def run(cases: int = 100, seed: int = 1, binary=None, out=None, jobs: int = 2,
        timeout: float = 20, mem_limit_mb: int = 4096, case_ids=None, mutators=None,
        log=print) -> Report:
    """Runs a campaign and returns its report (the reproducers are under report.out)."""
    binary = pathlib.Path(binary or default_binary()).resolve()
    out = pathlib.Path(out or tempfile.mkdtemp(prefix="staticify-cli-fuzz-"))
    out.mkdir(parents=True, exist_ok=True)
    names = list(mutators or MUTATORS)
    unknown = set(names) - set(MUTATORS)
    if unknown:
        raise ValueError(f"unknown mutators {sorted(unknown)}; known: {', '.join(MUTATORS)}")
    ids = sorted(case_ids) if case_ids else range(cases)
    plan = schedule(seed, ids, names)
    start = time.monotonic()
    work = pathlib.Path(tempfile.mkdtemp(prefix="staticify-cli-fuzz-work-"))
    local, oracles, lock = threading.local(), [], threading.Lock()

    def one(i: int) -> CaseResult:
        if not hasattr(local, "oracle"):
            local.oracle = TorchOracle(timeout, mem_limit_mb)
            with lock:
                oracles.append(local.oracle)
        name = plan[i]
        case_dir = pathlib.Path(tempfile.mkdtemp(prefix=f"case{i:05d}-", dir=work))
        m = MUTATORS[name][0](random.Random(f"{seed}/case/{i}"), seeds, case_dir)
        outcome = execute(snapshot, case_dir, m, timeout, mem_limit_mb, local.oracle)
        outcome.command[0] = str(binary)  # the reproducers name the real one
        result = CaseResult(i, name, m.what, classify(outcome), outcome)
        if result.problems:
            rerun = f"--seed {seed} --case {i}" + "".join(f" --mutator {n}"
                                                          for n in mutators or [])
            result.saved = _save(result, case_dir, m, out, rerun, mem_limit_mb, binary)
        shutil.rmtree(case_dir, ignore_errors=True)
        return result

    try:
        snapshot = snapshot_binary(binary, work)
        seeds = make_seeds(work / "seeds")
        for s in seeds:  # a baseline: the unmutated seeds must go through
            o = execute(snapshot, s.path.parent, Mutation("seed", input=s.path.name,
                        argv=[s.path.name, "-o", f"{s.name}.out.pt"]), timeout, mem_limit_mb)
            if o.returncode != 0:
                log(f"warning: the binary fails on the valid seed {s.name}.pt "
                    f"(exit {o.returncode}): {clip(o.stderr.strip(), 300)}")
        log(f"seeds {', '.join(s.name for s in seeds)} ready in "
            f"{time.monotonic() - start:.1f} s; {len(ids)} cases, {jobs} jobs, "
            f"binary {binary} (copied)")
        results = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            for r in pool.map(one, ids):
                results.append(r)
                if r.primary != "ok":
                    rc = r.outcome.returncode
                    log(f"  case {r.id} {r.mutator}: {', '.join(r.problems)} "
                        f"({'timeout' if rc is None else f'exit {rc}'}, "
                        f"{r.outcome.elapsed:.1f} s)")
                if len(results) % 50 == 0:
                    log(f"  ... {len(results)}/{len(ids)} cases, "
                        f"{time.monotonic() - start:.0f} s")
    finally:
        for o in oracles:
            o.close()
        shutil.rmtree(work, ignore_errors=True)
    return Report(results, time.monotonic() - start, seed, jobs, out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                epilog="See the module docstring for the classes and mutators.")
    p.add_argument("--cases", type=int, default=300, help="number of cases (default 300)")
    p.add_argument("--seed", type=int, default=1, help="campaign seed (default 1)")
    p.add_argument("--binary", help="staticify binary (default: $STATICIFY_BIN/staticify, "
                   "else build/bin/staticify)")
    p.add_argument("--out", help="directory for the non-ok cases (default: a new temp dir)")
    p.add_argument("--jobs", type=int, default=2, help="cases run in parallel (default 2)")
    p.add_argument("--timeout", type=float, default=20,
                   help="seconds before a run is a hang (default 20)")
    p.add_argument("--mem-limit", type=int, default=4096,
                   help="address-space limit of each run in MiB, 0 for none (default 4096)")
    p.add_argument("--case", type=int, action="append", dest="case_ids",
                   help="run only this case id (repeatable): reproduces a case of --seed")
    p.add_argument("--mutator", action="append", dest="mutators",
                   help="use only this mutator (repeatable); --list-mutators lists them")
    p.add_argument("--list-mutators", action="store_true")
    p.add_argument("--oracle-server", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.oracle_server:
        oracle_server(args.timeout, args.mem_limit)
        return 0
    if args.list_mutators:
        for name, (_, weight) in MUTATORS.items():
            print(f"{name:<28} weight {weight}")
        return 0
    report = run(args.cases, args.seed, args.binary, args.out, args.jobs, args.timeout,
                 args.mem_limit, args.case_ids, args.mutators)
    print(report.summary())
    return 1 if report.fatal() else 0


if __name__ == "__main__":
    sys.exit(main())
