# Bounded forms: the static-shape TorchScript the `bound` pass inserts.
#
# Each function computes a data-dependent-shape op (nonzero, x[mask],
# unique, randperm(n)[:k], cat of bounded tensors...) as a *bounded* value:
# a tensor padded to a size known on the host, plus `count`, a 0-d int64
# tensor on the data's device holding how many leading rows are valid.
# Every size here is computed from input sizes and host ints, never from
# data, so each function is static: the unit tests run staticify's own
# analysis over every one of them and require zero findings. One path is
# the exception: nms_on_host, taken only under `if rows.is_cpu:`, reads
# values on the host, where a read costs no device sync (the analysis knows
# that branch's tensors are on the host).
#
# This file is the single source: the C++ build embeds it (CMake turns it
# into a string), and test/e2e/test_forms.py scripts and checks it directly.
from typing import List, Optional, Tuple

import torch
from torch import Tensor

Device = torch.device  # the name TorchScript gives the type in C++


def compact(keep: Tensor) -> Tuple[Tensor, Tensor]:
    """The positions of bool keep's true elements (1-D), in order, then
    zeros; and their count."""
    n = keep.numel()
    rank = torch.cumsum(keep, 0)  # int64 for a bool input
    positions = torch.arange(n, device=keep.device)
    # Every unselected element is sent to the extra slot n, dropped below.
    slot = torch.where(keep, rank - 1, positions.new_full([1], n))
    out = positions.new_zeros([n + 1]).scatter(0, slot, positions)
    # sum, not count_nonzero: equal below 1e4 elements, 4-10x faster above
    # (PyTorch 1.13, one CPU thread: 0.9 ms against 4.1 ms at 1e6).
    return out[:n], keep.sum()


def live_rows(bound: int, count: Tensor) -> Tensor:
    """[bound] bool: which rows of a bounded value are valid."""
    return torch.arange(bound, device=count.device) < count


def slice_bound(b: Tensor, n: int, device: Device) -> Tensor:
    """A bound of a slice of n positions as slicing takes it: counted from
    the end where negative, clamped to [0, n]."""
    t = b.to(device=device, dtype=4)  # int64
    return torch.where(t < 0, t + n, t).clamp(0, n)


def slice_positions(v: Tensor, dim: int, start: Tensor, end: Tensor) -> Tensor:
    """Where v.slice(dim, start, end) (step 1) is, as a bool mask of v's
    positions along dim shaped to broadcast against v: a store into the
    slice is a store masked by it (lift-scalars' range stores)."""
    if dim < 0:
        dim = dim + v.dim()
    n = v.size(dim)
    device = v.device
    p = torch.arange(n, device=device)
    inside = (p >= slice_bound(start, n, device)) & (p < slice_bound(end, n, device))
    return inside.reshape([n] + [1] * (v.dim() - dim - 1))


def neutral_padding(x: Tensor, count: Tensor) -> Tensor:
    """x with its rows past count filled with a value no real row of a
    detection or a selection holds: -1 for signed integers (labels and
    indices, as torch.nonzero_static fills), 0 for the rest (scores,
    boxes; False for bools). What --padded-outputs returns."""
    live = torch.arange(x.size(0), device=x.device) < count
    live = live.reshape([x.size(0)] + [1] * (x.dim() - 1))
    fill = 0
    if x.dtype >= 1 and x.dtype <= 4:  # int8, int16, int32, int64
        fill = -1
    return torch.where(live, x, torch.full([], fill, dtype=x.dtype, device=x.device))


def row_stride(sizes: List[int], numel: int, k: int) -> int:
    """The row-major stride of coordinate k in a tensor of `sizes` holding
    `numel` elements, for dividing its positions. Of dim 0, numel over the
    rows, no loop over the dims: exact where the tensor has an element
    (every dim >= 1); where it has none, the only position to divide is
    padding 0, and any stride >= 1 serves. A 0-d tensor is one row."""
    if k < 0:
        k = k + len(sizes)
    if k == 0:
        return max(numel // max((sizes + [1])[0], 1), 1)
    return stride_after(sizes, k)


def stride_after(sizes: List[int], k: int) -> int:
    """row_stride for k >= 0: a dim of size 0 counted as 1 (a tensor with
    one has no position to divide)."""
    stride = 1
    for d in range(k + 1, len(sizes)):
        stride = stride * max(sizes[d], 1)
    return stride


def coordinate(flat: Tensor, sizes: List[int], k: int) -> Tensor:
    """Coordinate k of row-major flat positions in a tensor of `sizes`."""
    if k < 0:
        k = k + len(sizes)
    return divide_at(flat, sizes, k, stride_after(sizes, k))


def coordinate_at(flat: Tensor, sizes: List[int], k: int, stride: int) -> Tensor:
    """coordinate() of a few positions (picks) given k's row_stride, which
    masks of one shape share: divided whatever the stride (one op on the
    picks; a test of the stride and a branch would be three)."""
    if k < 0:
        k = k + len(sizes)
    c = torch.div(flat, stride, rounding_mode="floor")
    if k > 0:
        c = torch.remainder(c, max(sizes[k], 1))
    return c


def divide_at(flat: Tensor, sizes: List[int], k: int, stride: int) -> Tensor:
    """Coordinate k >= 0 of flat positions, k's stride given."""
    c = flat
    if stride != 1:
        c = torch.div(c, stride, rounding_mode="floor")
    if k > 0:
        c = torch.remainder(c, max(sizes[k], 1))
    return c


def nonzero(x: Tensor) -> Tuple[Tensor, Tensor]:
    """nonzero(x) / argwhere(x): [x.numel(), x.dim()] coordinates."""
    flat, count = compact(x.reshape(-1) != 0)
    sizes = x.size()
    coords: List[Tensor] = []
    for k in range(len(sizes)):
        coords.append(coordinate(flat, sizes, k))
    if len(coords) == 0:
        return flat.reshape([-1, 1])[:, :0], count
    return torch.stack(coords, 1), count


def where_index(x: Tensor, k: int) -> Tuple[Tensor, Tensor]:
    """where(x)[k] (nonzero(x)[:, k]): [x.numel()] indices. A 0-d x is one
    element (reshape(-1)); its sizes [] make k = 0 the flat position and
    raise for k >= 1, as where's one-element tuple does: no branch on the
    rank."""
    flat, count = compact(x.reshape(-1) != 0)
    return coordinate(flat, x.size(), k), count


def leading_rows(x: Tensor, mask: Tensor) -> Tensor:
    """x as the rows a mask over its leading mask.dim() dimensions picks
    from: [mask.numel()] + x's other sizes."""
    rows = x.reshape([mask.numel()] + x.size()[mask.dim():])
    return rows


def checked_rows(x: Tensor, mask: Tensor) -> Tensor:
    """leading_rows, raising where x[mask] raises on shapes: the mask
    expanded to x's leading sizes raises where one differs from the mask's
    but for a mask's size 1, and the reshape then on the count of elements
    (a reshape alone takes any shape of as many elements, and any at all
    where x has none). Not for shapes with a 0 beside a mask's 1 ([1] over
    [0], [1] over rows of no element), where x[mask] raises and this does
    not."""
    return leading_rows(x, mask.expand(x.size()[:mask.dim()]))


def select_rows(x: Tensor, mask: Tensor) -> Tuple[Tensor, Tensor]:
    """x[mask] for a mask over x's leading mask.dim() dimensions, which the
    graph shows to be the mask's shape."""
    pos, count = compact(mask.reshape(-1) != 0)
    return leading_rows(x, mask).index_select(0, pos), count


def select_checked_rows(x: Tensor, mask: Tensor) -> Tuple[Tensor, Tensor]:
    """select_rows where the shapes may differ (checked_rows)."""
    pos, count = compact(mask.reshape(-1) != 0)
    return checked_rows(x, mask).index_select(0, pos), count


def masked_select(x: Tensor, mask: Tensor) -> Tuple[Tensor, Tensor]:
    """masked_select(x, mask): x and mask broadcast, then flattened."""
    both = torch.broadcast_tensors(x, mask)
    return select_rows(both[0].reshape(-1), both[1].reshape(-1))


def first_kept(order: Tensor, keep: Tensor, k: int) -> Tensor:
    """[k]: the first k entries of the 1-D `order` where `keep` holds, in
    order; zeros past the number kept."""
    # In place: the rank is this form's own, and each fresh tensor of the
    # order's length costs its pages' first touch (at 1e6 rows, 1 CPU
    # thread: 5.9 ms against 13.2 ms with two more of them).
    slot = torch.cumsum(keep, 0)
    slot.mul_(keep)  # 1, 2, ... on the kept, 0 elsewhere
    # Slot 0 takes every dropped entry, slot k + 1 every kept one past k.
    slot.clamp_max_(k + 1)
    return order.new_zeros([k + 2]).scatter(0, slot, order).narrow(0, 1, k)


def random_prefix(n: Tensor, bound: int, k: int,
                  device: Optional[Device]) -> Tensor:
    """randperm(n)[:k] for n <= bound: the first k entries below n of
    randperm(bound). A uniformly random permutation orders every subset
    uniformly at random, so these are distributed as randperm(n)[:k]
    exactly; rows past min(n, k) are 0."""
    order = torch.randperm(bound, device=device)
    return first_kept(order, order < n.to(order.device), k)


def random_below(low: int, high: Tensor, size: List[int], dtype: int,
                 device: Device) -> Tensor:
    """randint(low, high, size) for a 0-d high > low: uniform on [low, high),
    one float64 draw per element (another stream of numbers than randint's;
    exact for spans up to 2**53, each integer drawn with a probability
    within span / 2**53 of 1 / span)."""
    u = torch.rand(size, dtype=7, device=device)  # float64
    span = high.to(device=device, dtype=7) - low
    drawn = torch.minimum((u * span).floor(), span - 1) + low
    return drawn.to(dtype)


def random_order(c: Tensor) -> Tensor:
    """A uniformly random order of c's positions (flat)."""
    return torch.randperm(c.numel(), device=c.device)


def random_true_positions(c: Tensor, order: Tensor, sizes: List[int], dim: int,
                          stride: int, k: int) -> Tensor:
    """where(c)[dim][randperm(count)[:k]], k <= c.numel(): coordinate dim of
    k random true elements of c, in random order: the first k true elements
    of c in `order`, a random order of its positions (random_order: no
    compaction of c); rows past the count of true elements are padding.
    `sizes` are c's (or those of a mask of c's shape drawing the same order)
    and `stride` their row_stride for dim: masks of one shape share both."""
    flat = c.reshape(-1)  # a 0-d c: one element, sizes [] (where_index)
    keep = flat.index_select(0, order) != 0
    return coordinate_at(first_kept(order, keep, k), sizes, dim, stride)


def gather_rows(src: Tensor, src_count: Tensor, index: Tensor,
                index_count: Optional[Tensor]) -> Tensor:
    """src[index] (an integer index of any shape into dimension 0) where
    only src's first src_count rows are valid; padding rows of a bounded
    index read row 0. A negative index counts from src_count, as it counted
    from the original's length."""
    i = torch.where(index < 0, index + src_count, index)
    if index_count is not None:
        live = live_rows(index.size(0), index_count)
        live = live.reshape([index.size(0)] + [1] * (index.dim() - 1))
        i = torch.where(live, i, torch.zeros_like(i))
    shape = index.size() + src.size()[1:]
    if src.numel() == 0:
        # Nothing to gather: zero rows or rows of nothing (src[index] of an
        # empty src reads no element, so no index raises).
        return src.new_zeros(shape)
    return src.index_select(0, i.reshape(-1)).reshape(shape)


def gather_vector_rows(src: Tensor, src_count: Tensor, index: Tensor,
                       index_count: Optional[Tensor], wrap: bool,
                       checked: bool, guard: bool) -> Tensor:
    """gather_rows for a vector index: one index_select, no reshapes.
    `wrap` is False where the index holds no negative value (a randperm,
    positions): nothing counts from the end. `checked` for index_select's
    gather, which raises for an index out of range even where src's rows
    hold no element (src[index] reads none and raises nowhere). `guard`
    where an empty src needs zeros: padding rows of a bounded index read
    row 0, which raises where the original reads nothing; x[i] of rows of
    nothing reads no element, where index_select still checks i. Without
    (a static index into a vector, or by index_select), the gather raises
    where the original raises."""
    i = index
    if wrap:
        i = torch.where(index < 0, index + src_count, index)
    if index_count is not None:
        i = i.masked_fill(~live_rows(index.size(0), index_count), 0)
    if guard and (src.size(0) == 0 if checked else src.numel() == 0):
        return src.new_zeros([index.size(0)] + src.size()[1:])
    return src.index_select(0, i)


def row_at(rows: Tensor, count: Tensor, k: int) -> Tensor:
    """rows[k] of a bounded value, a negative k counting back from the
    count (`nonzero(m)[0]`, `x[m][-1]`). Past the live rows, where the
    original raises, zeros (as a max of nothing reads a row, passes.md)."""
    at = count + k if k < 0 else torch.zeros_like(count) + k
    if rows.size(0) == 0:
        return rows.new_zeros(rows.size()[1:])
    live = (at >= 0) & (at < count)
    row = rows.index_select(0, at.clamp(0, rows.size(0) - 1).reshape(1).to(rows.device))[0]
    return torch.where(live.to(rows.device), row, torch.zeros_like(row))


def gather_rows_at(src: Tensor, src_count: Optional[Tensor], index: List[Tensor],
                   count: Tensor) -> Tensor:
    """src[i0, i1] or src[i0, i1, i2] of integer vectors with one count,
    into src's leading dims (where only src's first src_count rows are
    valid, if given): row r of the result is src[i0[r], i1[r], ...]. The
    vectors may be padded to different lengths (each holds its valid rows
    first): the shortest bounds the result. Their padding rows read
    position 0 of each dim. A negative index counts from the dim's end (of
    dim 0, from src_count, as it counted from the original's length); past
    the end of dims >= 1 gather raises, as the original does. Where an
    indexed dim is empty no position is valid: zeros, as gather_rows (the
    original, with rows, raises there)."""
    n = index[0].size(0)
    for i in index:
        n = min(n, i.size(0))
    live = live_rows(n, count)
    for d in range(len(index)):
        if src.size(d) == 0:
            return src.new_zeros([n] + src.size()[len(index):])
    rows = index[0][:n]
    if src_count is not None:
        rows = torch.where(rows < 0, rows + src_count, rows)
    else:
        rows = torch.where(rows < 0, rows + src.size(0), rows)
    out = src.index_select(0, rows.masked_fill(~live, 0))
    for d in range(1, len(index)):
        i = index[d][:n]
        i = torch.where(i < 0, i + out.size(1), i).masked_fill(~live, 0)
        at = i.reshape([n] + [1] * (out.dim() - 1))
        out = out.gather(1, at.expand([n, 1] + out.size()[2:])).squeeze(1)
    return out


def gather_within_rows(src: Tensor, dim: int, index: Tensor, count: Tensor) -> Tensor:
    """gather(src, dim, index) along a dim >= 1 of bounded src and index
    with one count: each row from its own row; or along dim 0 of a src that
    is not bounded by a bounded index: each row of the result from its
    index row. Padding rows of the index
    hold what row 0 holds, which the original never used: they read
    position 0 instead, so that only live rows can raise. Where the dim is
    empty no position is valid: a zero one is appended for the padding, and
    live indices move past it, so that they raise as the original's do."""
    live = keep_rows(index, count)
    if src.size(dim) > 0:
        return torch.gather(src, dim, index.masked_fill(~live, 0))
    slot = src.size()
    slot[dim] = 1
    room = torch.cat([src.new_zeros(slot), src], dim)
    moved = torch.where(index >= 0, index + 1, index)
    return torch.gather(room, dim, moved.masked_fill(~live, 0))


def take_rows(src: Tensor, index: Tensor, count: Tensor) -> Tensor:
    """torch.take(src, index) of a bounded index: the result has the index's
    rows. Padding rows of the index read element 0, so that only live ones
    can raise; of an src with no element, where no position is valid, they
    read a zero put in front (live indices, negative ones too, move past it
    and raise as the original's do)."""
    live = keep_rows(index, count)
    if src.numel() > 0:
        return torch.take(src, index.masked_fill(~live, 0))
    room = src.new_zeros([1])
    moved = torch.where(index >= 0, index + 1, index - 1)
    return torch.take(room, moved.masked_fill(~live, 0))


def repeat_rows(x: Tensor, count: Tensor, k: int) -> Tuple[Tensor, Tensor]:
    """x.repeat([k, 1, ...]) of rows x of which count are valid: the valid
    rows k times over, in order, padded to k times x's rows; and their
    count. A negative k raises, as repeat does."""
    n = x.size(0)
    src = torch.remainder(torch.arange(k * n, device=x.device),
                          count.to(x.device).clamp(min=1))
    return x.index_select(0, src), count * k


def cat_rows(parts: List[Tensor], counts: List[Tensor]) -> Tuple[Tensor, Tensor]:
    """cat(parts, 0) of bounded parts: the valid rows compacted in order."""
    live: List[Tensor] = []
    for i in range(len(parts)):
        live.append(live_rows(parts[i].size(0), counts[i]))
    pos, count = compact(torch.cat(live, 0))
    return torch.cat(parts, 0).index_select(0, pos), count


def cat_two_rows(a: Tensor, count_a: Tensor, b: Tensor,
                 count_b: Tensor) -> Tuple[Tensor, Tensor]:
    """cat([a, b], 0) of bounded parts by one gather, no compaction: row r
    below count_a is a's row r; from there on, b's row r - count_a, which
    sits at a.size(0) + r - count_a in the padded cat. Rows past the two
    counts are padding (wrapped into range: the positions are never
    negative; an empty cat has none to wrap, so n = 0 divides nothing)."""
    both = torch.cat([a, b], 0)
    n = both.size(0)
    r = torch.arange(n, device=both.device)
    src = torch.where(r < count_a, r, r + torch.rsub(count_a, a.size(0)))
    return both.index_select(0, src.remainder(n)), count_a + count_b


def put_slots(x: Tensor, index: Tensor, count: Tensor) -> Tensor:
    """Where each row of a bounded 1-D index writes in x's rows, shifted by
    one: padding rows go to slot 0, which is dropped; an index out of x's
    range goes past the last slot, so the write raises as x[index] = v
    would."""
    n = x.size(0)
    i = index.to(x.device)
    i = torch.where(i < 0, i + n, i)
    i = torch.where(i >= 0, i + 1, torch.full_like(i, n + 1))
    return torch.where(live_rows(i.size(0), count.to(x.device)), i,
                       torch.zeros_like(i))


def flat_position(coords: List[Tensor], sizes: List[int]) -> Tensor:
    """The row-major position in the first len(coords) dims (of `sizes`) of
    the coordinate vectors `coords` (one per dim, of one length), a negative
    coordinate counted from its dim's end as indexing counts it. One out of
    its dim's range, where x[c0, c1, ...] raises, goes past the last
    position, so that a write there raises as the original's does."""
    flat = torch.zeros_like(coords[0])
    valid = flat == 0
    total = 1
    for k in range(len(coords)):
        size = sizes[k]
        c = coords[k].to(flat.device)
        valid = valid & (c >= -size) & (c < size)
        flat = flat * size + torch.where(c < 0, c + size, c)
        total = total * size
    return torch.where(valid, flat, torch.full_like(flat, total))


def put_rows_out(x: Tensor, index: Tensor, count: Tensor, value: Tensor) -> Tensor:
    """x.index_put((index,), value) (value 0-d) for a bounded 1-D index: its
    valid rows mark a mask of x's rows. The value goes in by where, cast to
    x's dtype as index_put casts it (masked_fill_ with a tensor value would
    read it on the host)."""
    n = x.size(0)
    hit = torch.zeros([n + 1], device=x.device) != 0
    hit = hit.index_fill(0, put_slots(x, index, count), 1)[1:]
    return torch.where(hit.reshape([n] + [1] * (x.dim() - 1)), value.to(x.dtype), x)


def put_at_mask_out(x: Tensor, mask: Tensor, rows: Tensor) -> Tensor:
    """x[mask] = rows, out of place, for a bool vector mask over x's rows and
    rows whose first mask.sum() rows are the values, in order (padding
    after): the r-th true element of mask takes row r. No compaction of the
    mask: one cumsum, one gather, one where."""
    if rows.size(0) == 0:  # no row, so no true element either
        return x.clone()
    at = (torch.cumsum(mask, 0) - 1).clamp_min(0)
    picked = rows.index_select(0, at)
    keep = mask.reshape([mask.size(0)] + [1] * (x.dim() - 1))
    return torch.where(keep, picked, x)


def put_at_mask(x: Tensor, mask: Tensor, rows: Tensor) -> Tensor:
    """put_at_mask_out, written into x."""
    return x.copy_(put_at_mask_out(x, mask, rows))


def put_rows(x: Tensor, index: Tensor, count: Tensor, value: Tensor) -> Tensor:
    """x[index] = value (value 0-d) for a bounded 1-D index, in place."""
    return x.copy_(put_rows_out(x, index, count, value))


def put_row_values_out(x: Tensor, index: Tensor, count: Tensor,
                       value: Tensor) -> Tensor:
    """x.index_put((index,), value) for a bounded 1-D index and a value with
    one row per index row (the same count, value.dim() == x.dim(), one
    dtype). Where an index repeats, its last valid row is written: PyTorch
    leaves the order unspecified, and its CPU kernel writes rows in order."""
    n = x.size(0)
    if index.size(0) == 0 or value.size(0) == 0:
        return x.clone()  # no valid row
    # The last row of each slot: a stable sort groups the rows by slot in
    # their order; each group's last row writes its slot, the others write
    # slot 0, which is dropped (no two kept writes to one slot).
    slots, order = torch.sort(put_slots(x, index, count), stable=True)
    ends = torch.cat([slots[1:] != slots[:-1], torch.ones_like(slots[:1]) != 0])
    last = slots.new_full([n + 1], -1).scatter(
        0, torch.where(ends, slots, torch.zeros_like(slots)), order)[1:]
    rows = value.to(x.device).index_select(0, last.clamp(min=0))
    hit = (last >= 0).reshape([n] + [1] * (x.dim() - 1))
    return torch.where(hit, rows, x)


def put_row_values(x: Tensor, index: Tensor, count: Tensor,
                   value: Tensor) -> Tensor:
    """x[index] = value, as put_row_values_out, in place."""
    return x.copy_(put_row_values_out(x, index, count, value))


def put_add_rows(x: Tensor, index: Tensor, count: Tensor, value: Tensor) -> Tensor:
    """x.index_put((index,), value, accumulate=True) for a bounded 1-D index
    and a value 0-d or with one row per index row (the same count,
    value.dim() == x.dim(), one dtype): add_rows, after counting a negative
    index from the end as index_put does (one below -n still raises)."""
    i = index.to(x.device)
    i = torch.where(i < 0, i + x.size(0), i)
    if value.dim() == 0:
        value = value.expand([i.size(0)] + x.size()[1:])
    return add_rows(x, i, count, value.to(x.device))


def put_add_rows_(x: Tensor, index: Tensor, count: Tensor, value: Tensor) -> Tensor:
    """x.index_put_((index,), value, accumulate=True), as put_add_rows, in
    place."""
    return x.copy_(put_add_rows(x, index, count, value))


def add_rows(x: Tensor, index: Tensor, count: Tensor, source: Tensor) -> Tensor:
    """x.index_add(0, index, source) for a bounded 1-D index and source rows
    of its count (source.dim() == x.dim(), one dtype): the live rows add to
    x's rows in their order, as the CPU kernel adds them; padding rows add
    to a first row that is dropped, and an index out of range (negative
    included, as index_add raises for those) still raises."""
    n = x.size(0)
    m = min(index.size(0), source.size(0))
    i = index[:m].to(x.device)
    i = torch.where(i < 0, torch.full_like(i, n + 1), i + 1)
    i = torch.where(live_rows(m, count.to(x.device)), i, torch.zeros_like(i))
    out = torch.cat([x.new_zeros([1] + x.size()[1:]), x])
    return out.index_add_(0, i, source[:m])[1:]


def add_rows_(x: Tensor, index: Tensor, count: Tensor, source: Tensor) -> Tensor:
    """x.index_add_(0, index, source), as add_rows, in place."""
    return x.copy_(add_rows(x, index, count, source))


def unique_groups(s: Tensor, first: Tensor,
                  live: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """Values, group ids, counts and count for a 1-D s whose groups start
    where `first` holds; with `live`, of its live elements only (a bounded
    value's: the padding sends its values and counts to a slot past the
    end, which is dropped)."""
    n = s.numel()
    group = torch.cumsum(first.long(), 0) - 1
    slot = group
    if live is not None:
        slot = torch.where(live, group, torch.full_like(group, n))
    # Every member of a group writes the same value: any order is right.
    values = torch.zeros([n + 1], dtype=s.dtype, device=s.device).scatter(0, slot, s)
    counts = torch.zeros([n + 1], dtype=4, device=s.device).scatter_add(
        0, slot, torch.ones_like(slot))
    return values[:n], group, counts[:n], first.sum()


def group_starts(s: Tensor) -> Tensor:
    first = torch.ones_like(s) != 0
    if s.numel() > 1:
        first = torch.cat([first[:1], s[1:] != s[:-1]])
    return first


def unique(x: Tensor, return_inverse: bool,
           return_counts: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """_unique2 (torch.unique without dim): values sorted ascending. As
    PyTorch 1.13 does, the inverse is returned when either flag is set."""
    s, perm = torch.sort(x.reshape(-1))
    values, group, counts, count = unique_groups(s, group_starts(s), None)
    empty = torch.zeros([0], device=x.device).long()
    inverse = empty
    if return_inverse or return_counts:
        inverse = torch.zeros_like(group).scatter(0, perm, group).reshape(x.size())
    if not return_counts:
        counts = empty
    return values, inverse, counts, count


def unique_consecutive(x: Tensor, return_inverse: bool,
                       return_counts: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """unique_consecutive without dim."""
    flat = x.reshape(-1)
    values, group, counts, count = unique_groups(flat, group_starts(flat), None)
    empty = torch.zeros([0], device=x.device).long()
    inverse = empty
    if return_inverse:
        inverse = group.reshape(x.size())
    if not return_counts:
        counts = empty
    return values, inverse, counts, count


def unique_consecutive_rows(x: Tensor, return_inverse: bool,
                            return_counts: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """unique_consecutive(x, dim=0): the first row of each run of equal rows,
    in order (a row differs from the one before where any element differs:
    a NaN differs from itself, as at::equal has it). The inverse is static;
    values and counts are bounded by the runs' count."""
    n = x.size(0)
    rows = x.reshape([n, x.numel() // max(n, 1)])
    first = torch.ones([n], device=x.device) != 0
    if n > 1:
        first = torch.cat([first[:1], (rows[1:] != rows[:-1]).any(1)])
    group = torch.cumsum(first.long(), 0) - 1
    # Rows of a run are equal: any of them may land in its slot.
    values = torch.zeros_like(x).index_copy(0, group, x)
    empty = torch.zeros([0], device=x.device).long()
    counts = empty
    if return_counts:
        counts = torch.zeros_like(group).scatter_add(0, group, torch.ones_like(group))
    inverse = empty
    if return_inverse:
        inverse = group
    return values, inverse, counts, first.sum()


def live_elements(padded: Tensor, count: Tensor) -> Tuple[Tensor, Tensor]:
    """A bounded value flattened, and which of its elements are live: the
    live rows lead, so their elements come first, count * (elements per
    row) of them."""
    flat = padded.reshape(-1)
    per_row = padded.numel() // max(padded.size(0), 1)
    live = torch.arange(flat.numel(), device=flat.device) < count * per_row
    return flat, live


def unique_live(padded: Tensor, count: Tensor, by_value: bool, return_inverse: bool,
                return_counts: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """_unique2 (sorted) or unique_consecutive without dim of a bounded
    value: the groups of its live elements only (CTC's greedy decoding
    collapses the repeats of selected labels). The inverse has the padded
    shape; its padding rows are not the original's."""
    flat, live = live_elements(padded, count)
    perm = torch.arange(flat.numel(), device=flat.device)
    if by_value:
        # live elements first, ascending (sort_rows: stable, NaN as sort puts it)
        flat, perm = sort_rows(flat, live.sum(), False)
    values, group, counts, n = unique_groups(flat, group_starts(flat) & live, live)
    empty = torch.zeros([0], device=padded.device).long()
    inverse = empty
    if return_inverse or (by_value and return_counts):
        inverse = torch.zeros_like(group).scatter(0, perm, group).reshape(padded.size())
    if not return_counts:
        counts = empty
    return values, inverse, counts, n


def order_statistic(padded: Tensor, count: Tensor, kind: int, q: float) -> Tensor:
    """Of a bounded value's live elements, all of them: median() (kind 0),
    nanmedian() (1), quantile(q) (2) or nanquantile(q) (3), linear
    interpolation, with PyTorch's arithmetic (ATen's quantile: ranks
    q * (n - 1) in the input's dtype, NaN at the last rank; the lower
    median; NaN for the median of none). The live elements sort first,
    NaN last among them (sort_rows)."""
    flat, live = live_elements(padded, count)
    nothing = torch.full([], float("nan"), dtype=7, device=flat.device).to(flat.dtype)
    if flat.numel() == 0:
        return nothing
    n = live.sum()
    s = sort_rows(flat, n, False)[0]
    nans = (torch.isnan(s) & live).sum()  # live is a prefix: sorted too
    if kind < 2:
        m = n if kind == 0 else n - nans
        k = torch.clamp(torch.div(m - 1, 2, rounding_mode="floor"), min=0)
        v = s.index_select(0, k.reshape([1])).reshape([])
        if kind == 0:
            v = torch.where(nans > 0, nothing, v)
        return torch.where(m > 0, v, nothing)
    qt = torch.full([], q, dtype=flat.dtype, device=flat.device)
    if kind == 3:
        ranks = qt * (n - nans - 1)
        ranks = ranks.masked_fill(ranks < 0, 0)
    else:
        last = n - 1
        ranks = torch.where(nans > 0, last.to(flat.dtype), qt * last)
    ranks = torch.clamp(ranks, min=0)  # only for none live, where quantile raises
    below = ranks.long()
    above = torch.ceil(ranks).long()
    lo = s.index_select(0, below.reshape([1]))
    hi = s.index_select(0, above.reshape([1]))
    return torch.lerp(lo, hi, (ranks - below).reshape([1])).reshape([])


def unique_rows(x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """unique_dim(x, 0): rows sorted lexicographically (one stable sort per
    column, last column first); inverse and counts always, as PyTorch."""
    n = x.size(0)
    rows = x.reshape([n, x.numel() // max(n, 1)])
    order = torch.arange(n, device=x.device)
    for j in range(rows.size(1) - 1, -1, -1):
        key = rows.index_select(0, order).select(1, j)
        order = order.index_select(0, torch.sort(key, stable=True)[1])
    s = rows.index_select(0, order)
    first = torch.ones([n], device=x.device) != 0
    if n > 1:
        first = torch.cat([first[:1], (s[1:] != s[:-1]).any(1)])
    group = torch.cumsum(first.long(), 0) - 1
    # Rows of a group are equal: any of them may land in its slot.
    values = torch.zeros_like(s).index_copy(0, group, s)
    counts = torch.zeros_like(group).scatter_add(0, group, torch.ones_like(group))
    inverse = torch.zeros_like(group).scatter(0, order, group)
    return values.reshape(x.size()), inverse, counts, first.sum()


def pad_rows(x: Tensor, bound: int) -> Tensor:
    """x, of at most bound rows, with zero rows after them up to bound."""
    return torch.cat([x, x.new_zeros([bound - x.size(0)] + x.size()[1:])], 0)


def first_filled(rows: Tensor, keep: Tensor) -> Tensor:
    """rows where keep ([n, 1, ...]) holds, the first kept row elsewhere
    (the first row where none is): what max and min of a selection reduce,
    dtype-agnostic. Of no rows, one row of zeros, so that the reduction
    raises nowhere: it may run hoisted out of a branch the original did not
    take (bound's both branches), and of rows where none is kept it returns
    a value where the original raises already."""
    if rows.size(0) == 0:
        return rows.new_zeros([1] + rows.size()[1:])
    # argmax rejects bool; on uint8 it keeps the first maximum.
    first = torch.argmax(keep.reshape(-1).to(0)).reshape([1])
    return torch.where(keep, rows, rows.index_select(0, first))


def keep_rows(padded: Tensor, count: Tensor) -> Tensor:
    """The live-row mask of a bounded value, shaped to broadcast over it."""
    bound = padded.size(0)
    return live_rows(bound, count).reshape([bound] + [1] * (padded.dim() - 1))



def pad_live(padded: Tensor, count: Tensor, pad: List[int],
             value: Optional[float]) -> Tuple[Tensor, Tensor]:
    """F.pad(x, pad, value=value) of a bounded value, pad's last pair
    padding dim 0 (before, after >= 0): before rows of value, the live
    rows, after rows of value; the padded rows padded, then every row from
    before + count on set to value (the after rows and the padding)."""
    fill = 0.0 if value is None else value
    y = torch.constant_pad_nd(padded, pad, fill)
    live_end = count + pad[-2]
    tail = torch.arange(y.size(0), device=y.device) >= live_end
    y = y.masked_fill(tail.reshape([y.size(0)] + [1] * (y.dim() - 1)), fill)
    return y, live_end + pad[-1]


def slice_live(padded: Tensor, count: Tensor, start: int, end: Optional[int],
               step: int) -> Tuple[Tensor, Tensor]:
    """x[start:end:step] along dim 0 of a bounded value, start >= 0 and
    step >= 1: the padded rows sliced alike (to end where end >= 0), and
    how many of them are live (end < 0 counts back from the count)."""
    if end is None:
        last = count
        rows = padded[start::step]
    elif end < 0:
        last = torch.clamp(count + end, min=0)
        rows = padded[start::step]
    else:
        last = torch.clamp(count, max=end)
        rows = padded[start:end:step]
    live = torch.div(last - start + step - 1, step, rounding_mode="floor")
    return rows, torch.clamp(live, min=0)


def slice_lifted(x: Tensor, start: Tensor, end: Tensor) -> Tuple[Tensor, Tensor]:
    """x[start:end] along dim 0 of a tensor of static rows by bounds read
    from data (0-d int64): Python's slice clamps each into [0, n], a
    negative one counting from the end. The rows from start on, gathered
    (those past the count are padding: the last row repeated), and
    max(end - start, 0) of them live."""
    n = x.size(0)
    s = start.to(x.device)
    e = end.to(x.device)
    s = torch.where(s < 0, s + n, s).clamp(0, n)
    e = torch.where(e < 0, e + n, e).clamp(0, n)
    count = (e - s).clamp(min=0)
    if n == 0:
        return x, count
    rows = (torch.arange(n, device=x.device) + s).clamp(max=n - 1)
    return x.index_select(0, rows), count


def softmax_rows(rows: Tensor, count: Tensor, log: bool,
                 dtype: Optional[int]) -> Tensor:
    """softmax(x, 0) (log_softmax with log) of a bounded value: the padding
    made -inf, so that the live rows' results are the original's (the
    padding's are 0, or -inf for log)."""
    x = rows if dtype is None else rows.to(dtype)
    x = x.masked_fill(~keep_rows(x, count), float("-inf"))
    if log:
        return torch.log_softmax(x, 0)
    return torch.softmax(x, 0)


def bincount_live(x: Tensor, count: Tensor, minlength: int) -> Tensor:
    """torch.bincount(x[:count], minlength=minlength), minlength >= 1, of a
    bounded vector: its padding counted in bin 0 and taken out again. The
    length is the live values' (max(minlength, largest + 1)): a 0 adds no
    bin where minlength >= 1, and a negative live value raises as before."""
    live = live_rows(x.size(0), count)
    counts = torch.bincount(torch.where(live, x, torch.zeros_like(x)), None, minlength)
    first = torch.arange(counts.size(0), device=x.device) == 0
    return counts - first.long() * (x.size(0) - count)


def trapz_live(y: Tensor, x: Tensor, count: Tensor) -> Tensor:
    """torch.trapz(y[:count], x[:count]) of vectors y and x bounded by one
    count: the pairs past the count add 0 (the padding may hold NaN or inf),
    summed and halved as PyTorch's trapezoid does."""
    n = y.size(0)
    pairs = torch.arange(max(n - 1, 0), device=y.device) + 1 < count
    terms = (x[1:] - x[:-1]) * (y[1:] + y[:-1])
    return terms.masked_fill(~pairs, 0).sum() / 2.0


def trapz_fits(y: Tensor, x: Tensor) -> bool:
    """Whether trapz_live gives torch.trapz(y, x) on the live rows: y and x
    vectors, and one dtype whether or not y is empty (an empty y gives
    zeros of y.sum()'s dtype, others the promoted product's): y floating
    point, of the dtype x promotes to with it."""
    return (y.dim() == 1 and x.dim() == 1 and y.is_floating_point()
            and torch.promote_types(y.dtype, x.dtype) == y.dtype)


def live_nonzero(padded: Tensor, count: Tensor) -> Tensor:
    """Which elements of a bounded value are nonzero, false on its padding
    rows: what where/nonzero of the original's rows select, in its padded
    shape (the live rows' coordinates are the original's)."""
    return (padded != 0) & keep_rows(padded, count)


def fit_rows(padded: Tensor, n: int) -> Tensor:
    """A bounded value's padded rows cut or extended (zeros; false for a
    mask) to n: the live rows stay where there are no more of them than n."""
    if padded.size(0) >= n:
        return padded.narrow(0, 0, n)
    rest = padded.new_zeros([n - padded.size(0)] + padded.size()[1:])
    return torch.cat([padded, rest], 0)


def broadcast_rows(a: Tensor, count_a: Tensor, b: Tensor,
                   count_b: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """Two bounded values of one rank whose counts are not known equal,
    their rows lined up as an elementwise op broadcasts the values they
    stand for: one by one where the counts are equal, the one row of a
    count of 1 repeated over the other's rows (for any other pair the
    original raises). Both at the longer padding; the count, the broadcast
    one."""
    n = max(a.size(0), b.size(0))
    return (lined_up(a, count_a, n), lined_up(b, count_b, n),
            torch.where(count_a == 1, count_b, count_a))


def lined_up(x: Tensor, count: Tensor, n: int) -> Tensor:
    """Row r of bounded x at each position r < n, or its row 0 everywhere
    where its count is 1; positions past its padding read its last row,
    and an x with no rows gives zeros (padding either way)."""
    if x.size(0) == 0:
        return x.new_zeros([n] + x.size()[1:])
    r = torch.arange(n, device=x.device) * (count != 1)
    return x.index_select(0, r.clamp_max(x.size(0) - 1))


def ignore_padding(target: Tensor, count: Tensor, ignore_index: int) -> Tensor:
    """Class targets of a bounded value with the padding rows set to
    ignore_index: a loss then skips them (and never reads their classes)."""
    return target.masked_fill(~keep_rows(target, count), ignore_index)


def reduce_live(rows: Tensor, count: Tensor, mean: bool) -> Tensor:
    """sum (or mean over the live elements) of per-row losses of a bounded
    value; NaN for a mean of none, as PyTorch's."""
    total = rows.masked_fill(~keep_rows(rows, count), 0).sum()
    if mean:
        return total / (count * (rows.numel() // max(rows.size(0), 1)))
    return total


def sort_rows(padded: Tensor, count: Tensor, descending: bool) -> Tuple[Tensor, Tensor]:
    """sort(x, dim=0) of a bounded value: the live rows sorted (stably, each
    column on its own), then the padding rows. Two stable sorts, no
    sentinel value, so NaN, infinities and every dtype keep their order: by
    value first, then live rows before padding rows."""
    return sort_live_rows(padded, keep_rows(padded, count).expand_as(padded),
                          descending)


def sort_live_rows(padded: Tensor, live: Tensor,
                   descending: bool) -> Tuple[Tensor, Tensor]:
    """sort_rows for any live mask of padded's shape: the rows where it
    holds first."""
    _, by_value = torch.sort(padded, dim=0, descending=descending, stable=True)
    dead = (~live).gather(0, by_value).long()
    _, live_first = torch.sort(dead, dim=0, stable=True)
    order = by_value.gather(0, live_first)
    return padded.gather(0, order), order


def sort_dim(padded: Tensor, count: Tensor, dim: int,
             descending: bool) -> Tuple[Tensor, Tensor]:
    """sort(x, dim) of a bounded value, dim of any sign: along dim 0 the live
    rows first (sort_rows), along another dim within each row. Which one is
    known on the host (the rank), so the branch costs no sync."""
    if dim < 0:
        dim = dim + padded.dim()
    if dim == 0:
        return sort_rows(padded, count, descending)
    return torch.sort(padded, dim=dim, descending=descending, stable=True)


def topk_rows(padded: Tensor, count: Tensor, k: int,
              largest: bool) -> Tuple[Tensor, Tensor]:
    """The first min(k, rows) rows of sort_rows's order (live rows first,
    each column by value), by one topk over a key instead of two sorts of
    every row: topk(x, k', dim=0) of a bounded value for any k' <= k, as
    RetinaNet's per-level topk(min(K, n)) of thousands of padded scores
    takes it. Equal values come in an unspecified order, as torch.topk
    leaves them. The key is float64, where every value of a dtype of 32 bits
    or fewer is exact, and it puts every live row above every padding row
    (-inf): a live -inf becomes -1e300, below every float32 value; choosing
    the smallest, values are negated and a live NaN (which topk and sort
    put after every number) becomes -1e305. int64 and float64 values do not
    all fit such a key: they take sort_rows."""
    n = padded.size(0)
    k = min(k, n)
    return top_live_rows(padded, keep_rows(padded, count).expand_as(padded), k, largest)


def topk_positions(key: Tensor, k: int, largest: bool) -> Tensor:
    """torch.topk(key, k, largest=largest)[1] of a vector, k <= its size,
    equal values in an unspecified order as topk leaves them. A long vector
    runs in blocks of 2^19 elements, the top k of each, then the top k of
    those: the same values, at a third to a half of one topk's time over
    millions of elements (its queue of every element no longer leaves the
    cache), and the blocks run in parallel. On the CPU: a GPU's one topk
    is a radix select, not timed in blocks."""
    n = key.size(0)
    per = 524288
    rows = n // per
    if rows < 2 or k > per or key.is_cuda:
        return torch.topk(key, k, largest=largest)[1]
    head = key[:rows * per].view(rows, per)
    _, picked = torch.topk(head, k, dim=1, largest=largest)
    picked = picked + torch.arange(rows, device=key.device)[:, None] * per
    tail = key[rows * per:]
    _, last = torch.topk(tail, min(k, tail.size(0)), largest=largest)
    positions = torch.cat([picked.reshape(-1), last + rows * per])
    values = key.gather(0, positions)
    return positions.gather(0, torch.topk(values, k, largest=largest)[1])


def top_live_rows(padded: Tensor, live: Tensor, k: int,
                  largest: bool) -> Tuple[Tensor, Tensor]:
    """topk_rows for any live mask of padded's shape, k <= rows: its key
    for values of 32 bits or fewer, sort_live_rows's two sorts for int64
    and float64 values, which the key cannot hold exactly."""
    dt = padded.dtype
    if dt == 4 or dt == 7 or padded.is_complex():  # int64, float64
        values, order = sort_live_rows(padded, live, largest)
        return values[:k], order[:k]
    x = padded.to(7)  # float64
    dead = torch.full_like(x, float("-inf"))
    if largest:
        key = torch.where(x == float("-inf"), torch.full_like(x, -1e300), x)
    else:
        key = torch.where(torch.isnan(x), torch.full_like(x, -1e305),
                          torch.where(x == float("inf"), torch.full_like(x, -1e300), -x))
    keyed = torch.where(live, key, dead)
    if keyed.dim() == 1:
        order = topk_positions(keyed, k, True)
    else:
        order = torch.topk(keyed, k, dim=0)[1]
    return padded.gather(0, order), order


def masked_topk(x: Tensor, mask: Tensor, k: int, largest: bool,
                plain: bool) -> Tuple[Tensor, Tensor]:
    """topk(x[mask], k', 0) for any k' <= k, x and mask of one shape, as
    bounded rows without compacting the mask: the values and the positions
    of the rows among x's elements (padded past the mask's count, as
    topk_rows pads). `plain` where every element the mask selects is above
    -inf (below inf choosing the smallest) and not NaN, as `x > y` selects:
    the key is then x where the mask holds, -inf (inf) elsewhere. Otherwise
    topk_rows's float64 key, or for int64 and float64 values sort_rows's
    two sorts (equal values, as torch.topk leaves them, in an unspecified
    order)."""
    flat = x.reshape(-1)
    live = mask.reshape(-1) != 0
    k = min(k, flat.size(0))
    if plain and flat.is_floating_point():
        fill = float("-inf")
        if not largest:
            fill = float("inf")
        key = torch.where(live, flat, torch.full([], fill, dtype=flat.dtype,
                                                 device=flat.device))
        positions = topk_positions(key, k, largest)
        return flat.gather(0, positions), positions
    return top_live_rows(flat, live, k, largest)


def ranks_at(mask: Tensor, positions: Tensor) -> Tensor:
    """The rows of x[mask] at these positions among the mask's elements
    (each where the mask holds; 0 at the padding's)."""
    live = mask.reshape(-1) != 0
    return (torch.cumsum(live, 0) - 1).gather(0, positions).clamp(min=0)


def rows_at(x: Tensor, mask: Tensor, positions: Tensor) -> Tensor:
    """x[mask] at the rows ranks_at(mask, positions) names, for a mask over
    x's leading mask.dim() dimensions, which the graph shows to be the
    mask's shape: x's rows at the positions."""
    return leading_rows(x, mask).index_select(0, positions)


def checked_rows_at(x: Tensor, mask: Tensor, positions: Tensor) -> Tensor:
    """rows_at where the shapes may differ (checked_rows)."""
    return checked_rows(x, mask).index_select(0, positions)


def where_index_at(x: Tensor, k: int, positions: Tensor) -> Tensor:
    """where(x)[k] at the rows ranks_at(x != 0, positions) names."""
    return coordinate(positions, x.size(), k)


def score_order(scores: Tensor, count: Optional[Tensor]) -> Tensor:
    """Rows by descending score, ties by position (a stable sort, as
    torchvision's nms sorts); with a count, the live rows first."""
    order = torch.sort(scores, stable=True, dim=0, descending=True)[1]
    if count is not None:
        dead = (~live_rows(scores.size(0), count)).index_select(0, order)
        order = order.index_select(0, torch.sort(dead.long(), stable=True)[1])
    return order


def iou_over(boxes: Tensor, iou_threshold: float) -> Tensor:
    """[n, n] bool: IoU(i, j) > iou_threshold, with the arithmetic of
    torchvision's nms kernel on boxes' device. On the CPU it compares the
    float IoU in double; on CUDA with the threshold rounded to float."""
    x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    area = (x2 - x1) * (y2 - y1)
    w = (torch.minimum(x2[:, None], x2[None, :]) -
         torch.maximum(x1[:, None], x1[None, :])).clamp(min=0)
    h = (torch.minimum(y2[:, None], y2[None, :]) -
         torch.maximum(y1[:, None], y1[None, :])).clamp(min=0)
    inter = w * h
    iou = inter / (area[:, None] + area[None, :] - inter)
    if boxes.is_cuda:
        t = torch.full([], iou_threshold, dtype=6, device=boxes.device)  # float
        return iou > t.to(iou.dtype)
    # float iou > double t, for a float iou: iou >= t' where t' is t rounded
    # to iou's dtype and rounding went up, else iou > t'.
    t = torch.full([], iou_threshold, dtype=iou.dtype, device=boxes.device)
    return torch.where(t.to(7) > iou_threshold, iou >= t, iou > t)


def greedy_nms(boxes: Tensor, scores: Tensor, iou_threshold: float,
               count: Optional[Tensor],
               classes: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """torchvision's greedy NMS as (order, removed): the rows by descending
    score, and along that order which rows it suppresses (with a count, the
    padding rows too). A row is kept unless a kept row before it overlaps it
    by more than the threshold. With a count, only the first count rows take
    part (a bounded input); with classes, only rows of one class suppress
    each other (batched NMS: one NMS per class, as batched_nms's per-class
    loop runs it, since the stable score order restricted to a class is that
    class's own order). On the CPU, nms_on_host; elsewhere nms_walk."""
    n = boxes.size(0)
    order = score_order(scores, count)
    sorted_boxes = boxes.index_select(0, order)
    removed = torch.zeros([n], dtype=11, device=boxes.device)  # bool
    if count is not None:
        removed = ~live_rows(n, count)
    if classes is None:
        # One tensor holds the boxes and the padding: the branch on its
        # device knows all it reads is on the host.
        rows = torch.cat([sorted_boxes, removed.to(sorted_boxes.dtype)[:, None]], 1)
        if rows.is_cpu:
            return order, nms_on_host(rows, iou_threshold, 128)
    sorted_classes: Optional[Tensor] = None
    if classes is not None:
        sorted_classes = classes.index_select(0, order)
    return order, nms_walk(sorted_boxes, removed, iou_threshold, sorted_classes)


def nms_walk(sorted_boxes: Tensor, removed: Tensor, iou_threshold: float,
             sorted_classes: Optional[Tensor]) -> Tensor:
    """greedy_nms's suppressed rows as the device computes them, with no
    host read: the IoU matrix at once, then a loop of host-static trip
    count (the rows), each step a few vector ops. Rows, padding and classes
    are in score order."""
    over = iou_over(sorted_boxes, iou_threshold)
    if sorted_classes is not None:
        c = sorted_classes
        over = over & (c[:, None] == c[None, :])
    over = over.triu(1)  # a row suppresses only rows after it
    for i in range(sorted_boxes.size(0)):
        removed = removed | (over[i] & ~removed[i])
    return removed


def nms_on_host(rows: Tensor, iou_threshold: float, block: int) -> Tensor:
    """greedy_nms's suppressed rows for rows = [n, 5] (sorted boxes, then 1
    for a padding row) on the CPU, where a read of a value costs no device
    sync: the rows in blocks of `block`; each block is first checked against
    the rows kept so far (one [kept + block, block] IoU matrix: the work is
    the kept rows' times the rows, as torchvision's loop), then resolved
    within itself as the fixed point of `keep[j] = live[j] and no kept i < j
    overlaps j`: iterated from `live`, after t steps the first t rows are
    final, and the first step that changes nothing has reached the one fixed
    point, the greedy result (detector boxes take 1-4 steps). Sizes read
    from data on the host (the kept rows' count) size tensors here: this
    path is for the CPU only."""
    n = rows.size(0)
    x1, y1, x2, y2, dead = rows.unbind(1)
    # Coordinates and area as contiguous rows: the IoU's broadcasts then
    # run on contiguous vectors.
    cols = torch.stack([x1, y1, x2, y2, (x2 - x1) * (y2 - y1)], 0)
    t = torch.full([], iou_threshold, dtype=rows.dtype, device=rows.device)
    # float iou > double t: iou >= t' where t' rounded up, else iou > t'.
    inclusive = bool(t.to(7) > iou_threshold)
    lowest = torch.full([], float("-inf"), dtype=rows.dtype, device=rows.device)
    keep = dead == 0
    kept_cols = torch.empty([5, n + block], dtype=rows.dtype, device=rows.device)
    kept = 0
    for start in range(0, n, block):
        end = min(start + block, n)
        size = end - start
        candidates = cols[:, start:end]
        kept_cols[:, kept:kept + size] = candidates
        iou = iou_of_columns(kept_cols[:, :kept + size], candidates)
        live = keep[start:end]
        if kept > 0:
            # fmax: a NaN IoU (0 / 0) is no overlap, as NaN > t is false.
            nearest = torch.fmax(iou[:kept], lowest).amax(0)
            live = live & ~over_threshold(nearest, t, inclusive)
        # [i, j]: row i of the block suppresses row j after it, as 0/1
        # (float: sums of at most `block` ones are exact).
        within = over_threshold(iou[kept:], t, inclusive).triu_(1).to(6)
        block_keep = live
        while True:
            step = live & (torch.mv(within.t(), block_keep.to(6)) == 0)
            if bool(torch.equal(step, block_keep)):
                break
            block_keep = step
        keep[start:end] = block_keep
        # The block's kept rows, in order, after the kept rows so far.
        first = torch.sort((~block_keep).to(0), stable=True)[1]  # uint8
        kept_cols[:, kept:kept + size] = candidates.index_select(1, first)
        kept += int(block_keep.sum())
    return ~keep


def iou_of_columns(a: Tensor, b: Tensor) -> Tensor:
    """[m, k] IoU of a = [5, m] and b = [5, k] (rows x1, y1, x2, y2, area),
    with the arithmetic of torchvision's CPU kernel (iou_over)."""
    ax1, ay1, ax2, ay2, area_a = a.unbind(0)
    bx1, by1, bx2, by2, area_b = b.unbind(0)
    w = (torch.minimum(ax2[:, None], bx2) - torch.maximum(ax1[:, None], bx1)).clamp_(min=0)
    h = (torch.minimum(ay2[:, None], by2) - torch.maximum(ay1[:, None], by1)).clamp_(min=0)
    inter = w.mul_(h)
    return inter.div_((area_a[:, None] + area_b).sub_(inter))


def over_threshold(iou: Tensor, t: Tensor, inclusive: bool) -> Tensor:
    if inclusive:
        return iou >= t
    return iou > t


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float,
        count: Optional[Tensor], classes: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """torchvision::nms(boxes, scores, iou_threshold) as a bounded value: the
    kept rows' indices by descending score, padded to boxes' rows (with the
    first index in that order), and their count (greedy_nms)."""
    order, removed = greedy_nms(boxes, scores, iou_threshold, count, classes)
    positions, kept = compact(~removed)
    return order.index_select(0, positions), kept


def nms_kept_mask(boxes: Tensor, scores: Tensor, iou_threshold: float,
                  classes: Tensor) -> Tensor:
    """[n] bool: the rows batched NMS keeps, in the input's order: what
    batched_nms's per-class loop marks in its keep_mask (greedy_nms)."""
    order, removed = greedy_nms(boxes, scores, iou_threshold, None, classes)
    # order is a permutation: each row is written once.
    return torch.zeros_like(removed).scatter(0, order, ~removed)


def index_mask(indices: Tensor, count: Tensor) -> Tensor:
    """[n] bool, n = indices.size(0): the rows the first count indices name
    (each at most once: NMS's kept rows, padded). The padding's writes go
    to an extra slot n, dropped: every write to a slot writes one value."""
    n = indices.size(0)
    live = live_rows(n, count)
    slot = torch.where(live, indices, torch.full_like(indices, n))
    out = torch.zeros([n + 1], dtype=11, device=indices.device)  # bool
    return out.scatter(0, slot, live)[:n]


# Host numbers built on a device (passes/Uploads.h): one fill_ of a host
# number per element, in the dtype that holds every such number exactly, so
# nothing is copied from host memory (a copy that waits for the stream).
def ints_on(values: List[int], device: Device) -> Tensor:
    out = torch.empty([len(values)], dtype=4, device=device)  # int64
    for i in range(len(values)):
        out.select(0, i).fill_(values[i])
    return out


def floats_on(values: List[float], device: Device) -> Tensor:
    out = torch.empty([len(values)], dtype=7, device=device)  # float64
    for i in range(len(values)):
        out.select(0, i).fill_(values[i])
    return out


def bools_on(values: List[bool], device: Device) -> Tensor:
    out = torch.empty([len(values)], dtype=11, device=device)  # bool
    for i in range(len(values)):
        out.select(0, i).fill_(int(values[i]))  # a Scalar takes numbers
    return out


def split_rows(x: Tensor, counts: List[Tensor], sizes: List[int]) -> List[Tensor]:
    """x.split([int(c) for c in counts]) of x's live rows, the cat of parts
    with these counts (cat_rows): part i has its live rows first, padded to
    sizes[i] rows."""
    parts: List[Tensor] = []
    start = torch.zeros([], dtype=4, device=x.device)  # int64
    last = max(x.size(0) - 1, 0)
    for i in range(len(sizes)):
        if x.size(0) == 0:
            parts.append(x.new_zeros([sizes[i]] + x.size()[1:]))
        else:
            rows = torch.arange(sizes[i], device=x.device) + start
            parts.append(x.index_select(0, rows.clamp(max=last)))
        start = start + counts[i].to(x.device)
    return parts


def row_size(x: Tensor) -> int:
    """The elements of one row of x: the product of its trailing sizes."""
    n = 1
    for s in x.size()[1:]:
        n *= s
    return n


def broadcasts_rows(x: Tensor, y: Tensor) -> bool:
    """Whether x's rows broadcast along y's (x.expand_as(y) takes y's rows):
    x of a lower rank, or of one row."""
    return x.dim() < y.dim() or (x.dim() > 0 and x.size(0) == 1)
