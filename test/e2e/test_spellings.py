"""Spelling variants of the idioms (spellings.py) through the real binary:
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
KNOWN_DIVERGENT = {
    # detectron2's Instances filter: three selections by one mask, each cut
    # where it is returned, read their one count once (the cuts' count
    # computations merge after the rewrites); spelled with masked_select,
    # each selection's form computes its own count, and the three reads stay.
    **{("instances-filter", rules): "(3, 1) -> (3, 3): bound: materialized: it is returned "
       "(three counts, one per selection)"
       for rules in ("mask-select-function", "mask-select-method")},
    # masked_select(x, m) broadcasts x against m first: x of (2, n) by m of
    # (n,) selects each true element twice. Two selections by one mask of
    # bases of unknown shapes may so differ in count, and their counts are not
    # shared (x[m] raises where m is not x's shape, so y[m] and x[m] always
    # agree); the elementwise op that combines them materializes both. A guard
    # on their lengths (metadata, no sync) would make them one.
    **{(idiom, rules): "masked_select's count is its broadcast mask's: not "
       "provably the other selection's"
       for idiom in ("hf-active-loss", "hf-token-accuracy", "metrics-accuracy-ignore",
                     "metrics-mae-masked", "metrics-confusion-bincount",
                     "metrics-rmse-valid", "dice-ignore", "lovasz-ignore",
                     "keypoint-visible-loss")
       for rules in ("mask-select-function", "mask-select-method")},
    # A count read as int(torch.count_nonzero(x)) rather than x.nonzero().numel().
    ("fast-rcnn-accuracy", "nonzero-count-count-nonzero"):
        "(2, 1) -> (2, 2): aten::Int kept: bound: uses with no bounded form "
        "materialize: 'aten::tensor'",
    # masked_select(loss, keep) rather than loss[keep] before a topk of
    # min(8, its numel): masked-reduce's count of the selection (its numel,
    # over the broadcast mask) and bound's count of it are not seen as one,
    # so the topk's k and rows read the host apart.
    **{("seg-hardest-k", rules): "(1, 0) -> (1, 1): pipeline: the rewritten method would "
       "reach the host at 2 points instead of 1"
       for rules in ("mask-select-function", "mask-select-method")},
}


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
def run(staticify, workdir):
    """Scripts a module, saves it as workdir/stem.pt and runs staticify on
    it: (scripted, rewritten, sync points); each stem once per session (the
    twins are shared by their variants)."""
    done = {}

    def _run(module, stem):
        if stem not in done:
            path, out, report = (workdir / f"{stem}{ext}" for ext in (".pt", ".out.pt", ".json"))
            torch.jit.script(module).save(str(path))
            staticify(path, "-o", out, "--report-json", report)
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
