"""The op matrix (op_matrix.py) through the command (in this process,
conftest.InProcess: one run per op): for each op, the
program applying it to bounded values, staticified with --padded-outputs,
equals the op on the cut tensors on 500 generated cases (counts 0, 1, all
and random; the unselected rows NaN, +-inf, 1e30 or random), and has a
bounded transfer (no sync point left) unless WITHOUT_TRANSFER says why not.
Every op the idioms apply to data-dependent values has a row or a reason.
bench/op_matrix_table.py writes the same rows into docs/coverage.md."""
import pytest
import torch

import op_matrix
from idioms import IDIOMS

CASES = 500


@pytest.mark.parametrize("op,expr", op_matrix.ROWS, ids=[r[0] for r in op_matrix.ROWS])
def test_op_matrix(staticify_in_process, tmp_path, op, expr):
    row = op_matrix.measure(op, expr, staticify_in_process.path, tmp_path, CASES,
                            run=lambda argv: staticify_in_process(*argv, check=False))
    assert "error" not in row, row["error"]
    assert row["diff"] is None, row["diff"]
    assert row["compared"] >= CASES // 2, row  # the op runs on most cuts
    if op in op_matrix.WITHOUT_TRANSFER:
        assert not row["bounded"], f"{op} has a bounded transfer now: remove it from " \
                                   "WITHOUT_TRANSFER"
    else:
        assert row["bounded"], (op, row["reason"])


def test_every_idiom_op_has_a_row_or_a_reason():
    covered = {op_matrix.row_op(name) for name, _ in op_matrix.ROWS} | set(op_matrix.NO_ROW)
    used = set()
    for _, _, module, _ in IDIOMS:
        used |= op_matrix.data_dependent_ops(torch.jit.script(module).inlined_graph)
    assert used - covered == set()
    assert len(used) > 30  # the walk finds the idioms' ops
