"""`--lower=cuda` where no GPU runs (CI): the output carries a cubin for
sm_80 and one for sm_90 (ELF headers checked: 64-bit, EM_CUDA, the
architecture in e_flags) and PTX for newer GPUs, every launched kernel is in
each image, and the output loads and runs on the CPU through the method's
TorchScript (or, with --lower=cpu,cuda, the CPU kernel), equal to the
original. Over the idioms of real projects (idioms.py), each one the CPU
target lowers is also compiled for CUDA, or the report says why.

On a GPU, test_gpu.py runs the kernels themselves."""
import json
import struct

import pytest
import torch

from conftest import RUNTIME
from idioms import IDIOMS
from test_lower_corpus import assert_close, signature
from test_rewrites import run_safely

torch.ops.load_library(str(RUNTIME))

# The last test counts what the others lowered (module state): under
# pytest-xdist they all run in one worker (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("lower-cuda")

EM_CUDA = 190
SAMPLER_TYPES = "f32[?,16], i64[?]"
# The idioms that compile for CUDA today (all 15 the CPU target lowers): a
# change that compiles fewer fails here; one that compiles more raises it.
MIN_CUDA = 15
cuda_names = []


def lower(staticify, path, out, tmp_path, target, types):
    report = tmp_path / "report.json"
    staticify(path, "-o", out, f"--lower={target}", "--input-types", types,
              "--report-json", report)
    return json.loads(report.read_text())["methods"][0]["lowering"]


def images(model):
    lm = model._staticify_lowered_forward
    return {n: bytes(lm.cuda_image(n).numpy()) for n in lm.cuda_image_names()}


def check_images(found, lowering):
    """The images of one lowered method, against its report."""
    assert sorted(found) == ["host", "kernels", "sm_80", "sm_90", "sm_90.ptx"]
    kernels = found["kernels"].decode().split()
    assert len(kernels) == lowering["cuda"]["kernels"] > 0
    for arch in (80, 90):
        elf = found[f"sm_{arch}"]
        assert lowering["cuda"]["images"][f"sm_{arch}"] == len(elf)
        assert elf[:4] == b"\x7fELF" and elf[4] == 2  # ELFCLASS64
        assert struct.unpack_from("<H", elf, 18)[0] == EM_CUDA
        assert (struct.unpack_from("<I", elf, 48)[0] >> 8) & 0xFF == arch
        for k in kernels:
            assert k.encode() + b"\0" in elf, (arch, k)
    ptx = found["sm_90.ptx"].decode()
    assert ".version 8.0" in ptx and ".target sm_90" in ptx
    assert sorted(l.split()[-1].rstrip("(") for l in ptx.splitlines()
                  if ".entry" in l) == sorted(kernels)
    assert found["host"][:4] == b"\x7fELF"


def test_sampler_compiles_for_cuda_and_runs_on_cpu(staticify, save, tmp_path):
    import sampler
    path = save(sampler.BalancedSampler())
    out = tmp_path / "cuda.pt"
    lowering = lower(staticify, path, out, tmp_path, "cuda", SAMPLER_TYPES)
    assert lowering["lowered"] and lowering["cuda"]["lowered"], lowering
    assert lowering["kernel_bytes"] == 0  # no CPU kernel was asked for
    model = torch.jit.load(str(out))
    check_images(images(model), lowering)
    # On the CPU the TorchScript answers: the sampler's contract holds.
    x = torch.arange(3000, dtype=torch.float32).unsqueeze(1).repeat(1, 16)
    labels = (torch.rand(3000, generator=torch.Generator().manual_seed(0)) < 0.3).long()
    rows, out_labels = model(x, labels)
    ids = rows[:, 0].long()
    assert rows.shape == (1000, 16) and torch.equal(rows, x[ids])
    assert torch.equal(out_labels, labels[ids]) and int(out_labels.sum()) == 500
    assert model._staticify_lowered_forward.counts()[:2] == [0, 1]


def test_cpu_and_cuda_together(staticify, save, tmp_path):
    """--lower=cpu,cuda: both kept; CPU tensors go to the CPU kernel."""
    import sampler
    path = save(sampler.BalancedSampler())
    out = tmp_path / "both.pt"
    lowering = lower(staticify, path, out, tmp_path, "cpu,cuda", SAMPLER_TYPES)
    assert lowering["kernel_bytes"] > 0 and lowering["cuda"]["lowered"], lowering
    model = torch.jit.load(str(out))
    check_images(images(model), lowering)
    x = torch.arange(2000, dtype=torch.float32).unsqueeze(1).repeat(1, 16)
    labels = (torch.arange(2000) % 3 == 0).long()
    rows, out_labels = model(x, labels)
    assert torch.equal(rows, x[rows[:, 0].long()])
    assert model._staticify_lowered_forward.counts()[:2] == [1, 0]


def test_saved_cuda_output_survives_a_round_trip(staticify, save, tmp_path):
    """The images are part of the archive: saved again, they come back."""
    import sampler
    path = save(sampler.BalancedSampler())
    out, again = tmp_path / "cuda.pt", tmp_path / "again.pt"
    lower(staticify, path, out, tmp_path, "cuda", SAMPLER_TYPES)
    first = torch.jit.load(str(out))
    first.save(str(again))
    assert images(torch.jit.load(str(again))) == images(first)


@pytest.mark.parametrize("name,source,module,inputs", IDIOMS, ids=[i[0] for i in IDIOMS])
def test_idiom_compiles_for_cuda(staticify, save, tmp_path, name, source, module, inputs):
    path = save(module)
    out = tmp_path / "cuda.pt"
    types = signature(inputs(torch.Generator().manual_seed(0), "random"))
    lowering = lower(staticify, path, out, tmp_path, "cuda", types)
    if not lowering["cuda"]["lowered"]:
        reason = lowering["cuda"]["reason"]
        assert reason, lowering
        pytest.skip(f"not lowered for CUDA: {reason}")
    cuda_names.append(name)
    original, lowered = torch.jit.load(str(path)), torch.jit.load(str(out))
    check_images(images(lowered), lowering)
    gen = torch.Generator().manual_seed(0)
    for kind in ("none", "all", "random"):
        args = inputs(gen, kind)
        expected, error = run_safely(original, [t.clone() for t in args])
        if not error:
            assert_close(expected, lowered(*[t.clone() for t in args]), name)


def test_enough_idioms_compile_for_cuda():
    if not cuda_names:
        pytest.skip("run with the idiom tests")
    assert len(cuda_names) >= MIN_CUDA, sorted(cuda_names)


def test_without_a_toolkit_the_report_says_how_to_fix_it(staticify, save, tmp_path,
                                                          monkeypatch):
    """No ptxas: the method is left as staticify rewrote it, the output is
    written, and the report names the missing toolkit and CUDA_HOME."""
    import sampler
    path = save(sampler.BalancedSampler())
    out = tmp_path / "cuda.pt"
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda"))
    lowering = lower(staticify, path, out, tmp_path, "cuda", SAMPLER_TYPES)
    assert not lowering["lowered"] and not lowering["cuda"]["lowered"]
    reason = lowering["cuda"]["reason"]
    assert "no CUDA toolkit at" in reason and "set CUDA_HOME" in reason, reason
    model = torch.jit.load(str(out))
    assert not hasattr(model, "_staticify_lowered_forward")
    x = torch.arange(3000, dtype=torch.float32).unsqueeze(1).repeat(1, 16)
    rows, _ = model(x, (torch.arange(3000) % 2 == 0).long())
    assert torch.equal(rows, x[rows[:, 0].long()])


def test_cpu_kernel_stays_when_cuda_cannot_compile(staticify, save, tmp_path, monkeypatch):
    """--lower=cpu,cuda without a toolkit: the CPU kernel is kept."""
    import sampler
    path = save(sampler.BalancedSampler())
    out = tmp_path / "both.pt"
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda"))
    lowering = lower(staticify, path, out, tmp_path, "cpu,cuda", SAMPLER_TYPES)
    assert lowering["lowered"] and lowering["kernel_bytes"] > 0
    assert not lowering["cuda"]["lowered"]
    model = torch.jit.load(str(out))
    assert model._staticify_lowered_forward.cuda_image_names() == []
    x = torch.arange(2000, dtype=torch.float32).unsqueeze(1).repeat(1, 16)
    model(x, (torch.arange(2000) % 2 == 0).long())
    assert model._staticify_lowered_forward.counts()[:2] == [1, 0]


def test_lower_with_cuda_graphs_is_a_command_line_error(staticify, save, tmp_path):
    """The two do not combine yet: a clear error, not an output that
    silently lowers nothing."""
    import sampler
    path = save(sampler.BalancedSampler())
    out = tmp_path / "both.pt"
    proc = staticify(path, "-o", out, "--lower=cuda", "--cuda-graphs",
                     "--input-types", SAMPLER_TYPES, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "--lower and --cuda-graphs do not combine yet" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not out.exists()
