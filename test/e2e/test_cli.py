"""The staticify CLI on real scripted modules: findings, report, output."""
import json
import subprocess

import pytest
import torch

import models
import sampler
from conftest import findings, lines_of


def test_sampler_report_cites_every_dynamic_line_of_the_seed(staticify, save):
    path = save(sampler.BalancedSampler())
    proc = staticify(path, "--report=full")
    expected = lines_of(sampler.__file__,
                        "torch.where(labels == 1)", "torch.where(labels == 0)",
                        "num_pos = min(positive.numel()",
                        "if num_neg < self.sub_sample // 2",
                        "torch.randperm(positive.numel()",
                        "pos_idxs = positive[perm1]")
    for line in expected:
        assert f"sampler.py:{line}:" in proc.stdout, (line, proc.stdout)
    # The roots are the two where(cond); the rest derives from them.
    report = staticify.report(path)
    roots = [f for f in findings(report) if f["role"] == "root"]
    assert [(f["op"], f["location"]["line"]) for f in roots] == [
        ("aten::where", expected[0]), ("aten::where", expected[1])]
    assert "summary of 'forward'" in proc.stdout


def test_report_json_schema(staticify, save):
    path = save(sampler.BalancedSampler())
    report = staticify.report(path)
    assert report["schema"] == "staticify-report" and report["version"] == 1
    assert report["tool"]["name"] == "staticify"
    (method,) = report["methods"]
    assert method["name"] == "forward" and method["inlined"] is True
    assert method["passes"][0] == "inline"
    for key in ("before", "after"):
        s = method[key]
        assert set(s) == {"nodes", "counts", "outputs_static", "static", "partition",
                          "sync_points", "fallback_sync_points", "error_path_sync_points",
                          "ops_per_call"}
        assert s["ops_per_call"] > 0
        assert s["fallback_sync_points"] == 0  # the model has no rank guard
        assert s["error_path_sync_points"] == 0  # nor a branch that only raises
        for seg in s["partition"]:
            assert seg["kind"] in {"static", "dynamic"} and seg["nodes"] > 0
        assert s["counts"]["total"] == sum(
            v for k, v in s["counts"].items() if k != "total")
    assert method["before"]["counts"]["total"] == len(method["findings"])
    # One sync point per root finding: before, the original's; after, those
    # kept or introduced.
    roots = [f for f in method["findings"] if f["role"] == "root"]
    assert method["before"]["sync_points"] == len(roots) > 0
    assert method["after"]["sync_points"] == sum(
        1 for f in roots if f["action"] in ("kept", "introduced"))
    assert method["after"]["outputs_static"] is True
    assert method["after"]["static"] is True  # the bound pass made it static
    ids = {f["id"] for f in method["findings"]}
    for f in method["findings"]:
        assert f["category"] in {"dynamic-shape", "host-sync", "control-flow",
                                 "data-derived"}
        assert f["action"] == "rewritten" and f["rule"] in {"bound", "if-convert", "merge-equal"}
        loc = f["location"]
        assert loc["file"].endswith("sampler.py") and loc["line"] > 0
        assert loc["source"].strip() and loc["column"] >= 1
        assert set(f["causes"]) <= ids
        assert (f["role"] == "root") == (not f["causes"] or
                                         f["op"] == "aten::where")


def _seed002_inputs(gen, trial, dtype):
    """Random operands; the masks are all-false, all-true, then random with
    a density that varies from trial to trial."""
    n = int(torch.randint(1, 200, (1,), generator=gen))
    density = torch.rand((), generator=gen).item()
    keep = (torch.rand(n, generator=gen) < density) if trial >= 2 else \
        torch.full((n,), trial == 1)

    def values():
        if dtype is torch.float32:
            return torch.randn(n, generator=gen)
        return torch.randint(-100, 100, (n,), generator=gen)

    return n, keep, values


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_seed002_examples_become_static_and_match_on_1000_inputs(staticify, save,
                                                                tmp_path, dtype):
    gen = torch.Generator().manual_seed(2)
    for model, name in ((models.Seed002Example1(), "ex1"),
                        (models.Seed002Example2(), "ex2")):
        path = save(model, name=f"{name}.pt")
        out = tmp_path / f"{name}_static.pt"
        staticify(path, "-o", out)
        report = staticify.report(path)
        method = report["methods"][0]
        assert method["before"]["counts"]["total"] > 0
        assert method["after"]["static"] is True, findings(report)
        assert all(f["action"] == "rewritten" for f in findings(report))
        original, result = torch.jit.load(str(path)), torch.jit.load(str(out))
        for trial in range(1000):
            n, keep, values = _seed002_inputs(gen, trial, dtype)
            if name == "ex1":
                # targets != padding_idx (0) is the mask.
                args = (values(), keep.long().reshape(n))
            else:
                # C != -1 is the mask.
                args = (values(), values(), torch.where(keep, 1, -1))
            a, b = original(*args), result(*args)
            assert a.dtype == b.dtype and a.shape == b.shape
            if dtype is torch.float32:
                # Summation order differs: float sums agree to rounding.
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
            else:
                assert torch.equal(a, b), (trial, a, b)


def test_static_cnn_has_no_findings_and_is_written_back_unchanged(staticify, save,
                                                                tmp_path):
    model = models.SmallCNN().eval()
    path = save(model, extra_files={"meta.txt": "keep me"})
    out = tmp_path / "cnn_static.pt"
    proc = staticify(path, "-o", out)
    assert "0 findings" in proc.stderr
    report = staticify.report(path)
    assert findings(report) == []
    assert report["methods"][0]["after"]["static"] is True

    original, result = torch.jit.load(str(path)), torch.jit.load(str(out))
    assert str(result.graph) == str(original.graph)
    assert result.code == original.code
    for (n1, p1), (n2, p2) in zip(original.state_dict().items(),
                                  result.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)
    x = torch.randn(2, 3, 8, 8)
    assert torch.equal(original(x), result(x))

    extra = {"meta.txt": "", "staticify_report.json": ""}
    torch.jit.load(str(out), _extra_files=extra)
    assert extra["meta.txt"] == b"keep me"
    embedded = json.loads(extra["staticify_report.json"])
    assert embedded["version"] == 1 and embedded["output"] == str(out)
    # Atomic save: nothing but the output was written next to it.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cnn_static.pt", "model.pt", "model.pt.report.json"]


def test_findings_in_submodule_loop_and_branch_have_their_own_locations(staticify,
                                                                      save):
    path = save(models.Outer())
    report = staticify.report(path)
    by_line = {(f["op"], f["location"]["line"]) for f in findings(report)
               if f["location"]}
    loop_line, if_line, mask_line = lines_of(
        models.__file__, "for i in range(x.size(0)):", "if bool(row.sum() > 0):",
        "total = total + row[row > 0].sum()")
    assert ("aten::Bool", if_line) in by_line
    assert ("prim::If", if_line) in by_line
    assert ("aten::index", mask_line) in by_line
    for f in findings(report):
        assert f["location"]["file"].endswith("models.py")
    # The loop's trip count is a host-static size: not a finding.
    assert not any(f["location"]["line"] == loop_line for f in findings(report))


def test_no_inline_analyses_only_the_method_itself(staticify, save):
    path = save(models.Outer())
    inlined = staticify.report(path)
    kept = staticify.report(path, "--no-inline")
    assert kept["methods"][0]["inlined"] is False
    assert "inline" not in kept["methods"][0]["passes"]
    # The submodule's body is not analysed: its call is reported instead of
    # what it contains.
    assert {f["op"] for f in findings(kept)} >= {"prim::CallMethod"}
    assert "aten::index" in {f["op"] for f in findings(inlined)}
    assert "aten::index" not in {f["op"] for f in findings(kept)}


def test_several_methods(staticify, save):
    path = save(models.Outer())
    report = staticify.report(path, "--method", "forward", "--method", "count")
    assert [m["name"] for m in report["methods"]] == ["forward", "count"]
    ops = [f["op"] for f in findings(report, "count")
           if f["action"] != "introduced"]
    assert ops == ["aten::nonzero", "aten::size"]


def test_passes_option(staticify, save):
    path = save(models.Outer())
    report = staticify.report(path, "--passes", "normalize")
    assert report["methods"][0]["passes"] == ["normalize"]
    assert report["methods"][0]["inlined"] is False
    proc = staticify(path, "--passes", "inline,bogus", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("staticify: error: unknown pass 'bogus'; known passes: "
                                  "inline, normalize, ")
    assert proc.stderr.strip().endswith("; see 'staticify --help'")


def test_help_and_version(staticify):
    help_text = staticify("--help").stdout
    for option in ("-o", "--report", "--report-json", "--method", "--load-library",
                   "--no-inline", "--passes", "--help", "--version", "examples:",
                   "--dot", "--bound", "--padded-outputs"):
        assert option in help_text, option
    version = staticify("--version").stdout
    assert version.startswith("staticify 0.1.0 (libtorch ")


def test_usage_doc_is_the_help(staticify):
    """docs/usage.md shows --help as the binary prints it (its pass list
    included)."""
    import pathlib
    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "usage.md").read_text()
    block = doc.split("```text\n", 1)[1].split("```", 1)[0]
    assert block == staticify("--help").stdout


def test_custom_op_model_loads_with_load_library(staticify, save, torchvision_library):
    import torchvision

    class Detector(torch.nn.Module):
        def forward(self, boxes: torch.Tensor, scores: torch.Tensor):
            keep = torchvision.ops.nms(boxes, scores, 0.5)
            return boxes[keep]

    path = save(Detector())
    report = staticify.report(path, "--load-library", torchvision_library)
    assert [f["op"] for f in findings(report)
            if f["role"] == "root" and f["action"] != "introduced"] == ["torchvision::nms"]


@pytest.mark.parametrize("args", [["--report"], ["--help"]], ids=["report", "help"])
def test_a_reader_that_closes_the_pipe_is_no_crash(staticify, save, tmp_path, args):
    """`staticify m.pt -o out.pt --report | head -1`: the reader goes (here
    before the first line, so that every write finds the pipe closed); the
    report stops there, the output is written whole, and the exit status is
    0, with no word of a crash."""
    model = save(models.Seed002Example2())
    out = tmp_path / "out.pt"
    command = [str(staticify.path), str(model), "-o", str(out)] + args
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # as `head -1` does once it has its line
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=300) in (0, -13), stderr
    assert "crash" not in stderr and "internal error" not in stderr, stderr
    if args == ["--report"]:
        torch.jit.load(str(out))  # written whole
