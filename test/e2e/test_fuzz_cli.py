"""Smoke run of the CLI mutation fuzzer (test/fuzz/cli_fuzz.py), and proof that
its classifier can fail.

The smoke run uses a fixed seed and enough cases that every mutator runs at
least once (the first len(MUTATORS) cases run each once); it fails on any crash,
hang, leaked libtorch text, malformed message, leftover file or modified input,
and names the reproducers. A long run: see the fuzzer's docstring.
"""
import collections
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fuzz"))
import cli_fuzz  # noqa: E402

SMOKE_SEED = 20240601
SMOKE_CASES = 64  # every mutator once, then 22 drawn by weight


def test_fuzz_smoke(staticify, tmp_path):
    assert SMOKE_CASES >= len(cli_fuzz.MUTATORS)
    report = cli_fuzz.run(cases=SMOKE_CASES, seed=SMOKE_SEED, binary=staticify.path,
                          out=tmp_path / "fuzz", jobs=2, timeout=20, log=lambda *a: None)
    ran = collections.Counter(r.mutator for r in report.results)
    assert set(ran) == set(cli_fuzz.MUTATORS), set(cli_fuzz.MUTATORS) - set(ran)
    assert len(report.results) == SMOKE_CASES
    if report.fatal():
        pytest.fail(report.summary(), pytrace=False)


# Fake binaries: each must land in its class, or the smoke run could pass vacuously.
FAKES = {
    "crash": 'kill -SEGV $$\n',
    "leaked-internals": 'echo "staticify: error: INTERNAL ASSERT FAILED at x.cpp:1" >&2\nexit 1\n',
    "leftover": 'touch "$3.tmp.123"\necho "staticify: error: cannot write" >&2\nexit 1\n',
    "hang": 'sleep 30\n',
    "bad-message": 'echo "staticify: error: first" >&2\necho "second line" >&2\nexit 1\n',
    "modified-input": 'echo x >> "$1"\necho "staticify: error: no" >&2\nexit 1\n',
    "ok": 'echo "staticify: warning: w" >&2\necho "staticify: error: bad input" >&2\nexit 1\n',
}


@pytest.mark.parametrize("expected", sorted(FAKES))
def test_classifier_catches_fake_binaries(tmp_path, expected):
    fake = tmp_path / "fake-staticify"
    fake.write_text("#!/bin/sh\n" + FAKES[expected])
    fake.chmod(0o755)
    case = tmp_path / "case"
    case.mkdir()
    (case / "input.pt").write_bytes(b"PK\x03\x04 not really")
    mutation = cli_fuzz.Mutation("a fake input", archive=False)
    outcome = cli_fuzz.execute(fake, case, mutation, timeout=2)
    problems = cli_fuzz.classify(outcome)
    assert (problems[0] if problems else "ok") == expected, (problems, outcome)
    if expected == "leftover":
        assert outcome.tmp_files == ["out.pt.tmp.123"]


# Cases the CLI campaigns found crashing (docs/reliability.md), each rerun
# exactly. Seed 1: a debug record with a 100,000-character line (std::regex
# overflowed the stack on it), a debug record renamed `.deBug_pkl` (libtorch's
# zip reader ignores case; the guard did not), a tensor whose stride reads past
# its storage. Seed 2: a duplicated `__buffers__` token, an untyped class
# attribute libtorch's class parser dereferences the missing type of. Seed
# 3501 (false refusals): a debug record to drop beside a record renamed out of
# the archive's folder (libtorch's getAllRecords throws on it), a List[int]
# attribute built as a tensor list (loads, and libtorch cannot save it);
# seed 3601: a LongStorage renamed QInt8Storage (a quantized tensor with no
# quantizer: loads, and libtorch asserts at save).
@pytest.mark.parametrize("seed,case_id", [(1, 501), (1, 664), (1, 757),
                                          (2, 4218), (3501, 1848),
                                          (3501, 1926), (3601, 2856)])
def test_campaign_regressions(staticify, tmp_path, seed, case_id):
    report = cli_fuzz.run(cases=case_id + 1, seed=seed, binary=staticify.path,
                          out=tmp_path / "fuzz", jobs=1, timeout=20,
                          case_ids=[case_id], log=lambda *a: None)
    assert [r.id for r in report.results] == [case_id]
    if report.fatal():
        pytest.fail(report.summary(), pytrace=False)
