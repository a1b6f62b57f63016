"""The benchmark harness runs (tiny sizes, two repetitions): never a timing
assertion, only that every variant ran and its ratio is a number."""
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_seed000_harness_smoke(tmp_path):
    bin_dir = os.environ.get("STATICIFY_BIN", str(ROOT / "build" / "bin"))
    subprocess.run([sys.executable, str(ROOT / "bench" / "seed000.py"), "--smoke",
                    "--bin", bin_dir, "--out", str(tmp_path)], check=True,
                   capture_output=True, timeout=300)
    rows = json.loads((tmp_path / "sampler-cpu.json").read_text())["rows"]
    ran = {(r["variant"], r["batch"]) for r in rows if "skipped" not in r}
    for batch in (1, 2):
        for v in ("original", "handwritten", "staticify", "staticify+cuda-graphs"):
            assert (v, batch) in ran
    assert ("staticify+batch", 2) in ran and ("staticify+batch", 1) not in ran
    # Only the torch.compile variants (PyTorch 2.x) may fail to compile; they
    # are reported, not dropped.
    for r in rows:
        if "skipped" in r:
            assert r["variant"].endswith("+compile"), r
            assert r["skipped"].startswith("failed in warm-up: "), r
        else:
            assert r["ratio_vs_original"] > 0, r
    assert (tmp_path / "sampler-cpu.csv").read_text().startswith("n,batch,variant")


def test_sampler_profile_smoke(tmp_path):
    """The per-op profile names the ops each variant ran: the original's
    nonzero (its sync) and none in staticify's output."""
    bin_dir = os.environ.get("STATICIFY_BIN", str(ROOT / "build" / "bin"))
    out = tmp_path / "profile.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "sampler_profile.py"),
                    "--size", "2e3", "--calls", "2", "--bin", bin_dir, "--json", str(out)],
                   check=True, capture_output=True, timeout=300)
    variants = json.loads(out.read_text())["variants"]
    ops = {name: {r["op"] for r in v["ops"]} for name, v in variants.items()}
    assert "aten::nonzero" in ops["original"]
    assert "aten::nonzero" not in ops["staticify"]
    assert all(v["total_us"] > 0 for v in variants.values())


def test_lowered_layers_smoke(tmp_path):
    """Both models lower (the head whole, the convolution's by regions: the
    bench checks outputs equal before timing) and each row has its times."""
    bin_dir = os.environ.get("STATICIFY_BIN", str(ROOT / "build" / "bin"))
    lib = pathlib.Path(bin_dir).parent / "lib" / "libstaticify_runtime.so"
    if not lib.exists():
        import pytest
        pytest.skip("no runtime library next to the binary")
    out = tmp_path / "layers.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "lowered_layers.py"), "--rows", "8",
                    "--reps", "2", "--bin", bin_dir, "--json", str(out)],
                   check=True, capture_output=True, timeout=300)
    rows = json.loads(out.read_text())
    assert [(r["model"], r["kernels"]) for r in rows] == [("head (whole)", 1),
                                                          ("conv1d + head (regions)", 1)]
    assert all(r[k] > 0 for r in rows for k in ("original", "staticified", "lowered"))


def test_lowered_primitives_smoke(tmp_path):
    """Each primitive of the sampler's form lowers on its own (the bench
    exits naming one that does not) and is timed beside PyTorch's op."""
    bin_dir = os.environ.get("STATICIFY_BIN", str(ROOT / "build" / "bin"))
    if not (pathlib.Path(bin_dir).parent / "lib" / "libstaticify_runtime.so").exists():
        import pytest
        pytest.skip("no runtime library next to the binary")
    out = tmp_path / "primitives.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "lowered_primitives.py"), "--size",
                    "2e3", "--reps", "2", "--bin", bin_dir, "--json", str(out)],
                   check=True, capture_output=True, timeout=300)
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 8 and all(r["pytorch"] > 0 and r["lowered"] > 0 for r in rows)


def test_nms_bench_smoke(tmp_path):
    """Every NMS variant ran, checked equal to its reference (the bench
    asserts it before timing), and --render prints the table it wrote."""
    bin_dir = os.environ.get("STATICIFY_BIN", str(ROOT / "build" / "bin"))
    lib = pathlib.Path(bin_dir).parent / "lib" / "libstaticify_runtime.so"
    subprocess.run([sys.executable, str(ROOT / "bench" / "nms.py"), "--sizes", "60",
                    "--reps", "2", "--bin", bin_dir, "--runtime", str(lib),
                    "--out", str(tmp_path)], check=True, capture_output=True, timeout=600)
    rows = json.loads((tmp_path / "nms-cpu.json").read_text())
    ran = {(r["kind"], r["variant"]) for r in rows}
    assert ("op", "form (TorchScript)") in ran and ("op", "torchvision.ops.nms") in ran
    for model in ("keep-after-nms", "postprocess", "batched-nms"):
        for variant in ("original", "default", "padded", "padded+runtime-ops"):
            assert (model, variant) in ran
    assert all(r["vs_first"] > 0 for r in rows)
    table = subprocess.run([sys.executable, str(ROOT / "bench" / "nms.py"), "--render",
                            str(tmp_path / "nms-cpu.json")], check=True, capture_output=True,
                           text=True, timeout=60).stdout
    assert len(table.splitlines()) == len(rows) + 2 and "form (TorchScript)" in table
