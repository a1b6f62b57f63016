"""The Python API (python/staticify): staticify.optimize / analyze / run on
real modules, in this process, against the CLI's own outputs for the same
input and options."""
import json
import os
import re
import subprocess
import sys
from typing import Optional

import pytest
import torch
import torch.fx

import models
import sampler
from conftest import ROOT, RUNTIME
from test_bounded import Z_LIMIT, chi_square_z
from test_inference import Detector

staticify_api = pytest.importorskip("staticify")
# Subprocesses import the same package as this process.
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(staticify_api.__path__[0]))


def paths_removed(report_json):
    """A report's JSON without the two fields that name files."""
    data = json.loads(report_json)
    data.pop("input"), data.pop("output")
    return data


def test_seed_sampler_becomes_static_and_keeps_its_distribution():
    original = sampler.BalancedSampler(100)
    static, report = staticify_api.optimize(original)
    assert report.static and report.method().after.sync_points == 0
    assert report.method().before.sync_points > 0
    assert isinstance(static, torch.jit.ScriptModule)
    gen = torch.Generator().manual_seed(0)
    x = torch.arange(400, dtype=torch.float32).unsqueeze(1).repeat(1, 16)
    labels = (torch.rand(400, generator=gen) < 0.3).long()
    picks = torch.zeros(400, dtype=torch.long)
    calls = 400
    for _ in range(calls):
        rows, out_labels = static(x, labels)
        ids = rows[:, 0].long()
        assert rows.shape == (100, 16) and torch.equal(out_labels, labels[ids])
        assert ids.unique().numel() == 100 and int(out_labels.sum()) == 50
        picks[ids] += 1
    positives = picks[labels == 1]
    assert chi_square_z(positives, calls * 50 / positives.numel()) < Z_LIMIT


@pytest.mark.parametrize("cls", [models.Seed002Example1, models.Seed002Example2])
def test_seed002_examples_equal_the_original(cls):
    static, report = staticify_api.optimize(cls())
    assert report.static, str(report)
    gen = torch.Generator().manual_seed(1)
    for _ in range(50):
        if cls is models.Seed002Example1:
            args = (torch.rand(6, 5, generator=gen),
                    torch.randint(0, 3, (6,), generator=gen))
        else:
            args = (torch.rand(30, generator=gen), torch.rand(30, generator=gen),
                    torch.randint(-1, 2, (30,), generator=gen))
        assert torch.allclose(static(*args), cls()(*args), rtol=1e-6, atol=1e-6)


class MaskedMeanLoss(torch.nn.Module):
    """A Hugging Face-style token loss: the mean over the non-padding
    positions, as FX traces it (the mask a proxy, x[mask] a getitem)."""

    def forward(self, losses, labels):
        keep = labels != -100
        return losses[keep].sum() / keep.sum()


def test_fx_graph_module_with_a_boolean_mask_reduction():
    gm = torch.fx.symbolic_trace(MaskedMeanLoss())
    assert isinstance(gm, torch.fx.GraphModule)
    static, report = staticify_api.optimize(gm)
    assert report.static, str(report)
    assert any(f.op == "aten::index" and f.action == "rewritten" for f in report.findings)
    gen = torch.Generator().manual_seed(2)
    for _ in range(50):
        losses = torch.rand(8, 7, generator=gen)
        labels = torch.randint(-100, 3, (8, 7), generator=gen).clamp(min=-100)
        labels[labels < 0] = -100
        assert torch.allclose(static(losses, labels), gm(losses, labels), equal_nan=True)


class Unscriptable(torch.nn.Module):
    def forward(self, x):
        try:
            return x.nonzero()
        except RuntimeError:
            return x


def test_a_module_that_does_not_script_is_named():
    with pytest.raises(staticify_api.Error) as e:
        staticify_api.optimize(Unscriptable())
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("Unscriptable does not script: ")
    assert "try" in message and "test_python_api.py" in message
    assert message.endswith("make it scriptable (torch.jit.script) or pass a ScriptModule")


def test_the_input_module_is_not_modified():
    scripted = torch.jit.script(models.Seed002Example2())
    graph, code = str(scripted.graph), scripted.code
    static, report = staticify_api.optimize(scripted)
    assert report.static
    assert str(scripted.graph) == graph and scripted.code == code
    assert static.code != code


def test_errors_are_the_cli_one_line_message_in_python_terms():
    with pytest.raises(staticify_api.Error) as e:
        staticify_api.optimize(models.Seed002Example2(), bounds={"nosuch": 3})
    assert str(e.value).startswith(
        "bounds={'nosuch': 3} names no variable and no FILE:LINE")


@pytest.mark.parametrize("call, message", [
    (lambda api: api.optimize(models.Seed002Example2(), methods=["nope"]),
     "the model (Seed002Example2) has no method 'nope'; its methods are: forward"),
    (lambda api: api.optimize(models.Seed002Example2(), bounds={"x": -1}),
     "bounds={'x': -1}: a bound is a non-negative int"),
    (lambda api: api.optimize(Detector().train(), inference=True),
     "inference=True needs a model in eval mode; the model (Detector) is in training mode: "
     "call model.eval() first"),
    (lambda api: api.optimize(models.Seed002Example2(), assume_none=["nope"]),
     "assume_none nope: method 'forward' has no argument 'nope'"),
    (lambda api: api.analyze(models.Seed002Example2(), nosuch=True),
     "analyze() got unknown option(s) nosuch"),
], ids=["method", "bound", "training", "assume-none", "analyze-option"])
def test_errors_name_python_arguments_and_the_model(call, message):
    """No temporary path, no CLI flag, no pointer to `staticify --help`."""
    with pytest.raises(staticify_api.Error) as e:
        call(staticify_api)
    text = str(e.value)
    assert text.startswith(message), text
    assert "/tmp" not in text and "staticify-" not in text and "--" not in text, text


def test_inference_specialises_the_eval_export(staticify, save, tmp_path):
    """inference=True: the training branch goes, `targets` (defaulting to
    None) is assumed None, and the output computes what the original does;
    the CLI's --inference writes the same module."""
    model = Detector().eval()
    static, report = staticify_api.optimize(model, inference=True, padded_outputs=True)
    method = report.method()
    assert method.assumed_none == ("targets",)
    assert "specialize-training" in method.passes
    assert method.after.sync_points == 0 < method.before.sync_points, str(report)
    x = torch.randn(50)
    padded, count = static(x)
    assert torch.equal(padded[:int(count)], model(x))
    with pytest.raises(torch.jit.Error, match="staticified for calls without 'targets'"):
        static(x, torch.zeros(3))
    path = save(model)
    out = tmp_path / "out.pt"
    staticify(path, "-o", out, "--inference", "--padded-outputs")
    assert torch.jit.load(str(out)).code == static.code
    # Without it, the report's hints say which flags remove the branch's
    # read of `targets` and the cut at the return.
    hints = staticify_api.analyze(model).method().hints
    assert any(h.startswith("--inference ") for h in hints), hints
    assert any(h.startswith("--padded-outputs ") for h in hints), hints


class NeedsTargetsWhenTraining(torch.nn.Module):
    """torchvision's detectors: in training mode, targets are required."""

    def forward(self, x: torch.Tensor, targets: Optional[torch.Tensor] = None):
        if self.training:
            if targets is None:
                raise ValueError("targets should not be none when in training mode")
            return (x - targets).abs().sum()
        return x.sum()


def test_a_failing_example_run_names_the_exception_and_the_training_mode():
    with pytest.raises(staticify_api.Error) as e:
        staticify_api.optimize(NeedsTargetsWhenTraining().train(), (torch.randn(3),),
                               specialize_training=True)
    assert str(e.value) == (
        "the staticified module fails on example_inputs: builtins.ValueError: targets "
        "should not be none when in training mode; the model is in training mode: for an "
        "inference export, call model.eval() first")


def test_analyze_takes_the_options_of_optimize():
    """The report of a run with the options, nothing written: a returned
    selection is cut at the return (a sync) by default, padded with
    padded_outputs."""
    class Selection(torch.nn.Module):
        def forward(self, x):
            return x[x > 0] * 2
    cut = staticify_api.analyze(Selection())
    padded = staticify_api.analyze(Selection(), padded_outputs=True)
    assert cut.method().after.sync_points == 1 and padded.method().after.sync_points == 0
    assert cut.output is None and padded.output is None
    assert any(h.startswith("--padded-outputs ") for h in cut.method().hints), \
        cut.method().hints
    assert padded.method().hints == ()


def test_runtime_library_is_the_one_the_outputs_need():
    path = staticify_api.runtime_library()
    assert os.path.basename(path) == "libstaticify_runtime.so"
    assert os.path.realpath(path) == os.path.realpath(str(RUNTIME))
    torch.ops.load_library(path)
    assert hasattr(torch.ops.staticify, "nms_padded")


def test_options_match_the_cli_byte_for_byte(staticify, save, tmp_path):
    """`python3 -m staticify` is the CLI: the same files, byte for byte; and
    optimize() on the loaded module gives the CLI's code and report."""
    path = save(sampler.BalancedSampler(100))
    flags = ["--bound", "num_pos=50", "--padded-outputs", "--specialize-training"]
    out, report = tmp_path / "out.pt", tmp_path / "report.json"
    staticify(path, "-o", out, "--report-json", report, *flags)
    cli_module, cli_report = out.read_bytes(), report.read_text()
    out.unlink(), report.unlink()
    subprocess.run([sys.executable, "-m", "staticify", path, "-o", out,
                    "--report-json", report, *flags], check=True,
                   env=ENV)
    assert out.read_bytes() == cli_module
    assert report.read_text() == cli_report

    module, api_report = staticify_api.optimize(
        torch.jit.load(str(path)), bounds={"num_pos": 50}, padded_outputs=True,
        specialize_training=True)
    assert module.code == torch.jit.load(str(out)).code
    assert paths_removed(api_report.to_json()) == paths_removed(cli_report)


def test_report_round_trips_and_prints_like_the_cli(staticify, save, tmp_path):
    path = save(models.Seed002Example1())
    report_path = tmp_path / "report.json"
    text = staticify(path, "--report", "--report-json", report_path).stdout
    report = staticify_api.analyze(torch.jit.load(str(path)))
    assert str(report) == text
    again = staticify_api.Report.from_json(report.to_json())
    assert again.to_json() == report.to_json()
    assert paths_removed(report.to_json()) == paths_removed(report_path.read_text())
    cli = json.loads(report_path.read_text())["methods"][0]
    assert [f.op for f in report.method().findings] == [f["op"] for f in cli["findings"]]
    assert report.method().before.counts == cli["before"]["counts"]
    root = next(f for f in report.findings if f.role == "root")
    assert root.location.file.endswith("models.py") and root.location.line > 0
    assert report.to_dot().startswith("digraph")


def test_analyze_rewrites_nothing_and_counts_what_the_cli_counts(staticify, save):
    path = save(sampler.BalancedSampler(100))
    cli = staticify.report(path)["methods"][0]
    report = staticify_api.analyze(torch.jit.load(str(path)))
    assert report.output is None
    assert report.method().before.counts == cli["before"]["counts"]
    roots = sum(1 for f in cli["findings"] if f["role"] == "root")
    assert report.method().before.sync_points == cli["before"]["sync_points"] == roots > 0


def test_python_m_staticify_help_and_bad_command_line():
    helped = subprocess.run([sys.executable, "-m", "staticify", "--help"],
                            capture_output=True, text=True, env=ENV)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: staticify")
    bad = subprocess.run([sys.executable, "-m", "staticify", "--nope"],
                         capture_output=True, text=True, env=ENV)
    assert bad.returncode == 2
    assert bad.stderr == "staticify: error: unknown option '--nope'; see 'staticify --help'\n"


def test_export_pipeline_example_runs(tmp_path):
    """docs/python.md's worked example, as the page shows it."""
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "export_pipeline.py"),
                           str(tmp_path / "loss_static.pt")],
                          capture_output=True, text=True, timeout=300,
                          env=ENV)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^static: True; host syncs 2 -> 0$", proc.stdout, re.M), proc.stdout
    worst = re.search(r"max \|static - original\| = (\S+)", proc.stdout)
    assert worst and float(worst.group(1)) <= 1e-4, proc.stdout
    assert (tmp_path / "loss_static.pt").exists()


def test_ops_registered_in_this_process_need_no_library():
    """In-process, the ops that imported libraries registered are known: a
    detector's torchvision::nms needs no load_libraries (and a pip wheel's
    _C.so, which the CLI cannot load, is already loaded)."""
    torchvision = pytest.importorskip("torchvision")

    class Detector(torch.nn.Module):
        def forward(self, boxes: torch.Tensor, scores: torch.Tensor):
            keep = torchvision.ops.nms(boxes, scores, 0.5)
            return boxes[keep]

    report = staticify_api.analyze(Detector())
    assert [f.op for f in report.findings
            if f.role == "root" and f.action != "introduced"] == ["torchvision::nms"]


def test_runtime_ops_put_the_nms_kernel_in_the_module():
    """runtime_ops=True: torchvision's nms becomes the runtime's padded NMS
    kernel (the library is loaded in this process, so the module loads and
    runs here), and the outputs equal the original's."""
    torchvision = pytest.importorskip("torchvision")

    class Detector(torch.nn.Module):
        def forward(self, boxes: torch.Tensor, scores: torch.Tensor):
            keep = torchvision.ops.nms(boxes, scores, 0.5)
            return boxes[keep], scores[keep]

    static, report = staticify_api.optimize(Detector(), runtime_ops=True)
    assert "staticify::nms_padded" in str(static.forward.graph)
    assert "torchvision::nms" not in str(static.forward.graph)
    original = torch.jit.script(Detector())
    gen = torch.Generator().manual_seed(0)
    for n in (0, 1, 50, 300):
        xy = torch.rand(n, 2, generator=gen) * 40
        boxes = torch.cat([xy, xy + 1 + torch.rand(n, 2, generator=gen) * 20], 1)
        scores = torch.rand(n, generator=gen)
        for got, want in zip(static(boxes, scores), original(boxes, scores)):
            assert torch.equal(got, want), n


class _TwoInputsOneMask(torch.nn.Module):
    """torchmetrics' accuracy with an ignore index: two inputs selected by
    one mask, their ranks unrecorded (a rank guard)."""

    def forward(self, preds, target):
        mask = target != -1
        return (preds[mask] == target[mask]).sum() / mask.sum()


def test_guard_fallback_reads_are_in_the_summary():
    static, report = staticify_api.optimize(_TwoInputsOneMask())
    after = report.methods[0].after
    assert after.static and after.fallback_sync_points == 1
    assert report.methods[0].before.fallback_sync_points == 0
    preds, target = torch.tensor([1, 2, 3, 0]), torch.tensor([1, -1, 3, 2])
    assert torch.equal(static(preds, target), _TwoInputsOneMask()(preds, target))


def test_optimize_lowers_for_cuda_from_example_inputs():
    """lower="cpu,cuda" from Python: both targets in the report, the CUDA
    images in the module, the CPU kernel answering CPU calls."""
    model = models.Seed002Example1()
    loss, targets = torch.randn(1000), torch.randint(0, 3, (1000,))
    module, report = staticify_api.optimize(model, (loss, targets), lower="cpu,cuda")
    lowering = report.method().lowering
    assert lowering["lowered"] and lowering["cuda"]["lowered"], lowering
    assert lowering["cuda"]["kernels"] > 0
    assert set(lowering["cuda"]["images"]) == {"sm_80", "sm_90", "sm_90.ptx"}
    assert "sm_90" in module._staticify_lowered_forward.cuda_image_names()
    x, t = torch.randn(300), torch.randint(0, 3, (300,))
    torch.testing.assert_close(module(x, t), model(x, t), rtol=1e-5, atol=1e-3)
    assert module._staticify_lowered_forward.counts()[:2] == [2, 0]  # with the check run


def test_optimize_lowers_to_a_cpu_kernel_from_example_inputs():
    """lower="cpu" with example inputs: the signature is theirs (dtypes and
    ranks), the kernel answers, and the numbers are the original's."""
    model = models.Seed002Example1()
    loss, targets = torch.randn(1000), torch.randint(0, 3, (1000,))
    assert staticify_api.signature_of((loss, targets)) == "f32[?], i64[?]"
    module, report = staticify_api.optimize(model, (loss, targets), lower="cpu")
    lowering = report.method().lowering
    assert lowering["lowered"] and lowering["inputs"] == "f32[?], i64[?]", lowering
    for n in (0, 7, 5000):
        x, t = torch.randn(n), torch.randint(0, 3, (n,))
        torch.testing.assert_close(module(x, t), model(x, t), rtol=1e-5, atol=1e-3)
    assert module._staticify_lowered_forward.counts()[:2] == [4, 0]  # with the check run
    with pytest.raises(staticify_api.Error, match="needs input_types or example_inputs"):
        staticify_api.optimize(model, lower="cpu")
    with pytest.raises(staticify_api.Error, match="^lower=gpu: the targets are: cpu"):
        staticify_api.optimize(model, (loss, targets), lower="gpu")


def test_optimize_batches_from_example_inputs():
    """batch=True: the types, sizes included, from example_inputs; the new
    method takes B rows and gives each row's result."""
    model = models.Seed002Example1()
    loss, targets = torch.randn(300), torch.randint(0, 3, (300,))
    assert staticify_api.signature_of((loss, targets), sizes=True) == "f32[300], i64[300]"
    module, report = staticify_api.optimize(model, (loss, targets), batch=True)
    assert report.method().batch == {"method": "forward_batched", "reason": None}
    xs, ts = torch.randn(5, 70), torch.randint(0, 3, (5, 70))
    got = module.forward_batched(xs, ts)
    for b in range(5):
        torch.testing.assert_close(got[b], model(xs[b], ts[b]), rtol=1e-5, atol=1e-5)
    with pytest.raises(staticify_api.Error, match="batch=True needs input_types"):
        staticify_api.optimize(model, batch=True)


def test_static_loops_is_the_flag():
    """optimize(static_loops=True) runs a loop that stops on data on to its
    bound, as --static-loops does; by default the loop keeps its read."""
    from test_loop_exit import EarlyStop
    w, h = torch.randn(3, 3), torch.randn(4, 3)
    default_module, default_report = staticify_api.optimize(EarlyStop())
    module, report = staticify_api.optimize(EarlyStop(), static_loops=True)
    assert default_report.methods[0].after.sync_points == 1
    assert report.methods[0].after.sync_points == 0
    for got in (module(w, h), default_module(w, h)):
        want = EarlyStop()(w, h)
        torch.testing.assert_close(got[0], want[0])
        assert torch.equal(got[1], want[1])
