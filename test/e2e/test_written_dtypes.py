"""A tensor written in place keeps its dtype, so indices stay indices after a
masked store (Analysis.cpp's joinWritten): PointNet++'s `query_ball_point`
(yanx27/Pointnet_Pointnet2_pytorch) fills `group_idx[sqrdists > r ** 2] = N`
and `group_idx[mask] = group_first[mask]` into int64 indices, then gathers
points by them. Through the real binary: the gathers are no selection by a
mask, the stores become `where`s, no host sync is left, and the outputs equal
the original's."""
import torch
from torch import Tensor

from conftest import sync_points


def square_distance(src: Tensor, dst: Tensor) -> Tensor:
    B, N, _ = src.shape
    _, M, _ = dst.shape
    dist = -2 * torch.matmul(src, dst.permute(0, 2, 1))
    dist += torch.sum(src ** 2, -1).view(B, N, 1)
    dist += torch.sum(dst ** 2, -1).view(B, 1, M)
    return dist


def index_points(points: Tensor, idx: Tensor) -> Tensor:
    B = points.shape[0]
    view_shape = list(idx.shape)
    view_shape = view_shape[:1] + [1] * (len(view_shape) - 1)
    repeat_shape = list(idx.shape)
    repeat_shape[0] = 1
    batch_indices = torch.arange(B, dtype=torch.long).to(points.device).view(
        view_shape).repeat(repeat_shape)
    return points[batch_indices, idx, :]


class QueryBallPoint(torch.nn.Module):
    def forward(self, xyz: Tensor, new_xyz: Tensor) -> Tensor:
        radius, nsample = 0.3, 4
        B, N, C = xyz.shape
        _, S, _ = new_xyz.shape
        group_idx = torch.arange(N, dtype=torch.long).to(xyz.device).view(
            1, 1, N).repeat([B, S, 1])
        sqrdists = square_distance(new_xyz, xyz)
        group_idx[sqrdists > radius ** 2] = N
        group_idx = group_idx.sort(dim=-1)[0][:, :, :nsample]
        group_first = group_idx[:, :, 0].view(B, S, 1).repeat([1, 1, nsample])
        mask = group_idx == N
        group_idx[mask] = group_first[mask]
        return index_points(xyz, group_idx)


def test_indices_written_by_masks_stay_indices(staticify, save, tmp_path):
    path = save(QueryBallPoint())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    before, after = sync_points(report)
    assert after == 0 and before == 3, (before, after)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    g = torch.Generator().manual_seed(0)
    for case in range(9):
        xyz = torch.rand(2, 12, 3, generator=g)
        # Centres on points (as farthest-point sampling picks them: every
        # ball holds one), with fewer or more than nsample points in reach.
        spread = [0.05, 1.0, 3.0][case % 3]
        xyz = xyz * spread
        new_xyz = xyz[:, case % 4:case % 4 + 3]
        assert torch.equal(static(xyz, new_xyz), original(xyz, new_xyz)), case
