"""Reports of every model staticify's tests know, for comparing two binaries.

A refactoring of the engine must not change what staticify does. This scripts
the seed sampler (examples/sampler.py), the seed 002 examples and the other
models of test/e2e/models.py, every model of the rewrite corpus
(test/e2e/corpus.py) and of the bounded corpus (test/e2e/bounded_models.py),
runs each binary on each with and without --padded-outputs, and compares the
JSON reports and the text on stderr (the input and output paths aside).

    /usr/bin/python3 test/e2e/report_snapshot.py --old OLD/staticify --new build/bin/staticify

With --ignore-added-fields, a field of the new binary's report that the old
one does not write (a field added since) is not compared.

With --ignore-ssa-numbers, the numbers of unnamed SSA values (`%41`) in the
findings' node text are not compared: a pass that keeps a rewrite it tried on
a copy of the graph (RewriteTrial::adopt) numbers the values it created in the
copy's sequence, not the original's; names, ops, locations, actions, rules,
reasons and counts are still compared.

Exit status 0 when every report is identical, 1 otherwise (the first
differences printed)."""
import argparse
import difflib
import inspect
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import torch

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "examples"))

import bounded_models  # noqa: E402
import corpus  # noqa: E402
import idioms  # noqa: E402
import models  # noqa: E402
import sampler  # noqa: E402

VARIANTS = {"default": [], "padded": ["--padded-outputs"]}


def module_classes(mod):
    """The nn.Module classes defined in \\p mod that build with no arguments."""
    for name, cls in sorted(vars(mod).items()):
        if (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)
                and cls.__module__ == mod.__name__):
            try:
                yield name, cls()
            except TypeError:
                continue


def script_all(workdir):
    """Scripts every model into \\p workdir; returns their paths by name."""
    paths = {}

    def save(name, module):
        path = workdir / f"{name}.pt"
        torch.jit.script(module).save(str(path))
        paths[name] = path

    save("seed000-sampler", sampler.BalancedSampler())
    for mod in (models, bounded_models):
        for name, module in module_classes(mod):
            save(f"{mod.__name__}.{name}", module)
    for name, module, _, _ in corpus.CASES:
        save(f"corpus.{name}", module)
    for name, _, module, _ in idioms.IDIOMS:
        save(f"idioms.{name}", module)
    return paths


SSA_NUMBER = re.compile(r"%[0-9]+\b")


def without_ssa_numbers(report):
    r"""\p report with every `%<number>` in the findings' node text as `%#`."""
    for method in report.get("methods", []):
        for finding in method.get("findings", []):
            for key in ("node", "value"):
                if isinstance(finding.get(key), str):
                    finding[key] = SSA_NUMBER.sub("%#", finding[key])
    return report


def without_added_fields(new, old):
    r"""\p new without the object fields \p old lacks (fields added since the
    old binary), recursively."""
    if isinstance(new, dict) and isinstance(old, dict):
        return {k: without_added_fields(v, old[k]) for k, v in new.items() if k in old}
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [without_added_fields(a, b) for a, b in zip(new, old)]
    return new


def run(binary, model, variant, workdir, ignore_ssa_numbers=False):
    out = workdir / "out.pt"
    report = workdir / "report.json"
    proc = subprocess.run([binary, str(model), "-o", str(out), "--report-json",
                           str(report), *VARIANTS[variant]],
                          capture_output=True, text=True, timeout=120)
    result = {"returncode": proc.returncode,
              "stderr": proc.stderr.replace(str(model), "IN").replace(str(out), "OUT")}
    if report.exists():
        data = json.loads(report.read_text())
        data.pop("input", None)
        data.pop("output", None)
        result["report"] = without_ssa_numbers(data) if ignore_ssa_numbers else data
        report.unlink()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the reference binary")
    parser.add_argument("--new", required=True, help="the binary under test")
    parser.add_argument("--ignore-ssa-numbers", action="store_true",
                        help="do not compare the numbers of unnamed values in findings")
    parser.add_argument("--ignore-added-fields", action="store_true",
                        help="do not compare report fields the old binary does not write")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = pathlib.Path(tmp)
        paths = script_all(workdir)
        differ = 0
        for name, path in paths.items():
            for variant in VARIANTS:
                old = run(args.old, path, variant, workdir, args.ignore_ssa_numbers)
                new = run(args.new, path, variant, workdir, args.ignore_ssa_numbers)
                if args.ignore_added_fields:
                    new = without_added_fields(new, old)
                if old == new:
                    continue
                differ += 1
                print(f"DIFFERS: {name} ({variant})")
                a = json.dumps(old, indent=1, sort_keys=True).splitlines()
                b = json.dumps(new, indent=1, sort_keys=True).splitlines()
                for line in list(difflib.unified_diff(a, b, lineterm=""))[:40]:
                    print("  " + line)
        total = len(paths) * len(VARIANTS)
        print(f"{total - differ} of {total} reports identical "
              f"({len(paths)} models x {len(VARIANTS)} option sets)")
        return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
