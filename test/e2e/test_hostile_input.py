"""Regression tests for each class of defect the hostile-archive campaign
found (issue 19, docs/reliability.md): crashes on nested pickles, empty
REDUCEs and deep expressions, hangs on zip bombs and FIFOs, libtorch's text
in messages, leftover files after a failed save, refused archives that
torch.jit.load loads, and the command-line oddities. Each hostile archive is
a valid one with one record replaced and the zip rewritten with correct
CRCs, so it reaches the parser it is aimed at."""
import io
import json
import os
import pathlib
import resource
import signal
import struct
import subprocess
import sys
import time
import zipfile
import zlib

import pytest
import torch

import models
from test_bad_input import assert_clean_failure

INTERNALS = ("INTERNAL ASSERT", "please report a bug to PyTorch", "enforce fail",
             "Exception raised from", "inline_container", "frame #")


@pytest.fixture
def good_model(save):
    return save(models.Seed002Example2())


def with_record(src, dst, suffix, replace, compress=False):
    """Copies archive src to dst, replacing the record ending in suffix by
    replace(old bytes)."""
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as w:
        hits = 0
        for info in z.infolist():
            data = z.read(info.filename)
            if info.filename.endswith(suffix):
                data = replace(data)
                hits += 1
            w.writestr(info.filename, data,
                       compress_type=zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED)
    assert hits == 1, suffix
    return dst


def run_hostile(staticify, path, tmp_path, message):
    out = tmp_path / "out.pt"
    report = tmp_path / "report.json"
    start = time.monotonic()
    proc = staticify(path, "-o", out, "--report-json", report, check=False)
    assert time.monotonic() - start < 20
    assert proc.returncode == 1 and proc.returncode > 0, proc  # not a signal
    assert not any(s in proc.stderr for s in INTERNALS), proc.stderr
    assert "internal error" not in proc.stderr, proc.stderr
    assert_clean_failure(proc, tmp_path, message, out)
    assert not report.exists()
    return proc


def test_deeply_nested_pickle_is_refused(staticify, good_model, tmp_path):
    deep = b"\x80\x02" + b"](" * 100000 + b"e" * 100000 + b"."
    bad = with_record(good_model, tmp_path / "bad.pt", "/constants.pkl", lambda _: deep)
    run_hostile(staticify, bad, tmp_path, "a pickle nests values more than 2000 deep")


def test_reduce_on_an_empty_stack_is_refused(staticify, good_model, tmp_path):
    bad = with_record(good_model, tmp_path / "bad.pt", "/data.pkl", lambda _: b"\x80\x02R.")
    run_hostile(staticify, bad, tmp_path, "REDUCE finds 0 values on the stack")


@pytest.mark.parametrize("expression", ["(" * 30000 + "x" + ")" * 30000,
                                        " + ".join(["x"] * 30000),
                                        "not " * 30000 + "x"])
def test_deep_expressions_are_refused(staticify, good_model, tmp_path, expression):
    def deepen(code):
        text = code.decode()
        head, sep, tail = text.partition("    return ")
        assert sep
        return (head + "    _deep = " + expression + "\n" + sep + tail).encode()
    bad = with_record(good_model, tmp_path / "bad.pt", "/code/__torch__/models.py", deepen)
    run_hostile(staticify, bad, tmp_path, "code nests an expression more than 1000 deep")


def test_zip_bomb_is_refused_at_once(staticify, good_model, tmp_path):
    # 512 MiB of zeros deflates to about 500 KiB.
    bomb = tmp_path / "bomb.pt"
    with zipfile.ZipFile(good_model) as z, \
            zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as w:
        for info in z.infolist():
            w.writestr(info.filename, z.read(info.filename), compress_type=zipfile.ZIP_STORED)
        prefix = z.namelist()[0].split("/")[0]
        with w.open(prefix + "/extra/bomb", "w", force_zip64=True) as entry:
            chunk = bytes(1 << 20)
            for _ in range(512):
                entry.write(chunk)
    assert bomb.stat().st_size < 8 << 20
    run_hostile(staticify, bomb, tmp_path, "(a zip bomb?)")


def test_fifo_is_refused_at_once(staticify, tmp_path):
    fifo = tmp_path / "model.pt"
    os.mkfifo(fifo)
    proc = run_hostile(staticify, fifo, tmp_path, "is a FIFO; give the path of a TorchScript .pt file")
    assert proc.stderr.count("\n") == 1


def test_corrupt_pickle_is_in_our_words(staticify, good_model, tmp_path):
    """libtorch skips zip CRCs: a flipped byte reaches its unpickler, whose
    complaint stays behind --verbose."""
    data = bytearray(good_model.read_bytes())
    with zipfile.ZipFile(good_model) as z:
        info = next(i for i in z.infolist() if i.filename.endswith("/data.pkl"))
    local = info.header_offset
    name_length, extra_length = (int.from_bytes(data[local + k:local + k + 2], "little")
                                 for k in (26, 28))
    data[local + 30 + name_length + extra_length + 3] ^= 0xFF
    bad = tmp_path / "crc.pt"
    bad.write_bytes(bytes(data))
    run_hostile(staticify, bad, tmp_path, "is not a TorchScript module libtorch can load")
    verbose = staticify(bad, "--report", "--verbose", check=False)
    assert verbose.returncode == 1
    assert "libtorch says" in verbose.stderr  # its own text, on request only


def _loads_in_torch(path):
    loaded = subprocess.run([sys.executable, "-c", f"import torch; torch.jit.load({str(path)!r})"],
                            capture_output=True, timeout=60)
    return loaded.returncode == 0


def _same_outputs(a, b):
    gen = torch.Generator().manual_seed(0)
    args = (torch.randn(50, generator=gen), torch.randn(50, generator=gen),
            torch.randint(-1, 2, (50,), generator=gen))
    return torch.equal(torch.jit.load(str(a))(*args), torch.jit.load(str(b))(*args))


@pytest.mark.parametrize("debug", [lambda d: d[: len(d) // 2],
                                   lambda d: b"\x80\x02garbage",
                                   lambda d: b"\x80\x02" + b"](" * 100000 + b".",
                                   lambda d: b"\x80\x02(K\x01X\x03\x00\x00\x00abct."])
def test_bad_debug_records_cost_a_warning(staticify, good_model, tmp_path, debug):
    """torch.jit.load reads debug records lazily and loads all of these; so
    does staticify, with a warning and locations in the archive's code."""
    bad = with_record(good_model, tmp_path / "bad.pt", ".debug_pkl", debug)
    assert _loads_in_torch(bad)
    out = tmp_path / "out.pt"
    proc = staticify(bad, "-o", out, "--report", check=False)
    assert proc.returncode == 0, proc.stderr
    assert not any(s in proc.stderr for s in INTERNALS), proc.stderr
    if "warning" in proc.stderr:
        assert "findings point into the archive's code" in proc.stderr
    assert _same_outputs(out, good_model)


@pytest.mark.parametrize("entry", ["extra/d/", "extra/"])
def test_directory_entries_under_extra_cost_a_warning(staticify, good_model, tmp_path, entry):
    """A directory entry with content under extra/ (libtorch's writer
    refuses its name): torch.jit.load loads the archive; staticify too, and
    leaves the entry out with a warning naming it."""
    bad = tmp_path / "bad.pt"
    with zipfile.ZipFile(good_model) as z, zipfile.ZipFile(bad, "w") as w:
        top = z.namelist()[0].split("/")[0]
        for info in z.infolist():
            w.writestr(info, z.read(info.filename))
        w.writestr(f"{top}/{entry}", b"contents")
    assert _loads_in_torch(bad)
    out = tmp_path / "out.pt"
    proc = staticify(bad, "-o", out, check=False)
    assert proc.returncode == 0, proc.stderr
    assert f"entry '{entry}' is a directory entry" in proc.stderr
    assert _same_outputs(out, good_model)


@pytest.mark.parametrize("field,offset", [("entries", 10), ("directory size", 12),
                                          ("directory offset", 16)])
def test_the_zip64_record_counts_where_torch_reads_it(staticify, good_model, tmp_path,
                                                      field, offset):
    """torch.jit.save writes a zip64 directory record beside the 32-bit end
    record, and libtorch's miniz takes the zip64 record's counts and
    offsets whenever its locator is there: a 32-bit field gone wrong loads
    in torch, and in staticify."""
    data = bytearray(good_model.read_bytes())
    end = data.rfind(b"PK\x05\x06")
    assert data.rfind(b"PK\x06\x07") == end - 20, "torch.jit.save wrote no zip64 locator"
    data[end + offset:end + offset + 2] = b"\x33\x33"
    bad = tmp_path / "bad.pt"
    bad.write_bytes(bytes(data))
    assert _loads_in_torch(bad), field
    out = tmp_path / "out.pt"
    proc = staticify(bad, "-o", out, check=False)
    assert proc.returncode == 0, proc.stderr
    assert _same_outputs(out, good_model)


def test_unreadable_records_torch_never_reads_are_left_out(staticify, good_model, tmp_path):
    """A bad debug record makes staticify rebuild the archive without it; a
    record whose deflated bytes are corrupt, under a name torch.jit.load never
    reads, must not stop that rebuild (nor does it stop torch.jit.load)."""
    bad = tmp_path / "bad.pt"
    corrupt = tmp_path / "corrupt.pt"
    with_record(good_model, bad, ".debug_pkl", lambda data: b"\x80\x02garbage")
    with zipfile.ZipFile(bad, "a", compression=zipfile.ZIP_DEFLATED) as w:
        top = w.namelist()[0].split("/")[0]
        w.writestr(f"{top}/code/unused.py.debug_junk", b"x" * 4096)
    data = bytearray(bad.read_bytes())
    at = data.find(b"unused.py.debug_junk") + len("unused.py.debug_junk")
    data[at + 8:at + 16] = b"\xff" * 8  # inside the deflated bytes
    corrupt.write_bytes(bytes(data))
    assert _loads_in_torch(corrupt)
    out = tmp_path / "out.pt"
    proc = staticify(corrupt, "-o", out, check=False)
    assert proc.returncode == 0, proc.stderr
    assert _same_outputs(out, good_model)


def _corrupt_deflated(src, dst, suffix):
    """Copies archive src to dst with every record deflated and 16 bytes in
    the middle of the one ending in suffix overwritten: a stream that no
    longer inflates to the CRC the zip directory records."""
    with_record(src, dst, suffix, lambda data: data, compress=True)
    data = bytearray(dst.read_bytes())
    with zipfile.ZipFile(dst) as z:
        info = next(i for i in z.infolist() if i.filename.endswith(suffix))
    header = info.header_offset
    name_length, extra_length = struct.unpack("<HH", data[header + 26:header + 30])
    start = header + 30 + name_length + extra_length
    middle = start + info.compress_size // 2
    data[middle:middle + 16] = b"\x5a" * 16
    try:
        inflated = zlib.decompressobj(-15).decompress(bytes(data[start:start + info.compress_size]))
        assert zlib.crc32(inflated) != info.CRC
    except zlib.error:
        pass
    dst.write_bytes(bytes(data))
    return dst


def test_a_corrupt_deflated_debug_record_costs_a_warning(staticify, good_model, tmp_path):
    """libtorch inflates without checking: a corrupt stream hands it an
    uninitialized buffer, which its saver may fail to read. staticify checks
    each DEFLATE record's CRC and drops a bad debug record with a warning."""
    bad = _corrupt_deflated(good_model, tmp_path / "bad.pt", ".debug_pkl")
    out = tmp_path / "out.pt"
    proc = staticify(bad, "-o", out, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "compressed bytes do not inflate to the bytes its zip directory describes" \
        in proc.stderr, proc.stderr
    assert _same_outputs(out, good_model)


def test_a_corrupt_deflated_code_record_is_refused(staticify, good_model, tmp_path):
    bad = _corrupt_deflated(good_model, tmp_path / "bad.pt", "models.py")
    run_hostile(staticify, bad, tmp_path,
                "is truncated or corrupt (record 'code/__torch__/models.py': its compressed "
                "bytes do not inflate")


def _limit_file_size(limit):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # the binary ignores it itself
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_full_disk_leaves_nothing(staticify, save, tmp_path):
    """A write that fails (RLIMIT_FSIZE: EFBIG, as a full disk gives ENOSPC)
    while saving: one line, exit 1, and neither the module nor the report
    nor a temporary file is left, although the report alone would fit."""
    model = save(models.SmallCNN())
    out, report = tmp_path / "out.pt", tmp_path / "report.json"
    proc = subprocess.run([str(staticify.path), model, "-o", out, "--report-json", report],
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=_limit_file_size(16 << 10))
    assert proc.returncode == 1, proc
    assert_clean_failure(proc, tmp_path, "cannot write", out)
    assert "File too large" in proc.stderr
    assert not report.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]


def test_empty_option_values_are_refused(staticify, good_model):
    for option in ("-o", "--report-json", "--dot", "--method", "--output"):
        proc = staticify(good_model, option, "", check=False)
        assert proc.returncode == 2, (option, proc)
        assert f"{option} needs a value, got an empty one" in proc.stderr


@pytest.mark.parametrize("bound", ["x= 5", "x=5 ", " x=5", "x=-1", "x=5x", "=5", "x="])
def test_malformed_bounds_are_refused(staticify, good_model, bound):
    proc = staticify(good_model, "--bound", bound, check=False)
    assert proc.returncode == 2, (bound, proc)
    assert "--bound" in proc.stderr


def test_bound_naming_nothing_is_refused(staticify, good_model, tmp_path):
    out = tmp_path / "out.pt"
    proc = staticify(good_model, "-o", out, "--bound", "no_such_name=5", check=False)
    assert_clean_failure(proc, tmp_path, "--bound no_such_name=5 names no variable", out)
    # A name the method has is accepted.
    staticify(good_model, "-o", out, "--bound", "indices=5")


def test_repeated_method_runs_once(staticify, good_model, tmp_path):
    report = tmp_path / "r.json"
    staticify(good_model, "--method", "forward", "--method", "forward", "--report-json", report)
    assert [m["name"] for m in json.loads(report.read_text())["methods"]] == ["forward"]


def test_messages_name_the_option_given(staticify, good_model, tmp_path):
    proc = staticify(good_model, "--report-json", tmp_path, check=False)
    assert_clean_failure(proc, tmp_path, "give a file path to --report-json")
    proc = staticify(good_model, "--output", tmp_path / "a.pt", "--report-json",
                     tmp_path / "a.pt", check=False)
    assert_clean_failure(proc, tmp_path, "--output and --report-json both name")
    proc = staticify(good_model, "-o", tmp_path / "a.pt", "-o", tmp_path / "b.pt", check=False)
    assert proc.returncode == 2 and "-o is given twice" in proc.stderr


class Positives(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x > 0)


class DeadCall(torch.nn.Module):
    """Scripting keeps a call whose result is unused (a call may have
    effects); once inlined, its nonzero is dead code."""

    def __init__(self):
        super().__init__()
        self.positives = Positives()

    def forward(self, x):
        unused = self.positives(x)
        return x * 2


def test_dead_data_dependent_code_is_not_saved(staticify, save, tmp_path):
    """The report calls the graph static; the saved graph must be that graph,
    not the input with its dead nonzero."""
    model = save(DeadCall())
    assert "aten::nonzero" in str(torch.jit.load(str(model)).forward.inlined_graph)
    out, report = tmp_path / "out.pt", tmp_path / "r.json"
    staticify(model, "-o", out, "--report-json", report)
    method = json.loads(report.read_text())["methods"][0]
    assert method["after"]["static"] is True
    saved = torch.jit.load(str(out))
    assert "aten::nonzero" not in str(saved.forward.inlined_graph)
    x = torch.randn(10)
    assert torch.equal(saved(x), x * 2)


def _with_extra_records(src, dst, extra, drop_data_of=None):
    """Copies archive src to dst, adding records {suffix: bytes} under its
    folder, and emptying the storage records whose name ends in drop_data_of."""
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as w:
        prefix = z.namelist()[0].split("/")[0]
        for info in z.infolist():
            data = z.read(info.filename)
            if drop_data_of and info.filename.endswith(drop_data_of):
                data = b""
            w.writestr(info.filename, data)
        for suffix, data in extra.items():
            w.writestr(f"{prefix}/{suffix}", data)
    return dst


def test_traced_inputs_written_without_data_load(staticify, save, tmp_path):
    """torch.jit.save (2.x) writes a traced module's example inputs without
    their data, in traced_inputs.pkl over empty records; libtorch reads them
    only to restore shapes. Such an archive loads; an empty record behind the
    module's own tensors is still refused."""
    torch.manual_seed(0)
    path = save(torch.nn.Linear(3, 2))
    with zipfile.ZipFile(path) as z:
        data_pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
        storages = [n.split("/")[-1] for n in z.namelist() if "/data/" in n]
        pickled = z.read(data_pkl)
    assert storages, "the module's tensors are stored in data/"
    extra = {"traced_inputs.pkl": pickled}
    extra.update({f"traced_inputs/{key}": b"" for key in storages})
    traced = _with_extra_records(path, tmp_path / "traced.pt", extra)
    out = tmp_path / "out.pt"
    staticify(traced, "-o", out)
    x = torch.rand(4, 3)
    assert torch.equal(torch.jit.load(str(out))(x), torch.jit.load(str(path))(x))

    refused = tmp_path / "refused"
    refused.mkdir()
    emptied = _with_extra_records(path, refused / "emptied.pt", {},
                                  drop_data_of=f"/data/{storages[0]}")
    run_hostile(staticify, emptied, refused, f"record 'data/{storages[0]}' holds 0 bytes")
