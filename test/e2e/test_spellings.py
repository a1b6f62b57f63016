"""Spelling variants of the idioms (spellings.py) through the command (in
this process, conftest.InProcess: hundreds of programs):
each variant computes what its twin (the idiom as idioms.py writes it)
computes, staticify's output equals the variant's on inputs whose selections
keep nothing, everything or some, and staticify ends at the same sync points
(before, after) on the variant as on its twin.

Where the engine does not yet see through a spelling, KNOWN_DIVERGENT names
the variant and why: those are expected to fail (strictly: one that starts
passing must leave the list), so this file is also the worklist of spellings
the engine's canonicalization has yet to learn. `spellings.py --compare BIN`
prints the current list with the reasons the reports give."""
import collections
import json

import pytest
import torch

import idioms
import spellings
from test_never_more_syncs import sync_points
from test_rewrites import compare_outputs

TRIALS = 6

VARIANTS = spellings.all_variants()

# (idiom, rules) -> why its sync points differ from its twin's: twin's
# (before, after) -> the variant's, and the note of what the variant keeps.
KNOWN_DIVERGENT = {}


class Diverges(AssertionError):
    """The variant's sync points are not its twin's (the one failure
    KNOWN_DIVERGENT expects: any other is a failure still)."""


def _param(variant):
    reason = KNOWN_DIVERGENT.get((variant.idiom, variant.rules))
    marks = [pytest.mark.xfail(strict=True, raises=Diverges, reason=reason)] if reason else []
    return pytest.param(variant, marks=marks, id=f"{variant.idiom}/{variant.rules}")


def test_every_idiom_has_its_spellings():
    counts = collections.Counter(v.idiom for v in VARIANTS)
    assert {name for name, *_ in idioms.IDIOMS} == set(counts)
    assert min(counts.values()) >= spellings.MIN_VARIANTS, counts
    assert len({(v.idiom, v.source) for v in VARIANTS}) == len(VARIANTS)


def test_known_divergent_are_variants():
    assert set(KNOWN_DIVERGENT) <= {(v.idiom, v.rules) for v in VARIANTS}


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("spellings")


@pytest.fixture(scope="session")
def run(staticify_in_process, workdir):
    """Scripts a module, saves it as workdir/stem.pt and runs staticify on
    it: (scripted, rewritten, sync points); each stem once per session (the
    twins are shared by their variants)."""
    done = {}

    def _run(module, stem):
        if stem not in done:
            path, out, report = (workdir / f"{stem}{ext}" for ext in (".pt", ".out.pt", ".json"))
            torch.jit.script(module).save(str(path))
            staticify_in_process(path, "-o", out, "--report-json", report)
            done[stem] = (torch.jit.load(str(path)), torch.jit.load(str(out)),
                          sync_points(json.loads(report.read_text())))
        return done[stem]

    return _run


@pytest.mark.parametrize("variant", [_param(v) for v in VARIANTS])
def test_spelling(run, workdir, variant):
    _, _, module, inputs = next(i for i in idioms.IDIOMS if i[0] == variant.idiom)
    twin, _, twin_syncs = run(module, variant.idiom)
    scripted, rewritten, syncs = run(spellings.materialize(variant, workdir),
                                     spellings.module_name(variant))
    # The same program: its outputs are the twin's, and staticify's its own.
    compare_outputs(twin, scripted, inputs, TRIALS, variant.idiom)
    compared = compare_outputs(scripted, rewritten, inputs, TRIALS, variant.idiom)
    assert compared >= TRIALS // 2, (variant.idiom, compared)
    if syncs != twin_syncs:
        raise Diverges(f"{variant.idiom} [{variant.rules}]: sync points {syncs}, "
                       f"its twin's {twin_syncs}")
