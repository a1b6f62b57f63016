"""Rewritten models keep autograd semantics: they run wherever the original
runs with grad mode on, the profiling executor's later calls included, and
give the original's gradients. torchaudio's wav2vec2 with `lengths`,
staticified with --specialize-training, raised from its second call: the
store `x[mask] = 0.0` became copy_(x, where(...)), an in-place write to a
tensor autodiff saw once the eval-mode dropout before it was folded away;
the store is now a new value that the later uses read."""
import pytest
import torch

torchaudio = pytest.importorskip("torchaudio")


def small_wav2vec2():
    """wav2vec2's architecture at a test's size (the base model's layout)."""
    return torchaudio.models.wav2vec2_model(
        extractor_mode="group_norm", extractor_conv_layer_config=[(32, 10, 5), (32, 3, 2)],
        extractor_conv_bias=False, encoder_embed_dim=64, encoder_projection_dropout=0.1,
        encoder_pos_conv_kernel=16, encoder_pos_conv_groups=4, encoder_num_layers=2,
        encoder_num_heads=4, encoder_attention_dropout=0.1, encoder_ff_interm_features=128,
        encoder_ff_interm_dropout=0.1, encoder_dropout=0.1, encoder_layer_norm_first=False,
        encoder_layer_drop=0.0, aux_num_out=None).eval()


@pytest.fixture
def wav2vec2(staticify, save, tmp_path):
    torch.manual_seed(0)
    path = save(torch.jit.script(small_wav2vec2()))
    out = tmp_path / "out.pt"
    staticify(path, "-o", out, "--specialize-training")
    return torch.jit.load(str(path)), torch.jit.load(str(out))


def test_five_calls_with_grad_mode_on(wav2vec2):
    original, result = wav2vec2
    x = torch.randn(2, 1600)
    lengths = torch.tensor([1600, 1100])
    for _ in range(5):  # the profiling executor differentiates from call 2
        want, got = original(x, lengths), result(x, lengths)
        torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
        assert torch.equal(got[1], want[1])


class MaskedFeatures(torch.nn.Module):
    """wav2vec2's encoder preprocessing at its smallest: a projection, an
    eval-mode dropout, and the padded frames zeroed in place."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, f: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.proj(f))
        b, t, _ = x.size()
        mask = torch.arange(t, device=lengths.device).expand(b, t) >= lengths[:, None]
        x[mask] = 0.0
        return x


def test_gradients_equal(staticify, save, tmp_path):
    """The gradients of the input and the weights equal the original's on
    every call. (wav2vec2's own are not compared: TorchScript 1.13's
    original gives different input gradients from one call to the next.)"""
    torch.manual_seed(0)
    path = save(torch.jit.script(MaskedFeatures().eval()))
    out = tmp_path / "out.pt"
    staticify(path, "-o", out, "--specialize-training")
    original, result = torch.jit.load(str(path)), torch.jit.load(str(out))
    lengths = torch.tensor([5, 3])
    for call in range(5):
        grads = []
        for model in (original, result):
            model.zero_grad()
            f = torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(call))
            f.requires_grad_()
            model(f, lengths).square().sum().backward()
            grads.append([f.grad] + [p.grad for p in model.parameters()])
        for want, got in zip(*grads):
            torch.testing.assert_close(got, want)


class StoresOfStores(torch.nn.Module):
    """Two stores of selections, the second reading what the first wrote
    (found by the differential fuzzer): once the first is a new value, the
    second's operands are values the analysis had not seen; mask-store
    crashed asking the stale alias database about them."""

    def forward(self, y: torch.Tensor, t: torch.Tensor):
        m = y > 0.0
        a = t.clone()
        a[m] = y[m]
        b = t.clone()
        b[m] = a[m]
        return a, b


def test_store_of_a_stored_selection(staticify, save, tmp_path):
    path = save(StoresOfStores())
    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    original, result = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for _ in range(10):
        y, t = torch.randn(7, generator=gen), torch.randn(7, generator=gen)
        for want, got in zip(original(y, t), result(y, t)):
            assert torch.equal(want, got)
