"""--inference and the report a user reads: the export flags of an eval-mode
model in one, refused for a module saved in training mode; the short
report (what is left and why, hints, the summary) and --report=full; the
counts of the summary agreeing with the JSON's."""
from typing import Optional

import pytest
import torch

import models
from conftest import findings, sync_points
from test_bad_input import assert_clean_failure


class Detector(torch.nn.Module):
    """An eval model's forward: an Optional argument callers leave out, a
    branch only training takes, and a selection it returns."""

    def forward(self, x: torch.Tensor, targets: Optional[torch.Tensor] = None):
        if targets is not None:
            if bool((targets < 0).any()):
                raise ValueError("negative target")
        if self.training:
            return x[x > 0.5].sum()
        return x[x > 0] * 2


def test_inference_is_the_eval_export(staticify, save, tmp_path):
    path = save(Detector().eval())
    out = tmp_path / "out.pt"
    report = staticify.report(path, "-o", out, "--inference", "--padded-outputs")
    (method,) = report["methods"]
    assert method["assumed_none"] == ["targets"]
    assert "specialize-training" in method["passes"] and "assume-none" in method["passes"]
    assert method["after"]["sync_points"] == 0 and method["hints"] == []
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        x = torch.randn(40, generator=gen)
        padded, count = static(x)
        want = original(x)
        assert torch.equal(padded[:int(count)], want) and (padded[int(count):] == 0).all()
    with pytest.raises(torch.jit.Error, match="staticified for calls without 'targets'"):
        static(x, torch.zeros(2))
    # Run again on its own output: nothing left to find.
    again = staticify.report(out, "--inference", "--padded-outputs")
    assert sync_points(again) == (0, 0)
    assert again["methods"][0]["before"]["sync_points"] == 0


def test_inference_refuses_a_module_saved_in_training_mode(staticify, save, tmp_path):
    path = save(Detector().train())
    out = tmp_path / "out.pt"
    proc = staticify(path, "-o", out, "--inference", check=False)
    assert_clean_failure(proc, tmp_path, "was saved in training mode; call model.eval() "
                         "before scripting and saving it", out)


def test_the_short_report_shows_what_is_left_and_the_flags_that_remove_it(staticify, save):
    path = save(Detector().eval())
    short = staticify(path, "--report").stdout
    full = staticify(path, "--report=full").stdout
    report = staticify.report(path)
    (method,) = report["methods"]
    left = [f for f in method["findings"] if f["role"] == "root" and f["action"] != "rewritten"]
    # The selection cut at the return, and the read of `targets`, are left.
    assert {f["op"] for f in left} == {"aten::Bool", "aten::Int"}, left
    for f in left:
        assert f"{f['location']['line']}:{f['location']['column']}: warning:" in short
    # The rewritten selection is in the full report only.
    assert "note: rewritten by" not in short and "note: rewritten by" in full
    hidden = len(method["findings"]) - short.count(": warning: ") - short.count(": remark: ")
    assert f"({hidden} more finding" in short
    assert "hint: --padded-outputs " in short and "hint: --inference " in short
    # One set of counts: the first line's findings are the table's before
    # column, and the JSON's.
    total = method["before"]["counts"]["total"]
    roots = sum(1 for f in method["findings"]
                if f["role"] == "root" and f["action"] != "introduced")
    assert f"summary of 'forward': {total} finding{'s' if total != 1 else ''} " \
           f"({roots} root cause{'s' if roots != 1 else ''})" in short
    assert short[short.index("summary of"):] == full[full.index("summary of"):]


def test_report_takes_full_or_nothing(staticify, save, tmp_path):
    path = save(models.Seed002Example1())
    proc = staticify(path, "--report=everything", check=False)
    assert proc.returncode == 2
    assert proc.stderr == ("staticify: error: '--report=everything': --report takes =full "
                           "or nothing; see 'staticify --help'\n")
    assert findings(staticify.report(path))  # the model has findings to show
