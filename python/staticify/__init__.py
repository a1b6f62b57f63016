"""staticify from Python: make a PyTorch program's data-dependent shapes static.

    import staticify
    static_model, report = staticify.optimize(model)
    print(report)                  # the compiler-style findings, as --report prints
    report = staticify.analyze(model)   # the report only, nothing rewritten

`model` is an `nn.Module` (scripted here), a TorchScript `ScriptModule`, or an
FX `GraphModule`. The work is the `staticify` command itself, run in this
process (`staticify._native`): the options are the CLI's, one to one, and the
outputs are the ones the CLI writes for the same input. The model passed in is
never modified: staticify works on a saved copy and returns a new module.
`python3 -m staticify IN.pt -o OUT.pt ...` is the CLI.
"""
import os
import re
import tempfile
from typing import Dict, Iterable, Optional, Sequence, Tuple

import torch

from .report import Finding, Location, MethodReport, Report, Summary

__all__ = ["Error", "Report", "MethodReport", "Summary", "Finding", "Location",
           "optimize", "analyze", "run", "main", "signature_of", "runtime_library"]


class Error(Exception):
    """A bad model, option or input: the one-line message the CLI prints."""


def _native_module():
    try:
        from . import _native as native
    except ImportError as e:  # the package's .py files without the build
        raise Error(f"staticify's native module is not built ({e}); run scripts/build.sh") \
            from None
    return native


def run(args: Sequence[str]) -> Tuple[int, str, str]:
    """Runs `staticify ARGS...` in this process: (exit status, stdout, stderr)."""
    return _native_module().run([os.fspath(a) for a in args])


def runtime_library() -> str:
    """The path of libstaticify_runtime.so, which outputs made with
    `runtime_ops`, `inference`, `cuda_graphs` or `lower` need:
    `torch.ops.load_library(staticify.runtime_library())` before
    `torch.jit.load` in another process."""
    path = _native_module().runtime_library()
    if not path or not os.path.exists(path):
        raise Error(f"staticify's runtime library is not built (looked for {path!r}); "
                    "build the target staticify_runtime (scripts/build.sh)")
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python3 -m staticify ...`: the CLI, printing what it prints."""
    import sys
    status, out, err = run(sys.argv[1:] if argv is None else argv)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return status


def _scripted(model) -> torch.jit.ScriptModule:
    if isinstance(model, torch.jit.ScriptModule):
        return model
    if isinstance(model, torch.jit.ScriptFunction):
        raise Error("a scripted function is not a module: wrap it in an nn.Module")
    if not isinstance(model, torch.nn.Module):
        raise Error(f"expected an nn.Module, a ScriptModule or an FX GraphModule, "
                    f"got {type(model).__name__}")
    try:
        return torch.jit.script(model)  # an FX GraphModule scripts from its code
    except Exception as e:  # noqa: BLE001 - turned into our one-line error
        raise Error(f"{type(model).__name__} does not script: {_first_problem(e)}; "
                    "make it scriptable (torch.jit.script) or pass a ScriptModule") from None


def _first_problem(error: Exception) -> str:
    """TorchScript's complaint and the source line it points at, on one line."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    what = lines[0] if lines else type(error).__name__
    if "operation failed in the TorchScript interpreter" in what:
        # A TorchScript run's error: the exception itself is its last line.
        return lines[-1]
    where = next((ln for ln in lines if ln.startswith("File \"")), None)
    return what.rstrip(":") + (f" ({where})" if where else "")


_DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
           torch.float64: "f64", torch.int8: "i8", torch.int16: "i16", torch.int32: "i32",
           torch.int64: "i64", torch.bool: "b8"}


def signature_of(example_inputs, sizes: bool = False) -> str:
    """--input-types for tensors like these: their dtypes and ranks, every
    size `?` (the kernel takes any size), or with `sizes` their sizes (the
    sizes batch=True's example run takes)."""
    inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    types = []
    for t in inputs:
        if not isinstance(t, torch.Tensor) or t.dtype not in _DTYPES:
            raise Error(f"lower= and batch= take tensor inputs of {', '.join(_DTYPES.values())}; "
                        f"got {type(t).__name__ if not isinstance(t, torch.Tensor) else t.dtype}")
        dims = map(str, t.shape) if sizes else "?" * t.dim()
        types.append(f"{_DTYPES[t.dtype]}[{','.join(dims)}]")
    return ", ".join(types)


def _options(methods, passes=None, bounds=None, padded_outputs=False, outline=False,
             cuda_graphs=False, runtime_ops=False, specialize_training=False,
             drop_data_asserts=False, load_libraries=(), lower=None, lower_types=None,
             assume_none=(), static_forms=False, inference=False, static_loops=False,
             batch=False):
    args = []
    for name in ([assume_none] if isinstance(assume_none, str) else assume_none):
        args += ["--assume-none", name]
    if lower is not None:
        args += ["--lower=" + lower]
    if lower_types is not None:
        args += ["--input-types", lower_types]
    for m in ([methods] if isinstance(methods, str) else methods):
        args += ["--method", m]
    if passes is not None:
        args += ["--passes", ",".join([passes] if isinstance(passes, str) else passes)]
    for name, n in (bounds or {}).items():
        args += ["--bound", f"{name}={n}"]
    for flag, on in (("--padded-outputs", padded_outputs), ("--outline", outline),
                     ("--cuda-graphs", cuda_graphs), ("--runtime-ops", runtime_ops),
                     ("--specialize-training", specialize_training),
                     ("--drop-data-asserts", drop_data_asserts),
                     ("--static-loops", static_loops),
                     ("--static-forms", static_forms), ("--inference", inference),
                     ("--batch", batch)):
        if on:
            args.append(flag)
    for lib in ([load_libraries] if isinstance(load_libraries, (str, os.PathLike))
                else load_libraries):
        args += ["--load-library", os.fspath(lib)]
    return args


# The CLI's flags by the names optimize() gives them, for its messages.
_ARGUMENTS = {"--assume-none": "assume_none", "--bound": "bounds", "--lower": "lower",
              "--input-types": "input_types", "--method": "methods", "--passes": "passes",
              "--load-library": "load_libraries", "--padded-outputs": "padded_outputs",
              "--outline": "outline", "--cuda-graphs": "cuda_graphs",
              "--runtime-ops": "runtime_ops", "--specialize-training": "specialize_training",
              "--drop-data-asserts": "drop_data_asserts", "--static-forms": "static_forms",
              "--static-loops": "static_loops", "--inference": "inference",
              "--batch": "batch"}


def _in_python_terms(message: str, tmp: str, model_name: str) -> str:
    """The CLI's one-line message with optimize()'s argument names for its
    flags, the model for the temporary copy staticify read, and no pointer to
    `staticify --help`."""
    message = message.replace("; see 'staticify --help'", "")
    message = re.sub(r"'?" + re.escape(tmp) + r"/input\.pt'?", model_name, message)
    message = message.replace(tmp + os.sep, "")
    message = re.sub(r"--bound ([^\s=]+)=(\d+)", r"bounds={'\1': \2}", message)
    return re.sub(r"(?<![\w-])--[a-z][a-z-]*",
                  lambda m: _ARGUMENTS.get(m.group(0), m.group(0)), message)


def _check_arguments(scripted, methods, bounds, inference, model_name):
    """What Python can tell before the run, in Python's terms."""
    known = list(scripted._c._method_names())
    for m in methods:
        if not scripted._c._has_method(m):
            raise Error(f"{model_name} has no method {m!r}; its methods are: "
                        f"{', '.join(known) if known else 'none'}")
    for name, n in (bounds or {}).items():
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            raise Error(f"bounds: {name!r} is not a variable name or FILE:LINE")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise Error(f"bounds={{{name!r}: {n!r}}}: a bound is a non-negative int")
    if inference and scripted.training:
        raise Error(f"inference=True needs a model in eval mode; {model_name} is in "
                    "training mode: call model.eval() first")


def _staticify(model, write_module, methods, **options):
    scripted = _scripted(model)
    model_name = f"the model ({getattr(scripted, 'original_name', type(model).__name__)})"
    methods = [methods] if isinstance(methods, str) else list(methods)
    _check_arguments(scripted, methods, options.get("bounds"), options.get("inference"),
                     model_name)
    with tempfile.TemporaryDirectory(prefix="staticify-") as tmp:
        source = os.path.join(tmp, "input.pt")
        torch.jit.save(scripted, source)  # a copy: the caller's module is untouched
        report_path, dot_path = os.path.join(tmp, "report.json"), os.path.join(tmp, "graph.dot")
        output = os.path.join(tmp, "output.pt")
        args = [source, "--report", "--report-json", report_path]
        if write_module:
            args += ["-o", output]
        if len(methods) == 1:
            args += ["--dot", dot_path]
        status, out, err = run(args + _options(methods, **options))
        if status != 0:
            lines = [ln for ln in err.splitlines() if ln.startswith("staticify: error: ")]
            message = lines[-1][len("staticify: error: "):] if lines else err.strip()
            raise Error(_in_python_terms(message, tmp, model_name))
        with open(report_path) as f:
            json_text = f.read()
        dot = None
        if os.path.exists(dot_path):
            with open(dot_path) as f:
                dot = f.read()
        report = Report(json_text, out, dot)
        module = torch.jit.load(output) if write_module else None
    return module, report


def optimize(model, example_inputs: Optional[Tuple] = None, *,
             methods: Iterable[str] = ("forward",), passes: Optional[Sequence[str]] = None,
             bounds: Optional[Dict[str, int]] = None, padded_outputs: bool = False,
             outline: bool = False, cuda_graphs: bool = False, runtime_ops: bool = False,
             specialize_training: bool = False, drop_data_asserts: bool = False,
             load_libraries: Iterable[str] = (), lower: Optional[str] = None,
             input_types: Optional[str] = None,
             assume_none: Iterable[str] = (),
             static_forms: bool = False, static_loops: bool = False,
             inference: bool = False,
             batch: bool = False) -> Tuple[torch.jit.ScriptModule, Report]:
    """Rewrites `model` into static form: (the new ScriptModule, its Report).

    Each option is the CLI's (`staticify --help`): `methods` --method,
    `passes` --passes, `bounds` --bound NAME=N, `padded_outputs`, `outline`,
    `cuda_graphs`, `runtime_ops` (the runtime library's kernels, such as
    padded NMS; the library is then loaded in this process, which the new
    module needs), `specialize_training`, `assume_none` --assume-none NAME
    (names of Optional arguments callers never pass), `drop_data_asserts`,
    `static_loops`, `static_forms`, `inference` --inference (the export of an eval-mode
    model: training flags specialised, Optional arguments that default to
    None assumed None, the runtime's kernels), and
    `load_libraries` --load-library (ops already registered in this process,
    torchvision's once it is imported, need none), `lower` --lower ("cpu": each
    method compiled into a CPU kernel kept beside its TorchScript; "cuda":
    into CUDA kernels; "cpu,cuda": both; for inputs
    of `input_types`, or, without them, of the dtypes and ranks of
    `example_inputs`; docs/lowering.md), `batch` --batch (each static method
    M gains M_batched, whose tensor arguments and results have a leading
    batch dimension; the rows' ranks from `input_types` or, without them,
    from `example_inputs`, whose sizes its one example run takes;
    docs/batching.md). With `example_inputs`, the
    new module is run once on them before it is returned, so that a module
    that cannot run fails here. Raises `staticify.Error` with the CLI's
    message. The report's `input` and `output` name the temporary files the
    run used.
    """
    lower_types = input_types
    if (lower is not None or batch) and lower_types is None:
        if example_inputs is None:
            raise Error(f"{'lower=' + repr(lower) if lower is not None else 'batch=True'} "
                        "needs input_types or example_inputs (their dtypes and ranks)")
        lower_types = signature_of(example_inputs, sizes=lower is None)
    module, report = _staticify(model, True, methods, passes=passes, bounds=bounds,
                                padded_outputs=padded_outputs, outline=outline,
                                cuda_graphs=cuda_graphs, runtime_ops=runtime_ops,
                                specialize_training=specialize_training,
                                drop_data_asserts=drop_data_asserts,
                                load_libraries=load_libraries, lower=lower,
                                lower_types=lower_types, assume_none=assume_none,
                                static_forms=static_forms, static_loops=static_loops,
                                inference=inference, batch=batch)
    if example_inputs is not None:
        inputs = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
        try:
            module(*inputs)
        except Exception as e:  # noqa: BLE001 - reported as ours, with the cause
            training = getattr(model, "training", False)
            raise Error(f"the staticified module fails on example_inputs: "
                        f"{_first_problem(e)}"
                        + ("; the model is in training mode: for an inference export, "
                           "call model.eval() first" if training else "")) from e
    return module, report


def analyze(model, *, methods: Iterable[str] = ("forward",), **options) -> Report:
    """The report alone: what is data-dependent, where, and what the pipeline
    would do with it under `options`, which are optimize()'s (`inference`,
    `bounds`, `padded_outputs`...). Nothing is written and `model` is
    unchanged."""
    unknown = set(options) - set(_OPTION_NAMES)
    if unknown:
        raise Error(f"analyze() got unknown option(s) {', '.join(sorted(unknown))}; "
                    f"it takes optimize()'s: {', '.join(_OPTION_NAMES)}")
    _, report = _staticify(model, False, methods, **options)
    return report


_OPTION_NAMES = ("passes", "bounds", "padded_outputs", "outline", "cuda_graphs",
                 "runtime_ops", "specialize_training", "drop_data_asserts",
                 "load_libraries", "assume_none", "static_forms", "static_loops",
                 "inference")
