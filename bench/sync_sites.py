"""Where a forward makes the host wait for the GPU: one forward of each
detector, original and staticified with --specialize-training --runtime-ops
(and with --padded-outputs too), under torch.profiler; every synchronizing CUDA runtime call
(cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, a
blocking cudaMemcpy) is attributed to the chain of ops it ran under (the
outermost first), and the chains are counted. GPU only; the models are
rewritten in process (the CLI cannot load pip torchvision's _C.so), with the
TensorExpr fuser off (docs/benchmarks.md says why). Two of the calls counted
are the profile's own (`torch.cuda.synchronize()` at its end), shown with no
op.

    PYTHONPATH=build-gpu/python python3 bench/sync_sites.py \\
        --models ssd300_vgg16,retinanet_resnet50_fpn --out $OUT/sync-sites.json"""
import argparse
import collections
import json
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from detectors import build  # noqa: E402

SYNCING = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
           "cudaMemcpy")


def image(seed):
    return [torch.rand(3, 480, 640, generator=torch.Generator().manual_seed(seed)).cuda()]


def sites(module):
    """(op chain [runtime call]) -> count, for one forward after three."""
    from torch.profiler import ProfilerActivity, profile
    for i in range(3):  # the profiling executor specializes on its first runs
        module(image(i))
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        module(image(5))
        torch.cuda.synchronize()
    found = collections.Counter()
    for event in prof.events():
        if not event.name.startswith(SYNCING) or event.name.startswith("cudaMemcpyAsync"):
            continue
        chain, parent = [], event.cpu_parent
        while parent is not None:
            chain.append(parent.name)
            parent = parent.cpu_parent
        ops = [c for c in reversed(chain) if "::" in c]
        found[" > ".join(ops[:4]) + f" [{event.name}]"] += 1
    return found.most_common()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="ssd300_vgg16,retinanet_resnet50_fpn")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU (it counts the calls that make the host wait for one)")
    import staticify
    torch._C._jit_set_texpr_fuser_enabled(False)
    report = {}
    for name in args.models.split(","):
        torch.manual_seed(0)
        original = torch.jit.script(build(name))
        static, _ = staticify.optimize(original, specialize_training=True, runtime_ops=True)
        padded, _ = staticify.optimize(original, specialize_training=True, runtime_ops=True,
                                       padded_outputs=True)
        for variant, module in (("original", original), ("with the kernel", static),
                                ("padded", padded)):
            found = sites(module.cuda())
            report[f"{name} {variant}"] = found
            print(f"{name} {variant}: {sum(n for _, n in found)}")
            for chain, n in found:
                print(f"  {n:4d}  {chain}")
    pathlib.Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
