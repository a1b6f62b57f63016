"""The differential fuzzer (test/fuzz/differential.py) on a short fixed-seed
run through the real binary, and proofs that its checks can fail (a stand-in
binary that rewrites wrongly, claims static falsely, or crashes)."""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fuzz"))
import differential  # noqa: E402

SEED = 20240
PROGRAMS = 100


def test_short_run(staticify, tmp_path):
    # A bounded bisection keeps the run short when a known binary error
    # (not a failure here) fails many packs.
    stats = differential.run_fuzz(programs=PROGRAMS, seed=SEED, pack=50,
                                  binary=staticify.path, out_dir=tmp_path / "cases",
                                  isolation_runs=12)
    report = differential.summary(stats)
    print(report)
    assert stats["generated"] == PROGRAMS
    # Not vacuous: nearly every program scripts, goes through the binary and
    # runs on inputs; a good part has data-dependent ops that get rewritten.
    assert stats["script_failures"] <= PROGRAMS // 20, report
    assert stats["scripted"] >= 0.9 * PROGRAMS, report
    assert stats["checked"] >= 0.8 * PROGRAMS, report
    assert stats["inputs_run"] >= 3 * stats["checked"], report
    assert stats["rewritten_some"] >= 0.3 * PROGRAMS, report
    assert stats["made_static"] >= 3, report
    assert stats["fuzzer_errors"] == 0, report
    assert stats["wrong_outputs"] == 0, report
    assert stats["contradicted_claims"] == 0, report
    assert stats["crashes"] == 0, report


# A stand-in for staticify, to prove the harness end to end: it copies the
# input archive to -o (MODE "gt-to-ge": with every `>` made `>=`, a wrong
# rewrite), writes a report claiming every method static (or none, for
# "gt-to-ge"), and dies by SIGSEGV (MODE "crash") when given --method f3.
FAKE = """#!{python}
import json, os, signal, sys, zipfile
MODE = {mode!r}
args = sys.argv[1:]
src, out, rep = args[0], args[args.index("-o") + 1], args[args.index("--report-json") + 1]
methods = [args[i + 1] for i, a in enumerate(args) if a == "--method"]
if MODE == "crash" and "f3" in methods:
    os.kill(os.getpid(), signal.SIGSEGV)
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
    for item in zin.infolist():
        data = zin.read(item.filename)
        if MODE == "gt-to-ge" and item.filename.endswith(".py"):
            data = data.replace(b"torch.gt(", b"torch.ge(")
        zout.writestr(item, data)
static = MODE == "claim-static"
json.dump({{"schema": "staticify-report", "version": 1, "methods": [
    {{"name": m, "before": {{"static": False}}, "after": {{"static": static}},
     "findings": []}} for m in methods]}}, open(rep, "w"))
"""


def _fake(tmp_path, mode):
    path = tmp_path / f"fake-{mode}"
    path.write_text(FAKE.format(python=sys.executable, mode=mode))
    path.chmod(0o755)
    return path


def test_harness_reports_wrong_outputs_end_to_end(tmp_path):
    stats = differential.run_fuzz(programs=12, seed=SEED, pack=12,
                                  binary=_fake(tmp_path, "gt-to-ge"),
                                  out_dir=tmp_path / "cases")
    assert stats["wrong_outputs"] > 0, differential.summary(stats)
    assert differential.failed(stats)
    case = next((tmp_path / "cases").glob("wrong-output-*"))
    assert {"program.py", "case.json", "inputs.pt", "repro.py"} <= \
        {p.name for p in case.iterdir()}


def test_harness_reports_false_static_claims_and_crashes(tmp_path):
    stats = differential.run_fuzz(programs=12, seed=SEED, pack=12,
                                  binary=_fake(tmp_path, "claim-static"))
    report = differential.summary(stats)
    # The copy computes what the original does, but most programs keep
    # their data-dependent ops: each such claim is contradicted.
    assert stats["wrong_outputs"] == 0, report
    assert stats["contradicted_claims"] >= 6, report
    stats = differential.run_fuzz(programs=12, seed=SEED, pack=12,
                                  binary=_fake(tmp_path, "crash"))
    report = differential.summary(stats)
    # Bisection isolates the one program the binary dies on.
    assert stats["crashes"] == 1 and stats["binary_ok"] == 11, report
    assert [f["program"] for f in stats["failures"] if f["category"] == "crash"] == [3]


class _Original(torch.nn.Module):
    def forward(self, x, y, t, xi):
        m = t > 0
        return x[m].sum(), (xi[m] * 2).sum()


class _Mutated(torch.nn.Module):
    """The same program with one wrong value: the sum of the unselected
    elements for the integer part."""

    def forward(self, x, y, t, xi):
        m = t > 0
        return x[m].sum(), (xi[~m] * 2).sum()


def _program(shape=(12,)):
    return differential.Program(0, 0, shape, False, [], [], "normal")


def test_checker_reports_a_wrong_output():
    original = torch.jit.script(_Original())
    n_run, _, failure = differential.check_program(
        original, torch.jit.script(_Mutated()), _program(), 6, 0)
    assert failure is not None and n_run >= 1
    assert "values differ" in failure["difference"]
    # The same program against itself passes on every input kind.
    n_run, n_skipped, failure = differential.check_program(
        original, original, _program(), 6, 0)
    assert failure is None and n_run + n_skipped == 6 and n_run >= 5


def test_compare_catches_structure_dtype_shape_and_floats():
    c = differential.compare
    assert c((torch.ones(2),), (torch.ones(2),)) is None
    assert c((torch.ones(2),), [torch.ones(2)]) is not None             # tuple vs list
    assert c(torch.ones(2), torch.ones(2, dtype=torch.float64)) is not None
    assert c(torch.ones(2), torch.ones(3)) is not None
    assert c(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")])) is None
    assert c(torch.tensor([1.0]), torch.tensor([1.0 + 1e-3])) is not None
    assert c(torch.tensor([3]), torch.tensor([4])) is not None
    assert c(3, 3.0) is not None                                         # int vs float
    assert c(2.0, 2.0 + 1e-9) is None


class _NonzeroLeft(torch.nn.Module):
    def forward(self, x, y, t, xi):
        return torch.nonzero(t > 0).sum(), t.sum().item(), t[t > 0]


class _Static(torch.nn.Module):
    def forward(self, x, y, t, xi):
        return torch.where(t > 0, t, torch.zeros_like(t)).sum()


def test_static_claim_checker_flags_data_dependent_ops():
    module = torch.jit.script(_NonzeroLeft())
    ops = differential.dynamic_ops(module.forward.graph)
    names = {o["op"] for o in ops}
    assert "aten::nonzero" in names
    assert "aten::item" in names
    assert "aten::index with a bool mask" in names
    assert not any(o["dead"] for o in ops)
    # A static program has none; where(cond, a, b) is not where(cond).
    static = torch.jit.script(_Static())
    assert differential.dynamic_ops(static.forward.graph) == []


class _Guarded(torch.nn.Module):
    def forward(self, x, t):
        if x.dim() == t.dim():
            return x * t
        return x[: int(t.sum())]


def test_static_claim_checker_allows_only_the_reported_fallback_reads():
    """A guard's fallback (the second branch of an if on host facts) may
    read the host as often as the report's fallback_sync_points says; a read
    anywhere else, or one more, contradicts a static claim."""
    ops = differential.dynamic_ops(torch.jit.script(_Guarded()).forward.graph)
    assert [(o["op"], o["in_else"]) for o in ops] == [("aten::Int of a Tensor", True)]
    assert differential.contradicting(ops, 1) == []
    assert differential.contradicting(ops, 0) == ops
    top = differential.dynamic_ops(torch.jit.script(_NonzeroLeft()).forward.graph)
    assert not any(o["in_else"] for o in top)
    assert differential.contradicting(top, 5) == top


class _RaisesWithValue(torch.nn.Module):
    def forward(self, x, flag: bool):
        if flag:
            raise ValueError("bad: {}".format(int(x.sum())))
        return x * 2


def test_static_claim_checker_allows_only_the_reported_error_path_reads():
    """A read in a branch that only raises is allowed as often as the
    report's error_path_sync_points says, and not as a guard fallback."""
    ops = differential.dynamic_ops(torch.jit.script(_RaisesWithValue()).forward.graph)
    assert [(o["op"], o["error_path"]) for o in ops] == [("aten::Int of a Tensor", True)]
    assert differential.contradicting(ops, 0, 1) == []
    assert differential.contradicting(ops, 0, 0) == ops
    top = differential.dynamic_ops(torch.jit.script(_NonzeroLeft()).forward.graph)
    assert differential.contradicting(top, 0, 5) == top


def test_static_claim_checker_sees_outputs_that_vary_with_data():
    """The second check of a static claim: on inputs of one shape, a static
    method's output shapes (and host scalars) cannot differ."""
    selecting = torch.jit.script(_NonzeroLeft())
    signatures = []
    differential.check_program(selecting, selecting, _program(), 6, 0, signatures)
    assert len({s for _, s in signatures}) > 1
    assert "empty" not in {k for k, _ in signatures}
    static = torch.jit.script(_Static())
    signatures = []
    differential.check_program(static, static, _program(), 6, 0, signatures)
    assert len(signatures) == 5 and len({s for _, s in signatures}) == 1


class _DeadNonzero(torch.nn.Module):
    def forward(self, t):
        unused = self.positions(t)  # noqa: F841 - dead code on purpose
        return t * 2.0, self.positions(t)[1]

    def positions(self, t):
        return torch.nonzero(t > 0), t.sum()


def test_static_claim_checker_sees_calls_and_dead_code():
    """A call keeps its callee's ops in the saved graph, even when its result
    is unused; the checker inlines a copy to see them and says which are dead
    code (the nonzero of the second call is dead too: only t.sum() is used)."""
    module = torch.jit.script(_DeadNonzero())
    ops = differential.dynamic_ops(module.forward.graph)
    assert [o["op"] for o in ops] == ["aten::nonzero", "aten::nonzero"]
    assert all(o["dead"] for o in ops)
    assert differential.ops_summary(ops) == "aten::nonzero (dead code)"


def test_generated_programs_are_deterministic_and_standalone(tmp_path):
    """(seed, index) regenerates a program; its standalone form (what a
    failing case's program.py holds) scripts and computes what the packed
    method computes."""
    for index in range(5):
        a = differential.generate_program(SEED, index)
        b = differential.generate_program(SEED, index)
        assert a.method_source() == b.method_source() and a.shape == b.shape
        path = tmp_path / f"program{index}.py"
        path.write_text(a.standalone_source())
        module = torch.jit.script(differential.import_source(path, path.stem).Program())
        n_run, _, failure = differential.check_program(module.forward, module, a, 3, 0)
        assert failure is None


def test_batch_fuzzer_short_run(staticify):
    """test/fuzz/batch_differential.py on a fixed seed: the programs made
    static get `f<i>_batched`, and each row of its results equals the
    original run on that row alone."""
    import batch_differential
    stats = batch_differential.run_batch_fuzz(programs=120, seed=11, rows=3,
                                              binary=staticify.path)
    assert stats["crashes"] == 0 and stats["wrong"] == 0, stats
    # Not vacuous: a good part of the programs batch and run on rows.
    assert stats["batched"] >= 20 and stats["rows compared"] >= 100, stats
