"""The bounded forms (passes/forms/bounded_forms.py), scripted from the very
file the C++ build embeds, against the PyTorch ops they stand for: the valid
rows of every padded result must equal the op's result exactly."""
import pathlib

import pytest
import torch

FORMS = pathlib.Path(__file__).resolve().parents[2] / "passes" / "forms" / "bounded_forms.py"


def compile_forms():
    """The forms scripted from their file (its imports and aliases left out,
    as the C++ build leaves them)."""
    source = FORMS.read_text()
    return torch.jit.CompilationUnit(source[source.index("\ndef ") + 1:])


@pytest.fixture(scope="module")
def cu():
    return compile_forms()


def shapes(gen, trials=300):
    for _ in range(trials):
        rank = int(torch.randint(0, 4, (), generator=gen))
        yield [int(s) for s in torch.randint(0, 5, (rank,), generator=gen)]


def valid(padded, count):
    return padded[:int(count)]


def test_nonzero_where_and_selections(cu):
    gen = torch.Generator().manual_seed(0)
    for shape in shapes(gen):
        x = torch.randint(0, 3, shape, generator=gen)
        m = x > 0
        assert torch.equal(valid(*cu.nonzero(m)), torch.nonzero(m)), shape
        for k in range(m.dim()):
            assert torch.equal(valid(*cu.where_index(m, k)), torch.where(m)[k])
        if m.dim() >= 1:
            for select in (cu.select_rows, cu.select_checked_rows):
                assert torch.equal(valid(*select(x.float(), m)), x.float()[m])
        assert torch.equal(valid(*cu.masked_select(x, m)), torch.masked_select(x, m))


def test_checked_rows_raise_where_a_selection_raises(cu):
    # A mask whose shape is not the leading dims' raises in x[m]; a reshape
    # alone would take [4] over [0, 3] (no element) and [3, 2] over [2, 3].
    for shape, mask_shape in (((0, 3), (4,)), ((2, 3), (3, 2)), ((2, 3), (3,))):
        x, m = torch.randn(shape), torch.ones(mask_shape, dtype=torch.bool)
        with pytest.raises(IndexError):
            x[m]
        with pytest.raises(RuntimeError):
            cu.select_checked_rows(x, m)
        with pytest.raises(RuntimeError):
            cu.checked_rows_at(x, m, torch.zeros(1, dtype=torch.long))


def test_unique_family(cu):
    gen = torch.Generator().manual_seed(1)
    for shape in shapes(gen):
        x = torch.randint(0, 3, shape, generator=gen)
        for inverse in (False, True):
            for counts in (False, True):
                v, inv, cnt, c = cu.unique(x, inverse, counts)
                ev, einv, ecnt = torch.ops.aten._unique2(x, True, inverse, counts)
                assert torch.equal(valid(v, c), ev)
                # Outputs not asked for are unspecified: PyTorch 1.13 returns
                # the inverse anyway on the CPU, 2.x an empty tensor.
                if inverse:
                    assert torch.equal(inv, einv)
                if counts:
                    assert torch.equal(valid(cnt, c), ecnt)
        v, inv, cnt, c = cu.unique_consecutive(x, True, True)
        ev, einv, ecnt = torch.unique_consecutive(x, return_inverse=True,
                                                  return_counts=True)
        assert torch.equal(valid(v, c), ev) and torch.equal(inv, einv)
        assert torch.equal(valid(cnt, c), ecnt)
    for _ in range(300):
        n, m = int(torch.randint(0, 6, (), generator=gen)), int(torch.randint(1, 3, (), generator=gen))
        x = torch.randint(0, 2, (n, m, 2), generator=gen)
        v, inv, cnt, c = cu.unique_rows(x)
        ev, einv, ecnt = torch.ops.aten.unique_dim(x, 0, True, True, True)
        assert torch.equal(valid(v, c), ev) and torch.equal(inv, einv)
        assert torch.equal(valid(cnt, c), ecnt)


def test_random_prefix_is_a_prefix_of_a_permutation(cu):
    torch.manual_seed(0)
    for n in (0, 1, 5, 10):
        for k in (0, 3, 10):
            idx = cu.random_prefix(torch.tensor(n), 10, k, None)
            assert idx.shape == (k,)
            live = idx[:min(n, k)]
            assert live.unique().numel() == live.numel() and bool((live < n).all())


def test_gather_cat_put(cu):
    src = torch.arange(10) * 10
    # Negative indices count from the valid length (4), padding reads row 0.
    assert cu.gather_rows(src, torch.tensor(4), torch.tensor([0, -1, 2]), None).tolist() == [0, 30, 20]
    assert cu.gather_rows(src, torch.tensor(4), torch.tensor([3, 1, 7]),
                          torch.tensor(2)).tolist() == [30, 10, 0]
    assert cu.gather_rows(src[:0], torch.tensor(0), torch.zeros(2, dtype=torch.long),
                          torch.tensor(0)).shape == (2,)
    padded, count = cu.cat_rows([torch.tensor([1, 2, 0, 0]), torch.tensor([7, 8, 9])],
                                [torch.tensor(2), torch.tensor(3)])
    assert valid(padded, count).tolist() == [1, 2, 7, 8, 9] and padded.shape == (7,)
    x = torch.zeros(6, dtype=torch.uint8)
    cu.put_rows(x, torch.tensor([1, -1, 5, 0]), torch.tensor(2), torch.tensor(1, dtype=torch.uint8))
    assert x.tolist() == [0, 1, 0, 0, 0, 1]  # the padding rows (5, 0) are not written


def test_cat_two_rows_and_vector_gathers(cu):
    """cat_two_rows against cat of the valid rows, over parts of any bounds
    and counts (0, all, some; 1-D and 2-D rows), and gather_vector_rows
    against gather_rows, which wraps negative indices from the count."""
    gen = torch.Generator().manual_seed(1)
    for _ in range(400):
        trailing = [] if bool(torch.randint(0, 2, (), generator=gen)) else [3]
        bounds = [int(b) for b in torch.randint(0, 6, (2,), generator=gen)]
        counts = [int(torch.randint(0, b + 1, (), generator=gen)) for b in bounds]
        parts = [torch.randn([b] + trailing, generator=gen) for b in bounds]
        padded, count = cu.cat_two_rows(parts[0], torch.tensor(counts[0]),
                                        parts[1], torch.tensor(counts[1]))
        assert padded.shape[0] == sum(bounds)
        assert torch.equal(valid(padded, count),
                           torch.cat([parts[0][:counts[0]], parts[1][:counts[1]]]))
        src = torch.cat(parts)
        n = int(torch.randint(0, src.shape[0] + 1, (), generator=gen))
        if n == 0:
            continue
        index = torch.randint(-n, n, (7,), generator=gen)
        live = torch.tensor(int(torch.randint(0, 8, (), generator=gen)))
        for index_count in (None, live):
            want = cu.gather_rows(src, torch.tensor(n), index, index_count)
            got = cu.gather_vector_rows(src, torch.tensor(n), index, index_count, True, False,
                                        True)
            assert torch.equal(got, want)
        nonneg = index.abs().clamp_max(n - 1)
        assert torch.equal(cu.gather_vector_rows(src, torch.tensor(n), nonneg, None, False,
                                                 True, False), src[nonneg])
    empty = torch.zeros(0, 3)
    assert cu.gather_vector_rows(empty, torch.tensor(0), torch.zeros(4, dtype=torch.long),
                                 torch.tensor(0), False, True, True).shape == (4, 3)
    # Unguarded (a static index into a vector): an empty vector raises for
    # an index, as the original's does, and gathers nothing for none.
    nothing, some = torch.zeros(0), torch.tensor([0, 1])
    with pytest.raises(IndexError):
        nothing[some]
    with pytest.raises(RuntimeError):
        cu.gather_vector_rows(nothing, torch.tensor(0), some, None, False, False, False)
    assert cu.gather_vector_rows(nothing, torch.tensor(0), some[:0], None, False, False,
                                 False).shape == (0,)
    # Rows of nothing: src[i] reads no element and raises for no index;
    # index_select (checked) raises for one out of range, as PyTorch's.
    hollow, out_of_range = torch.zeros(2, 0), torch.tensor([0, 5])
    assert torch.equal(cu.gather_vector_rows(hollow, torch.tensor(2), out_of_range, None,
                                             False, False, True), hollow[out_of_range])
    with pytest.raises(RuntimeError):
        hollow.index_select(0, out_of_range)
    with pytest.raises(RuntimeError):
        cu.gather_vector_rows(hollow, torch.tensor(2), out_of_range, None, False, True, False)


def test_put_at_mask_is_a_masked_store(cu):
    """put_at_mask(x, m, rows) against x[m] = rows[:m.sum()], rows padded
    with garbage past the count, 1-D and 2-D x, masks keeping none, all or
    some; out of place it leaves x as it was."""
    gen = torch.Generator().manual_seed(3)
    for _ in range(300):
        n = int(torch.randint(0, 8, (), generator=gen))
        trailing = [] if bool(torch.randint(0, 2, (), generator=gen)) else [3]
        x = torch.randn([n] + trailing, generator=gen)
        kind = int(torch.randint(0, 3, (), generator=gen))
        m = torch.rand(n, generator=gen) < (0.0, 1.0, 0.5)[kind]
        count = int(m.sum())
        pad = int(torch.randint(0, 3, (), generator=gen))
        rows = torch.randn([count + pad] + trailing, generator=gen)
        rows[count:] = float("nan")  # the padding is never written
        want = x.clone()
        want[m] = rows[:count]
        before = x.clone()
        assert torch.equal(cu.put_at_mask_out(x, m, rows), want)
        assert torch.equal(x, before)
        assert torch.equal(cu.put_at_mask(x, m, rows), want) and torch.equal(x, want)


def test_unique_consecutive_rows_is_torchs(cu):
    """unique_consecutive_rows against torch.unique_consecutive(dim=0):
    values, inverse and counts, rows of ints and of floats with NaN."""
    gen = torch.Generator().manual_seed(4)
    for _ in range(300):
        n = int(torch.randint(0, 9, (), generator=gen))
        x = torch.randint(0, 3, (n, 2), generator=gen)
        if bool(torch.randint(0, 2, (), generator=gen)):
            x = x.float()
            x[torch.rand(n, 2, generator=gen) < 0.1] = float("nan")
        want = torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=0)
        values, inverse, counts, count = cu.unique_consecutive_rows(x, True, True)
        assert torch.equal(valid(values, count), want[0]) or (
            torch.allclose(valid(values, count), want[0], equal_nan=True)), x
        assert torch.equal(inverse, want[1]) and torch.equal(valid(counts, count), want[2]), x


def test_coordinates_share_a_stride(cu):
    """coordinate_at given row_stride is coordinate, for every rank and k,
    sizes with zeros included (where a size is 0 there is no position to
    divide, and row_stride of dim 0 may differ)."""
    gen = torch.Generator().manual_seed(2)
    for shape in shapes(gen):
        n = 1
        for s in shape:
            n *= s
        flat = torch.arange(n)
        for k in range(-len(shape), max(len(shape), 1)):
            if len(shape) == 0 and k != 0:
                continue
            assert torch.equal(cu.coordinate_at(flat, shape, k, cu.row_stride(shape, n, k)),
                               cu.coordinate(flat, shape, k)), (shape, k)
            if len(shape) > 0:
                # every position in row-major order: nonzero of ones
                want = torch.nonzero(torch.ones(shape))[:, k]
                assert torch.equal(cu.coordinate(flat, shape, k), want), (shape, k)


def test_put_forms_equal_index_put_with_repeats(cu):
    """x[index] = value against PyTorch on CPU for put_rows (0-d value) and
    put_row_values (a row per index row): negative and repeated indices
    (the last row of a repeat wins, as the CPU kernel writes them in order),
    padding holding anything, an index out of range raising."""
    gen = torch.Generator().manual_seed(7)
    for trial in range(2000):
        n = int(torch.randint(1, 8, (), generator=gen))
        rows = int(torch.randint(0, 10, (), generator=gen))
        count = int(torch.randint(0, rows + 1, (), generator=gen))
        index = torch.randint(-n, n, (rows,), generator=gen)
        padded = index.clone()
        padded[count:] = torch.randint(-50, 50, (rows - count,), generator=gen)
        tail = [3] if trial % 2 else []
        x = torch.randn([n] + tail, generator=gen)
        value = torch.randn([rows] + tail, generator=gen)
        want = x.clone()
        want[index[:count]] = value[:count]
        got = cu.put_row_values(x.clone(), padded, torch.tensor(count), value)
        assert torch.equal(got, want), (index, count, value)
        want = x.clone()
        want[index[:count]] = 2.5
        got = cu.put_rows(x.clone(), padded, torch.tensor(count), torch.tensor(2.5))
        assert torch.equal(got, want), (index, count)
    for bad in ([0, 4], [0, -5]):
        with pytest.raises(RuntimeError):
            cu.put_row_values(torch.zeros(4), torch.tensor(bad), torch.tensor(2), torch.ones(2))
        with pytest.raises(RuntimeError):
            cu.put_rows(torch.zeros(4), torch.tensor(bad), torch.tensor(2), torch.tensor(1.0))


def test_add_rows_equals_index_add_bit_for_bit(cu):
    """index_add(_)(0, index, source) against PyTorch on CPU: repeated
    indices, source padded past the index, padding holding anything; the
    sums equal bit for bit (the live rows add in their order), and an index
    out of range, negative included, raises as index_add does."""
    gen = torch.Generator().manual_seed(8)
    for trial in range(2000):
        n = int(torch.randint(1, 8, (), generator=gen))
        rows = int(torch.randint(0, 10, (), generator=gen))
        extra = int(torch.randint(0, 3, (), generator=gen))
        count = int(torch.randint(0, rows + 1, (), generator=gen))
        index = torch.randint(0, n, (rows,), generator=gen)
        padded = index.clone()
        padded[count:] = torch.randint(-50, 50, (rows - count,), generator=gen)
        tail = [3] if trial % 2 else []
        x = torch.randn([n] + tail, generator=gen)
        source = torch.randn([rows + extra] + tail, generator=gen)
        want = x.clone().index_add_(0, index[:count], source[:count])
        assert torch.equal(cu.add_rows(x, padded, torch.tensor(count), source), want)
        inplace = x.clone()
        cu.add_rows_(inplace, padded, torch.tensor(count), source)
        assert torch.equal(inplace, want), (index, count)
    for bad in ([0, 4], [0, -1]):
        with pytest.raises(RuntimeError):
            cu.add_rows_(torch.zeros(4), torch.tensor(bad), torch.tensor(2), torch.ones(2))


def test_sort_rows_sorts_the_live_rows_first(cu):
    """Against torch.sort(stable=True) of the live rows alone, padding rows
    holding anything (NaN, infinities, extremes, ties), any dtype and rank."""
    gen = torch.Generator().manual_seed(3)
    pool = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, 1.0, 2.5])
    for trial in range(400):
        rows = int(torch.randint(0, 7, (), generator=gen))
        count = int(torch.randint(0, rows + 1, (), generator=gen))
        shape = [rows] + [int(s) for s in torch.randint(1, 3, (trial % 3,), generator=gen)]
        picks = torch.randint(0, len(pool), shape, generator=gen)
        padded = pool[picks]
        if trial % 4 == 1:
            padded = (padded.nan_to_num(0.0, 100.0, -100.0) * 3).to(torch.int64)
        elif trial % 4 == 2:
            padded = padded > 0.5
        for descending in (False, True):
            values, order = cu.sort_rows(padded, torch.tensor(count), descending)
            want_values, want_order = torch.sort(padded[:count], dim=0,
                                                 descending=descending, stable=True)
            assert torch.equal(order[:count], want_order), (padded, count, descending)
            got = values[:count]
            if got.is_floating_point():
                assert torch.equal(got.isnan(), want_values.isnan())
                got, want_values = got.nan_to_num(7.0), want_values.nan_to_num(7.0)
            assert torch.equal(got, want_values)
            assert values.shape == padded.shape and order.dtype == torch.long


DTYPES_OF_TOPK = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
                  torch.int16, torch.int8, torch.uint8, torch.int64, torch.bool]


def test_topk_rows_is_torch_topk_of_the_live_rows(cu):
    """topk_rows(x, count, k) against torch.topk of the live rows alone, for
    every dtype (those the float64 key holds, and int64/float64, which take
    sort_rows), padding and live rows holding NaN, infinities, -0.0 and
    ties, any k and count: the first min(k, count) values are topk's, each
    index a live row holding its value, no row twice. Equal values may come
    in another order, as topk's do."""
    gen = torch.Generator().manual_seed(4)
    pool = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, 1.0,
                         -2.5, 1e30, -1e30])
    for trial in range(2000):
        dtype = DTYPES_OF_TOPK[trial % len(DTYPES_OF_TOPK)]
        rows = int(torch.randint(0, 9, (), generator=gen))
        count = int(torch.randint(0, rows + 1, (), generator=gen))
        k = int(torch.randint(0, rows + 3, (), generator=gen))
        shape = [rows] + [int(s) for s in torch.randint(1, 3, (trial % 2,), generator=gen)]
        padded = pool[torch.randint(0, len(pool), shape, generator=gen)]
        if not dtype.is_floating_point:
            padded = padded.nan_to_num(3.0, 100.0, -100.0).clamp(-100, 100)
            padded = padded.abs() if dtype in (torch.uint8, torch.bool) else padded
        padded = padded.to(dtype)
        for largest in (False, True):
            values, order = cu.topk_rows(padded, torch.tensor(count), k, largest)
            kept = min(k, rows)
            assert values.shape[0] == kept and order.shape == values.shape
            c = min(k, count)
            live = padded[:count]
            want = torch.topk(live.float() if dtype in (torch.float16, torch.bfloat16, torch.bool)
                              else live, c, dim=0, largest=largest)[0]
            got = values[:c].to(want.dtype)
            assert torch.equal(got.isnan(), want.isnan()), (padded, count, k, largest)
            assert torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0)), (padded, count, k)
            rows_of = order[:c]
            assert bool((rows_of < count).all()), (padded, count, k, largest)
            assert torch.equal(padded.gather(0, rows_of).double().nan_to_num(7.0),
                               values[:c].double().nan_to_num(7.0))
            for column in rows_of.reshape(c, -1).t() if c else []:
                assert column.unique().numel() == c


def test_masked_topk_is_torch_topk_of_the_selection(cu):
    """masked_topk(x, m, k) against torch.topk(x[m], min(k, count)), x and m
    of any shape, x holding NaN, infinities, -0.0 and ties: the values are
    topk's; each position is one where m holds, holding its value, none
    twice; ranks_at gives their rows of x[m]. The plain key only where its
    premise holds: m is x > t (x < t choosing the smallest)."""
    gen = torch.Generator().manual_seed(6)
    pool = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, 1.0,
                         -2.5, 1e30, -1e30])
    for trial in range(1500):
        dtype = DTYPES_OF_TOPK[trial % len(DTYPES_OF_TOPK)]
        shape = [int(s) for s in torch.randint(0, 4, (trial % 3,), generator=gen)]
        x = pool[torch.randint(0, len(pool), shape, generator=gen)]
        if not dtype.is_floating_point:
            x = x.nan_to_num(3.0, 100.0, -100.0).clamp(-100, 100)
            x = x.abs() if dtype in (torch.uint8, torch.bool) else x
        x = x.to(dtype)
        k = int(torch.randint(0, x.numel() + 3, (), generator=gen))
        for largest in (False, True):
            plain = dtype.is_floating_point and trial % 2 == 0
            if plain:
                t = float(pool[int(torch.randint(0, len(pool), (), generator=gen))])
                mask = x > t if largest else x < t
            else:
                mask = torch.rand(shape, generator=gen) < 0.5
            values, positions = cu.masked_topk(x, mask, k, largest, plain)
            selected = x[mask]
            c = min(k, selected.numel())
            want = torch.topk(selected.float() if dtype in (torch.float16, torch.bfloat16,
                                                            torch.bool) else selected,
                              c, largest=largest)[0]
            got = values[:c].to(want.dtype)
            assert torch.equal(got.isnan(), want.isnan()), (x, mask, k, largest)
            assert torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0)), (x, mask, k)
            at = positions[:c]
            assert bool(mask.reshape(-1)[at].all()) and at.unique().numel() == c
            assert torch.equal(x.reshape(-1)[at].double().nan_to_num(7.0),
                               values[:c].double().nan_to_num(7.0))
            rows = cu.ranks_at(mask, positions)[:c]
            assert torch.equal(selected[rows].double().nan_to_num(7.0),
                               values[:c].double().nan_to_num(7.0))


def test_topk_positions_in_blocks_is_torch_topk(cu):
    """A vector of more than two blocks of 2^19 elements takes its top k
    block by block: the values are torch.topk's, the positions hold them."""
    gen = torch.Generator().manual_seed(7)
    for n, k in ((3 * 524288 + 17, 1000), (2 * 524288, 1), (2 * 524288 + 5, 524288)):
        key = torch.randn(n, generator=gen)
        key[torch.randint(0, n, (n // 3,), generator=gen)] = -float("inf")
        for largest in (True, False):
            positions = cu.topk_positions(key, k, largest)
            want = torch.topk(key, k, largest=largest)[0]
            assert positions.unique().numel() == k
            assert torch.equal(key[positions], want)


def test_gather_within_rows_raises_only_where_gather_does(cu):
    """gather along dim 1 of bounded rows: the live rows equal torch.gather
    of the live rows, whatever the padding rows hold (-100, past the end),
    and it raises exactly when that gather raises (empty dims included)."""
    gen = torch.Generator().manual_seed(3)
    raised = 0
    for _ in range(600):
        n, width, k = (int(torch.randint(lo, hi, (), generator=gen))
                       for lo, hi in ((0, 6), (0, 4), (0, 3)))
        count = int(torch.randint(0, n + 1, (), generator=gen))
        src = torch.randn(n, width, generator=gen)
        index = torch.randint(-2, width + 2, (n, k), generator=gen)
        index[count:] = -100  # what padding may hold: never a valid index
        try:
            want = torch.gather(src[:count], 1, index[:count])
        except RuntimeError:
            raised += 1
            with pytest.raises(RuntimeError):
                cu.gather_within_rows(src, 1, index, torch.tensor(count))
            continue
        got = cu.gather_within_rows(src, 1, index, torch.tensor(count))
        assert got.shape == (n, k) and torch.equal(got[:count], want)
    assert 50 < raised < 550, raised  # both branches were exercised


def test_gather_rows_at_picks_one_element_per_row(cu):
    """src[i0, i1] and src[i0, i1, i2] of index vectors with one count,
    padded to different lengths with any values: the live rows equal the
    original's on the valid rows (negative indices included; a negative
    one into dim 0 of a padded src counts from its valid rows), and where
    an index past the end of a dim >= 1 makes the original raise, the form
    raises too."""
    gen = torch.Generator().manual_seed(4)
    compared = raised = 0
    for _ in range(2000):
        count, src_rows, c1, c2 = (int(torch.randint(lo, hi, (), generator=gen))
                                   for lo, hi in ((0, 6), (0, 6), (0, 4), (1, 4)))
        k = int(torch.randint(2, 4, (), generator=gen))
        shape = [src_rows, c1, c2, 2][:k + 1]
        src = torch.randn(shape, generator=gen)
        index = [torch.randint(-max(s, 1) - 1, max(s, 1) + 1, (count,), generator=gen)
                 for s in shape[:k]]
        padded = [torch.cat([i, torch.randint(-50, 50, (int(torch.randint(0, 3, (), generator=gen)),),
                                              generator=gen)]) for i in index]
        src_count, padded_src = None, src
        if torch.rand((), generator=gen) < 0.5:
            src_count = torch.tensor(src_rows)
            padded_src = torch.cat([src, torch.randn([2] + shape[1:], generator=gen)])
        try:
            want = src[tuple(index)]
        except (IndexError, RuntimeError):
            past_end = any(((i >= shape[d]) | (i < -shape[d])).any()
                           for d, i in enumerate(index) if d >= 1)
            if past_end and all(shape[:k]):
                raised += 1
                with pytest.raises(RuntimeError):
                    cu.gather_rows_at(padded_src, src_count, padded, torch.tensor(count))
            continue
        got = cu.gather_rows_at(padded_src, src_count, padded, torch.tensor(count))
        compared += 1
        assert torch.equal(got[:count], want), (shape, count)
    assert compared > 400 and raised > 400, (compared, raised)
