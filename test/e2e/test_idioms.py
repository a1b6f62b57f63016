"""The idioms of real projects (idioms.py) through the real binary: the
output equals the original on inputs whose selections keep nothing,
everything or some (where the original raises, the rewrite may not), and no
idiom reaches the host at more points after rewriting than before.
bench/idiom_table.py turns the same runs into docs/coverage.md's table."""
import json

import pytest
import torch

from idioms import IDIOMS
from test_never_more_syncs import sync_points
from test_rewrites import compare_outputs

TRIALS = 24


@pytest.mark.parametrize("name,source,module,inputs", IDIOMS, ids=[i[0] for i in IDIOMS])
def test_idiom(staticify, save, tmp_path, name, source, module, inputs):
    path = save(module)
    out, report_path = tmp_path / "out.pt", tmp_path / "report.json"
    staticify(path, "-o", out, "--report-json", report_path)
    before, after = sync_points(json.loads(report_path.read_text()))
    assert after <= before, (name, before, after)
    compared = compare_outputs(torch.jit.load(str(path)), torch.jit.load(str(out)),
                               inputs, TRIALS, name)
    assert compared >= TRIALS // 2, (name, compared)
