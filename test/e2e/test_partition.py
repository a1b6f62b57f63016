"""The partition (static regions, dynamic islands) in the report and as a
Graphviz picture, through the real binary."""
import shutil
import subprocess

import pytest
import torch

import bounded_models as bm
import sampler


def partition(report, when):
    return report["methods"][0][when]["partition"]


def test_unrewritten_sampler_has_its_dynamic_island_where_the_seed_syncs(staticify, save):
    path = save(sampler.BalancedSampler())
    report = staticify.report(path, "--passes", "inline,normalize")
    islands = [s for s in partition(report, "after") if s["kind"] == "dynamic"]
    assert islands
    ops = {op for s in islands for op in s["ops"]}
    for op in ("aten::where", "aten::numel", "prim::min", "prim::If", "aten::randperm",
               "aten::slice", "aten::index", "aten::cat"):
        assert op in ops, op
    lines = {line for s in islands for line in range(s["lines"][0], s["lines"][1] + 1)}
    assert {25, 27, 29, 34, 36, 38} <= lines  # where, min, if, randperm, index, cat
    assert all(s["file"].endswith("sampler.py") for s in islands)


def test_rewritten_sampler_is_one_static_region(staticify, save):
    path = save(sampler.BalancedSampler())
    report = staticify.report(path)
    assert [s["kind"] for s in partition(report, "before")].count("dynamic") >= 1
    after = partition(report, "after")
    assert len(after) == 1 and after[0]["kind"] == "static" and after[0]["number"] == 1
    text = staticify(path, "--report").stdout
    assert "partition after: 1 static region, 0 dynamic islands" in text


def test_a_genuinely_dynamic_output_stays_an_island_between_static_regions(staticify, save):
    class Mixed(torch.nn.Module):
        def forward(self, x):
            total = x[x > 0].sum()          # rewritable: a masked sum
            u = torch.unique(x.round())     # returned: cut to its count
            return total * 2, u + 1
    path = save(Mixed())
    after = partition(staticify.report(path), "after")
    kinds = [s["kind"] for s in after]
    assert "static" in kinds and "dynamic" in kinds
    island_ops = {op for s in after if s["kind"] == "dynamic" for op in s["ops"]}
    assert "aten::Int" in island_ops  # the materialization of the unique


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz is installed by setup.sh")
def test_dot_renders_regions_islands_and_cuts(staticify, save, tmp_path):
    path = save(sampler.BalancedSampler())
    before, after = tmp_path / "before.dot", tmp_path / "after.dot"
    staticify(path, "--passes", "inline,normalize", "--dot", before)
    staticify(path, "--dot", after)
    text = before.read_text()
    assert "dynamic island 1" in text and "static region 1" in text and "legend" in text
    assert "aten::where\\nline 25" in text
    assert "dynamic island" not in after.read_text().replace("legend_dynamic", "") \
        .replace('label="dynamic island"', "")
    for dot in (before, after):
        svg = subprocess.run(["dot", "-Tsvg", str(dot)], capture_output=True, check=True)
        assert b"<svg" in svg.stdout
    cut = tmp_path / "cut.dot"
    staticify(save(bm.UniqueValues(), "u.pt"), "--dot", cut, "--static-forms")
    graph_part = cut.read_text().split("legend_dynamic -> legend_cut")[1]
    assert "#ffd08a" in graph_part  # a materialization node, coloured


def test_dot_takes_one_method_and_its_own_path(staticify, save, tmp_path):
    path = save(sampler.BalancedSampler())
    proc = staticify(path, "--dot", tmp_path / "a.dot", "--method", "forward",
                     "--method", "sample", check=False)
    assert proc.returncode == 2 and "--dot" in proc.stderr
    out = tmp_path / "o.pt"
    proc = staticify(path, "-o", out, "--dot", out, check=False)
    assert proc.returncode == 1 and not out.exists()


class MixedModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = torch.relu(self.lin(x))
        total = h[h > 0].sum()           # rewritable
        u = torch.unique(x.round())      # returned: stays dynamic (cut)
        return total * 2 + h.mean(), u + 1


def test_outline_makes_static_regions_methods_and_matches(staticify, save, tmp_path):
    path = save(MixedModel())
    out = tmp_path / "outlined.pt"
    proc = staticify(path, "-o", out, "--outline")
    assert "is now method 'forward_region_1'" in proc.stderr
    original, result = torch.jit.load(str(path)), torch.jit.load(str(out))
    assert result._c._has_method("forward_region_1")
    assert "forward_region_1" in result.code
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        x = torch.randn(int(torch.randint(0, 9, (1,), generator=gen)), 4, generator=gen)
        a, b = original(x), result(x)
        torch.testing.assert_close(a[0], b[0], equal_nan=True)
        assert torch.equal(a[1], b[1])
