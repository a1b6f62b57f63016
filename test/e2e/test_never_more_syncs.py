"""No rewrite leaves more host-sync points than the original graph had.

Every model the tests know (the seed sampler, seed 002's examples and the
other models of models.py, the rewrite corpus and the bounded corpus), with
and without --padded-outputs: the report's sync points after rewriting (the
root findings kept, plus any a rewrite introduced) are at most those before
(every root finding). This is what the report's users see; RewritePolicy.h is
the code that keeps it so."""
import json
import pathlib

import pytest
import torch

from conftest import sync_points
from report_snapshot import VARIANTS, script_all

# Both variants (with and without --padded-outputs): the command runs in
# this process (conftest.InProcess), a run per model and variant.
CHECKED = VARIANTS


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    return script_all(tmp_path_factory.mktemp("models"))


# The models in interleaved shards, so that pytest-xdist runs them on every
# core.
SHARDS = 4


@pytest.mark.parametrize("shard", range(SHARDS))
def test_no_model_syncs_more_after_rewriting(staticify_in_process, scripted, tmp_path,
                                            shard):
    worse, rewritten = [], 0
    models = sorted(scripted.items())[shard::SHARDS]
    for name, path in models:
        for variant, args in CHECKED.items():
            out = tmp_path / "report.json"
            staticify_in_process(path, "--report-json", out, *args)
            report = json.loads(out.read_text())
            before, after = sync_points(report, report["methods"][0]["name"])
            rewritten += after < before
            if after > before:
                worse.append(f"{name} ({variant}): {before} -> {after}")
    assert not worse, worse
    # The check sees rewrites at all: most of these models lose syncs.
    assert rewritten > len(models) * len(CHECKED) // 2, (rewritten, len(models))


class HostRandomCrop(torch.nn.Module):
    """torchvision references' RandomCutmix, reduced: its draws are tensors
    made on the host (`torch.rand(1)`, no device), so reading them is no
    sync and the method is static; passes that judge data by their own facts
    still rewrote its `if`, leaving a cut at the return that reads the
    device."""

    def forward(self, x):
        if torch.rand(1).item() >= 0.5:
            return x
        return x[:int(torch.clamp(torch.randint(10, (1,)) - 2, min=0))]


@pytest.mark.parametrize("variant", sorted(CHECKED))
def test_a_static_method_stays_static(staticify_in_process, tmp_path, variant):
    path = tmp_path / "in.pt"
    torch.jit.script(HostRandomCrop()).save(str(path))
    out, report_path = tmp_path / "out.pt", tmp_path / "report.json"
    staticify_in_process(path, "-o", out, "--report-json", report_path,
                         *CHECKED[variant])
    before, after = sync_points(json.loads(report_path.read_text()), "forward")
    assert (before, after) == (0, 0)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    x = torch.arange(24.0).view(12, 2)
    for seed in range(8):
        torch.manual_seed(seed)
        want = original(x)
        torch.manual_seed(seed)
        assert torch.equal(static(x), want)
