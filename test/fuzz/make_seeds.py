"""Writes the libFuzzer seed corpus: a few valid archives scripted here, each
as mode 0 (a whole archive: first byte 0), and each of their code, pickle and
debug records as the structured modes 1..4 (first byte: which record of the
fuzzer's built-in template the rest replaces)."""
import pathlib
import sys
import zipfile
from typing import List

import torch


class Masked(torch.nn.Module):
    def forward(self, x):
        return x[x > 0].sum()


class Sampler(torch.nn.Module):
    limits: List[int]

    def __init__(self):
        super().__init__()
        self.limits = [1, 2, 3]
        self.lin = torch.nn.Linear(4, 2)

    def forward(self, x, t):
        m = t > 0
        idx = torch.where(m)[0]
        n = min(idx.numel(), 3)
        if bool(m.any()):
            x = self.lin(x)
        return x[idx[:n]], len(self.limits)


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for module in (Masked(), Sampler()):
        name = type(module).__name__
        path = out / f"{name}.pt"
        torch.jit.script(module).save(str(path))
        data = path.read_bytes()
        path.unlink()
        (out / f"{name}.archive").write_bytes(b"\x00" + data)
        with zipfile.ZipFile(__import__("io").BytesIO(data)) as z:
            for entry in z.namelist():
                mode = (1 if "/code/" in entry and entry.endswith(".py") else
                        2 if entry.endswith("/data.pkl") else
                        3 if entry.endswith("/constants.pkl") else
                        4 if entry.endswith(".debug_pkl") else None)
                if mode is not None:
                    stem = entry.replace("/", "_")
                    (out / f"{name}.{stem}").write_bytes(bytes([mode]) + z.read(entry))


if __name__ == "__main__":
    main(sys.argv[1])
