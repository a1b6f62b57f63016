"""On a GPU (skipped elsewhere): the staticified sampler runs with no host
sync, and its --cuda-graphs form captures once per signature and replays
with fresh random numbers. The sync checks use PyTorch's own detector
(torch.cuda.set_sync_debug_mode), which raises on any synchronizing call."""

import pytest
import torch

import sampler
from conftest import RUNTIME
from test_bounded import Z_LIMIT, chi_square_z

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

N, SUB = 4000, 1000


def inputs(gen):
    x = torch.arange(N, dtype=torch.float32, device="cuda").unsqueeze(1).repeat(1, 16)
    labels = (torch.rand(N, generator=gen) < 0.3).long().cuda()
    return x, labels


def check_sample(x, labels, rows, out_labels):
    ids = rows[:, 0].long()
    assert rows.shape == (SUB, 16) and torch.equal(rows, x[ids])
    assert torch.equal(out_labels, labels[ids]) and ids.unique().numel() == SUB
    assert int(out_labels.sum()) == SUB // 2
    return ids


def calls_that_sync(model, *args):
    """Runs model once with the detector set to raise; the error, if any."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        model(*args)
        return None
    except RuntimeError as e:
        return str(e)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def staticified(staticify, save, tmp_path, *flags):
    path = save(sampler.BalancedSampler())
    out = tmp_path / "static.pt"
    staticify(path, "-o", out, *flags)
    return torch.jit.load(str(path)), torch.jit.load(str(out))


def test_original_syncs_and_staticified_does_not(staticify, save, tmp_path):
    original, result = staticified(staticify, save, tmp_path)
    x, labels = inputs(torch.Generator().manual_seed(0))
    for _ in range(3):  # the profiling executor specializes on its first runs
        original(x, labels)
        result(x, labels)
    # The detector sees the original's syncs (the test can fail) ...
    assert "synchroniz" in (calls_that_sync(original, x, labels) or "")
    # ... and none in the rewritten program.
    assert calls_that_sync(result, x, labels) is None
    check_sample(x, labels, *result(x, labels))


def test_cuda_graphs_capture_once_and_replay_fresh_draws(staticify, save, tmp_path):
    torch.ops.load_library(str(RUNTIME))
    _, graphed = staticified(staticify, save, tmp_path, "--cuda-graphs")
    runner = graphed._staticify_region_1
    gen = torch.Generator().manual_seed(1)
    x, labels = inputs(gen)
    first = check_sample(x, labels, *graphed(x, labels))
    assert runner.captured_signatures() == 1, "the sampler's region was not captured"
    draws = [first]
    for _ in range(50):
        draws.append(check_sample(x, labels, *graphed(x, labels)))
    # RNG inside the graph advances on every replay: draws differ.
    assert len({tuple(d.tolist()) for d in draws}) == len(draws)
    # Replays copy new inputs into the captured buffers.
    x2, labels2 = inputs(gen)
    check_sample(x2, labels2, *graphed(x2, labels2))
    assert runner.captured_signatures() == 1
    assert calls_that_sync(graphed, x2, labels2) is None
    # A new signature is captured on its own.
    x3 = x[:3000].contiguous()
    check_sample(x3, labels[:3000].contiguous(), *graphed(x3, labels[:3000].contiguous()))
    assert runner.captured_signatures() == 2


def test_cuda_graphs_keep_the_distribution(staticify, save, tmp_path):
    """Per-row pick counts over replays: every positive row equally likely."""
    torch.ops.load_library(str(RUNTIME))
    _, graphed = staticified(staticify, save, tmp_path, "--cuda-graphs")
    x, labels = inputs(torch.Generator().manual_seed(2))
    calls = 2000
    picks = torch.zeros(N, dtype=torch.long, device="cuda")
    for _ in range(calls):
        rows, _ = graphed(x, labels)
        picks[rows[:, 0].long()] += 1
    members = picks[labels == 1]
    z = chi_square_z(members, calls * (SUB // 2) / members.numel())
    assert z < Z_LIMIT, z


# --lower=cuda: the kernels themselves (test_lower_cuda.py checks the images
# where no GPU runs).

def lowered_for_cuda(staticify, save, tmp_path, module, types):
    path = save(module)
    out = tmp_path / "cuda.pt"
    try:
        staticify(path, "-o", out, "--lower=cuda", "--input-types", types)
    except AssertionError as e:
        # A build against a PyTorch wheel on a machine without MLIR 22 (the
        # GPU machine) has no --lower; everything else still runs there.
        if "needs a staticify built with MLIR" in str(e):
            pytest.skip("this staticify is built without MLIR: no --lower")
        raise
    return torch.jit.load(str(path)), torch.jit.load(str(out))


def test_lowered_sampler_runs_on_cuda_without_a_sync(staticify, save, tmp_path):
    _, model = lowered_for_cuda(staticify, save, tmp_path, sampler.BalancedSampler(),
                                "f32[?,16], i64[?]")
    x, labels = inputs(torch.Generator().manual_seed(0))
    for _ in range(3):
        check_sample(x, labels, *model(x, labels))
    assert calls_that_sync(model, x, labels) is None
    lm = model._staticify_lowered_forward
    assert lm.cuda_calls() == 4 and lm.counts()[:2] == [4, 0]


def test_lowered_idioms_equal_their_torchscript_on_cuda(staticify, save, tmp_path):
    from idioms import IDIOMS
    from test_lower_corpus import assert_close, signature
    compared = 0
    for name, _, module, make in IDIOMS:
        args = make(torch.Generator().manual_seed(0), "random")
        original, model = lowered_for_cuda(staticify, save, tmp_path, module, signature(args))
        lm = model._staticify_lowered_forward
        if "sm_80" not in lm.cuda_image_names():
            continue
        for kind in ("none", "all", "random"):
            args = [a.cuda() for a in make(torch.Generator().manual_seed(1), kind)]
            assert_close(original(*args), model(*args), name)
            assert calls_that_sync(model, *args) is None, name
        assert lm.cuda_calls() >= 3, name
        compared += 1
    assert compared >= 15


def test_lowered_idiom_captures_into_a_cuda_graph(staticify, save, tmp_path):
    """A lowered method without random ops launches on the capturing stream
    and allocates from the graph's pool: captured once, replayed on new
    inputs copied into the captured ones, it equals the original."""
    from idioms import IDIOMS
    from test_lower_corpus import signature
    name, _, module, make = next(i for i in IDIOMS if i[0] == "metrics-mae-masked")
    args = make(torch.Generator().manual_seed(0), "random")
    original, model = lowered_for_cuda(staticify, save, tmp_path, module, signature(args))
    assert_graph_replays_equal(model, original, make, name)


def assert_graph_replays_equal(model, reference, make, name, replays=6):
    """Captures model once into a CUDA graph (after warm-up calls on a side
    stream) on inputs from make, then replays it on fresh inputs copied into
    the captured ones: each replay's output equals reference's."""
    from test_lower_corpus import assert_close
    static = [a.cuda() for a in make(torch.Generator().manual_seed(0), "random")]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model(*static)
    for seed in range(1, replays + 1):
        fresh = make(torch.Generator().manual_seed(seed), ("none", "all", "random")[seed % 3])
        for s, f in zip(static, fresh):
            s.copy_(f.cuda())
        graph.replay()
        assert_close(reference(*[f.cuda() for f in fresh]), out, name)
