//===- Driver.cpp - The staticify command, as a library --------------------===//
//
// staticify IN.pt -o OUT.pt   rewrite a TorchScript module into static form
// staticify IN.pt --report    analyse only: what is data-dependent, and where
//
// The `staticify` tool's main and the Python API both run this, so the two
// write the same files for the same arguments.
//
//===----------------------------------------------------------------------===//

#include "tools/Driver.h"

#include "passes/Compat.h"
#include "passes/GraphUtils.h"
#include "passes/Pipeline.h"
#include "passes/Report.h"
#include "passes/Signature.h"
#include "tools/CommandLine.h"
#include "tools/CudaGraphs.h"
#include "tools/ModuleIO.h"
#include "tools/StaticifyModule.h"
#include "tools/Supervisor.h"

#ifdef STATICIFY_WITH_MLIR
#include "lower/TorchToMlir.h"
#endif

#include <torch/csrc/jit/api/function_impl.h>

#include <chrono>
#include <iostream>
#include <set>

#include <unistd.h>

using namespace staticify;

static const char *const kUsage =
    R"(usage: staticify INPUT.pt [-o OUTPUT.pt] [options]

Finds every operation of a TorchScript module whose output shape or control
flow depends on tensor data (nonzero, x[mask], unique, .item(), branches on
tensor values...), reports each with its Python source location, runs the
pass pipeline, and writes the module back. A method's graph is replaced only
when a rewriting pass changed it; otherwise the output is the input module
plus the report.

options:
  -o, --output FILE     write the staticified module to FILE (atomically; never
                        the input). The JSON report is added to it as the extra
                        file 'staticify_report.json'.
  --report              print what is left after rewriting, as compiler
                        diagnostics with the reason each was kept, and a
                        summary per method (the default when neither -o nor
                        --report-json is given)
  --report=full         the same with every finding, rewritten ones too
  --report-json FILE    write the report as JSON (docs/report-format.md)
  --dot FILE            write the final graph as Graphviz DOT: static regions,
                        dynamic islands and materialization points in colour
                        (`dot -Tsvg FILE -o graph.svg`); one method only. For
                        the picture before rewriting: --passes inline,normalize
  --method NAME         method to process; repeatable (default: forward)
  --load-library PATH   dlopen a custom-op library before loading, e.g.
                        torchvision's _C.so for torchvision::nms; repeatable
                        (a C++ op library: pip wheels' _C.so files need
                        libtorch_python.so and load only inside Python)
  --inference           the export of an eval-mode model: --specialize-training
                        (refused for a module saved in training mode), every
                        Optional argument that defaults to None assumed None
                        (--assume-none; the report lists them), and
                        --runtime-ops when the runtime library is found
  --no-inline           do not inline calls to submodule methods and functions
  --specialize-training treat each submodule's saved `training` flag as a
                        constant, as torch.jit.freeze does for an eval module:
                        the other mode's branches are removed before analysis
                        (an eval export of a detector loses its loss, matcher
                        and sampler code); off by default
  --assume-none NAME    callers never pass the Optional argument NAME (a
                        detector's `targets` at inference): its uses become
                        None, so the branches that test it go, and the
                        method raises if it is passed; repeatable
  --drop-data-asserts   remove `if <data>: raise ...` checks (asserts on
                        tensor values; kept, as a host sync, by default)
  --static-loops        run a loop that stops on data (`for _ in range(n):
                        ... if done.all(): break`) on to its bound with an
                        active mask: no read of the device per iteration, but
                        every iteration's work, so slower where the loop
                        usually stops early (off by default; on with
                        --cuda-graphs, where it lets the loop be captured)
  --bound NAME=N        an upper bound for a data-derived length the analysis
                        cannot bound: NAME is the Python variable, or FILE:LINE
                        for the values computed on that line; repeatable. A
                        promise: inputs exceeding it give wrong results
  --padded-outputs      return a bounded output as (padded, count) instead of
                        cutting it to count rows (a host sync); this changes
                        the method's signature (docs/passes.md, bound). A
                        returned dict (torchvision's detections) keeps its
                        type: each padded entry gets its count beside it,
                        d["boxes"] with d["boxes_count"]. A selection of
                        columns (x[:, m]) is padded along its dim
  --static-forms        keep a rewritten method that reaches the host at as many
                        points as the original though it runs more ops (its
                        host reads then sit at the outputs, after a static
                        computation); by default such a method is left as it
                        was. Implied by --padded-outputs, --runtime-ops,
                        --outline, --cuda-graphs and --lower
  --outline             make each static region of a method a method of its own
                        (`forward_region_1`...), called where the region was, so
                        that each can be compiled or captured on its own
  --cuda-graphs         outline the static regions and run each through the
                        runtime's RegionRunner, which captures it into a CUDA
                        graph per input signature on a GPU and runs it plainly
                        on CPU. The output then needs libstaticify_runtime.so:
                        torch.ops.load_library(PATH) before torch.jit.load
  --runtime-ops         where a rewrite has a kernel in the runtime library
                        (padded NMS: staticify::nms_padded, and batched_nms's
                        per-class loop: staticify::nms_kept_mask; CPU and
                        CUDA, no host read), emit it instead of its
                        TorchScript form (the per-class loop has none: it is
                        kept without); ops batched on padded rows (linear,
                        convolutions, roi_align) and writes at a bounded
                        index compute the valid rows only on the CPU
                        (staticify::valid_rows, put_valid_rows); on by default
                        with --cuda-graphs. The
                        output then needs libstaticify_runtime.so, as with
                        --cuda-graphs
  --runtime PATH        the runtime library for --cuda-graphs, --runtime-ops
                        and --lower (default:
                        ../lib/libstaticify_runtime.so next to this program)
  --lower=cpu           after rewriting, compile each method through MLIR and
                        LLVM into a fused CPU kernel for inputs of the types
                        --input-types gives, kept in the output with the
                        method's TorchScript, which runs for any other input
                        (another dtype, rank or device, non-contiguous, sizes
                        the kernel does not take). Needs --input-types; the
                        output needs libstaticify_runtime.so, as with
                        --cuda-graphs. The module's parameters and buffers
                        the method reads are kernel inputs too. A method that
                        does not lower whole (the report names the op) is
                        lowered by its static regions, each typed by one run
                        on inputs of LIST (each ? size 8); what the bridge does
                        not take (a convolution) stays TorchScript between
                        the regions' kernels
  --lower=cuda          the same for CUDA tensors: cubins for sm_80 and sm_90
                        and PTX for newer GPUs (the CUDA toolkit's ptxas is
                        needed: CUDA_HOME, default /usr/local/cuda), with host
                        code that launches on PyTorch's current stream and
                        never synchronizes. The output runs everywhere: on a
                        machine without a GPU or a runtime built without CUDA,
                        the method's TorchScript runs.
  --lower=cpu,cuda      both
  --batch               also add to each static method M a method M_batched
                        whose tensor arguments and results have a leading
                        batch dimension: row b of its results is what M
                        computes on row b of its arguments (each row draws its
                        own random numbers), in one call. Needs --input-types
                        (the rows' ranks); an op with no batched form is named
                        in the report and M_batched is not added
  --input-types LIST    the method's tensor inputs for --lower and --batch,
                        in order:
                        DTYPE[SIZES], DTYPE one of f16 bf16 f32 f64 i8 i16 i32
                        i64 b8, each size a number or ?; e.g. 'f32[?], i64[?]'
  --passes LIST         run this comma-separated pipeline instead of the
                        default; known passes: %PASSES%
  --verbose             with an error, also print libtorch's own message
  --time-passes         print the wall time of loading, of each pass and
                        analysis of each method, and of saving, to stderr
  --help                print this help
  --version             print the version

examples:
  staticify model.pt --report
  staticify model.pt -o model_static.pt --report-json report.json
  staticify detector.pt --report --load-library \
      /usr/lib/python3/dist-packages/torchvision/_C.cpython-311-x86_64-linux-gnu.so
  staticify model.pt --method forward --method sample --report
  staticify detector.pt -o detector_static.pt --inference --padded-outputs
  staticify model.pt -o out.pt --bound num_boxes=300 --padded-outputs
  staticify loss.pt -o loss_cpu.pt --lower=cpu --input-types 'f32[?], i64[?]'
  staticify sampler.pt -o sampler_gpu.pt --lower=cpu,cuda \
      --input-types 'f32[?,16], i64[?]'
  staticify sampler.pt -o sampler_batched.pt --batch \
      --input-types 'f32[?,16], i64[?]'

exit status: 0 on success (findings are not errors), 1 on a bad input or
output, 2 on a bad command line. Outputs (-o, --report-json, --dot) are
written together at the end: a failed run leaves none of them.
)";

namespace {

struct Options {
  std::string input;
  std::string output;
  /// How the user spelled the output option (-o or --output), for messages.
  std::string outputOption = "-o";
  std::string reportJson;
  std::string dot;
  bool report = false;
  ReportDetail reportDetail = ReportDetail::Short;
  bool inference = false;
  bool verbose = false;
  bool timePasses = false;
  bool inlineCalls = true;
  bool outline = false;
  bool cudaGraphs = false;
  bool batch = false;
  bool specializeTraining = false;
  std::vector<std::string> assumeNone;
  std::string lower;
  std::string inputTypes;
  std::string runtime;
  PassOptions passOptions;
  bool passesGiven = false;
  std::vector<std::string> passes;
  std::vector<std::string> methods;
  std::vector<std::string> libraries;
};

std::string usage() {
  // The pass list, wrapped under the option's description column.
  const std::string indent(24, ' ');
  std::string passes, line = "default; known passes:";
  for (const PassInfo &p : registeredPasses()) {
    std::string item = " " + p.name + ",";
    if (indent.size() + line.size() + item.size() > 79) {
      passes += line + "\n" + indent;
      line.clear();
      item.erase(0, 1);
    }
    line += item;
  }
  line.pop_back(); // the last comma
  std::string text = kUsage;
  text.replace(text.find("default; known passes: %PASSES%"), 31, passes + line);
  return text;
}

std::string versionString() {
  return "staticify " STATICIFY_VERSION " (libtorch " +
         std::to_string(compat::kTorchMajor) + "." +
         std::to_string(compat::kTorchMinor) + ")";
}

/// An output option given twice is a mistake, not "the last one wins".
void setOnce(const CommandLine &cl, std::string &slot,
             const std::string &value) {
  if (!slot.empty())
    throw std::invalid_argument(cl.lastOption() + " is given twice ('" + slot +
                                "' and '" + value + "')");
  slot = value;
}

/// `--bound NAME=N`: NAME a Python variable or FILE:LINE, N a non-negative
/// integer; no spaces anywhere (a shell quoting slip is an error, not a
/// different name).
std::pair<std::string, int64_t> parseBound(const std::string &value) {
  size_t eq = value.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == value.size() ||
      value.find_first_of(" \t") != std::string::npos)
    throw std::invalid_argument("--bound needs NAME=N with no spaces, got '" +
                                value + "'");
  std::string digits = value.substr(eq + 1);
  if (digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument("--bound " + value +
                                ": N must be a non-negative integer");
  return {value.substr(0, eq), std::stoll(digits)};
}

/// Returns an exit code to stop with, or -1 to go on.
int parseOptions(const std::vector<std::string> &args, Options &opts,
                 std::ostream &out) {
  CommandLine cl(args);
  std::string value;
  while (!cl.done()) {
    if (cl.flag("--help") || cl.flag("-h")) {
      out << usage();
      return 0;
    }
    if (cl.flag("--version")) {
      out << versionString() << "\n";
      return 0;
    }
    if (cl.option("-o", value) || cl.option("--output", value)) {
      setOnce(cl, opts.output, value);
      opts.outputOption = cl.lastOption();
    } else if (cl.option("--report-json", value)) {
      setOnce(cl, opts.reportJson, value);
    } else if (cl.option("--dot", value)) {
      setOnce(cl, opts.dot, value);
    } else if (cl.flag("--report") || cl.flag("--report=short")) {
      opts.report = true;
    } else if (cl.flag("--report=full")) {
      opts.report = true;
      opts.reportDetail = ReportDetail::Full;
    } else if (cl.current().rfind("--report=", 0) == 0) {
      throw std::invalid_argument("'" + cl.current() +
                                  "': --report takes =full or nothing");
    } else if (cl.flag("--inference")) {
      opts.inference = true;
    } else if (cl.flag("--verbose")) {
      opts.verbose = true;
    } else if (cl.flag("--time-passes")) {
      opts.timePasses = true;
    } else if (cl.flag("--no-inline")) {
      opts.inlineCalls = false;
    } else if (cl.flag("--specialize-training")) {
      opts.specializeTraining = true;
    } else if (cl.option("--assume-none", value)) {
      opts.assumeNone.push_back(value);
    } else if (cl.flag("--drop-data-asserts")) {
      opts.passOptions.dropDataAsserts = true;
    } else if (cl.flag("--static-loops")) {
      opts.passOptions.staticLoops = true;
    } else if (cl.flag("--cuda-graphs")) {
      opts.cudaGraphs = opts.outline = true;
      opts.passOptions.runtimeOps = opts.passOptions.staticLoops = true;
    } else if (cl.flag("--runtime-ops")) {
      opts.passOptions.runtimeOps = true;
    } else if (cl.option("--lower", value)) {
      if (value != "cpu" && value != "cuda" && value != "cpu,cuda" &&
          value != "cuda,cpu")
        throw std::invalid_argument("--lower=" + value +
                                    ": the targets are: cpu, cuda, cpu,cuda");
      setOnce(cl, opts.lower, value);
    } else if (cl.flag("--batch")) {
      opts.batch = true;
    } else if (cl.option("--input-types", value)) {
      setOnce(cl, opts.inputTypes, value);
    } else if (cl.option("--runtime", value)) {
      opts.runtime = value;
    } else if (cl.flag("--outline")) {
      opts.outline = true;
    } else if (cl.flag("--static-forms")) {
      opts.passOptions.keepEqualSyncRewrites = true;
    } else if (cl.flag("--padded-outputs")) {
      opts.passOptions.paddedOutputs = true;
    } else if (cl.option("--bound", value)) {
      opts.passOptions.bounds.push_back(parseBound(value));
    } else if (cl.option("--method", value)) {
      // Each method once, in the order first given.
      if (std::find(opts.methods.begin(), opts.methods.end(), value) ==
          opts.methods.end())
        opts.methods.push_back(value);
    } else if (cl.option("--load-library", value)) {
      opts.libraries.push_back(value);
    } else if (cl.option("--passes", value)) {
      opts.passes = parsePassList(value);
      opts.passesGiven = true;
    } else {
      std::string arg = cl.positional();
      if (!opts.input.empty())
        throw std::invalid_argument("more than one input: '" + opts.input +
                                    "' and '" + arg + "'");
      opts.input = arg;
    }
  }
  if (opts.input.empty())
    throw std::invalid_argument("no input file");
  if (opts.methods.empty())
    opts.methods.push_back("forward");
  if (!opts.passesGiven)
    opts.passes = defaultPipeline(opts.inlineCalls);
  if (!opts.dot.empty() && opts.methods.size() != 1)
    throw std::invalid_argument("--dot draws one method; give --method once");
  if (opts.output.empty() && opts.reportJson.empty() && opts.dot.empty())
    opts.report = true;
  if (!opts.lower.empty() && opts.inputTypes.empty())
    throw std::invalid_argument("--lower=" + opts.lower +
                                " needs --input-types (e.g. 'f32[?], i64[?]')");
  if (!opts.lower.empty() && opts.cudaGraphs)
    throw std::invalid_argument(
        "--lower and --cuda-graphs do not combine yet (the bridge does not "
        "take the region runner's calls); a lowered method is captured by "
        "torch.cuda.graph as it is (docs/lowering.md)");
  if (opts.batch && opts.inputTypes.empty())
    throw std::invalid_argument(
        "--batch needs --input-types (the rows' dtypes and ranks, e.g. "
        "'f32[?,16], i64[?]')");
  if (opts.lower.empty() && !opts.batch && !opts.inputTypes.empty())
    throw std::invalid_argument(
        "--input-types is for --lower and --batch; add --lower=cpu or --batch");
  if (!opts.inputTypes.empty())
    parseSignature(opts.inputTypes); // a bad one is a command-line error
#ifndef STATICIFY_WITH_MLIR
  if (!opts.lower.empty())
    throw std::invalid_argument("--lower needs a staticify built with MLIR (libmlir-22-dev)");
#endif
  return -1;
}

/// Whether each `--bound` key names something in one of the methods.
void checkBoundsMatched(const Options &opts,
                        const std::set<std::string> &matched) {
  for (const auto &[key, bound] : opts.passOptions.bounds)
    if (!matched.count(key))
      throw UserError("--bound " + key + "=" + std::to_string(bound) +
                      " names no variable and no FILE:LINE of the method" +
                      (opts.methods.size() == 1 ? " '" : "s '") +
                      opts.methods.front() +
                      (opts.methods.size() == 1 ? "'" : "'...") +
                      "; use a name or line the report shows");
}

/// Whether a method of \p module calls an op of the runtime library.
bool callsRuntimeOps(const torch::jit::Module &module) {
  for (const torch::jit::Method &method : module.get_methods())
    for (const torch::jit::Node *node : collectNodes(
             torch::jit::toGraphFunction(method.function()).graph()->block()))
      if (std::string(node->kind().toQualString()).rfind("staticify::", 0) == 0)
        return true;
  return false;
}

/// A command-line mistake found once the module is loaded: exit status 2,
/// as for those found before.
class CommandLineError : public std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// --input-types gives one type per argument of each method.
void checkInputTypes(const Options &opts, const torch::jit::Module &module) {
  if (opts.inputTypes.empty())
    return;
  std::vector<TensorSignature> types = parseSignature(opts.inputTypes);
  size_t given = types.size();
  for (const std::string &name : opts.methods) {
    const c10::FunctionSchema &schema =
        module.get_method(name).function().getSchema();
    std::string args;
    size_t taken = 0, required = 0;
    for (const c10::Argument &a : schema.arguments()) {
      if (a.name() == "self")
        continue;
      // A List[Tensor] argument takes list[...], a Tensor one a tensor type.
      bool isList = a.type()->isSubtypeOf(*c10::ListType::ofTensors());
      if (taken < given && isList != types[taken].list &&
          (isList || a.type()->kind() == c10::TypeKind::TensorType))
        throw CommandLineError(
            "--input-types '" + opts.inputTypes + "': input " +
            std::to_string(taken + 1) + " of method '" + name + "' ('" +
            a.name() + "') is " + (isList ? "a List[Tensor]; give it as "
                                            "list[DTYPE[SIZES]]"
                                          : "a Tensor, not a list"));
      args += (taken++ ? ", " : "") + a.name();
      // Arguments after the typed ones may be left out where they have
      // defaults (a detector's `targets=None`): the example run passes those.
      if (!a.default_value())
        required = taken;
    }
    if (given > taken || given < required)
      throw CommandLineError(
          "--input-types '" + opts.inputTypes + "' gives " +
          std::to_string(given) + " input type" + (given == 1 ? "" : "s") +
          ", but method '" + name + "' takes " + std::to_string(taken) +
          (taken ? " (" + args + ")" : std::string()) +
          "; give one type per input (those with defaults may be left out at "
          "the end)");
  }
}

/// The flags that would remove what is left of \p m: those the reasons of
/// its kept findings name and the user did not give, and --inference for an
/// eval-mode module exported without it.
std::vector<std::string> hintsFor(const MethodReport &m, const Options &opts,
                                  const PassOptions &given,
                                  const torch::jit::Module &module) {
  std::vector<std::string> hints;
  if (m.after.syncPoints == 0)
    return hints;
  struct Flag {
    const char *name;
    bool given;
    const char *what;
  };
  const Flag flags[] = {
      {"--padded-outputs", given.paddedOutputs,
       "returns bounded outputs padded, with their counts, instead of cutting "
       "them at the return"},
      {"--drop-data-asserts", given.dropDataAsserts,
       "drops the checks on data that only raise"},
      {"--static-loops", given.staticLoops,
       "runs loops that stop on data on to their bound"},
      {"--bound", false, "bounds a length the analysis cannot bound"},
      {"--runtime-ops", given.runtimeOps,
       "uses the runtime library's kernels (padded NMS)"},
  };
  for (const Flag &flag : flags) {
    if (flag.given)
      continue;
    size_t n = std::count_if(
        m.findings.begin(), m.findings.end(), [&](const Finding &f) {
          return f.action != "rewritten" &&
                 f.reason.find(flag.name) != std::string::npos;
        });
    if (n)
      hints.push_back(std::string(flag.name) + " " + flag.what + " (" +
                      std::to_string(n) + " finding" + (n == 1 ? "" : "s") +
                      " left name it)");
  }
  if (!opts.inference && !module.is_training())
    hints.push_back("--inference specialises this eval-mode module's "
                    "training flags and its Optional arguments that default "
                    "to None, as an inference export does");
  return hints;
}

int run(const Options &opts, std::ostream &out, std::ostream &err) {
  if (!opts.output.empty())
    checkOutputPath(opts.output, opts.input, opts.outputOption);
  if (!opts.reportJson.empty()) {
    checkOutputPath(opts.reportJson, opts.input, "--report-json");
    if (opts.reportJson == opts.output)
      throw UserError(opts.outputOption + " and --report-json both name '" +
                      opts.output + "'; give them different paths");
  }
  if (!opts.dot.empty()) {
    checkOutputPath(opts.dot, opts.input, "--dot");
    if (opts.dot == opts.output || opts.dot == opts.reportJson)
      throw UserError("--dot names '" + opts.dot +
                      "', which another output also names; give it its own "
                      "path");
  }
  PassOptions passOptions = opts.passOptions;
  passOptions.renderDot = !opts.dot.empty();
  std::string dot;
  for (const std::string &lib : opts.libraries)
    loadLibrary(lib);
  std::vector<std::string> notes;
  if (opts.inference && !passOptions.runtimeOps) {
    // The runtime's kernels where the library is there; the TorchScript
    // forms otherwise.
    std::string runtime =
        opts.runtime.empty() ? defaultRuntimeLibrary() : opts.runtime;
    if (!runtime.empty() && access(runtime.c_str(), R_OK) == 0)
      passOptions.runtimeOps = true;
    else
      notes.push_back("--inference: the runtime library is not at '" +
                      runtime +
                      "': padded NMS keeps its TorchScript form (build target "
                      "staticify_runtime, or pass --runtime PATH)");
  }
  if (opts.cudaGraphs || passOptions.runtimeOps || !opts.lower.empty()) {
    std::string runtime =
        opts.runtime.empty() ? defaultRuntimeLibrary() : opts.runtime;
    if (runtime.empty() || access(runtime.c_str(), R_OK) != 0)
      throw UserError(std::string(opts.cudaGraphs ? "--cuda-graphs"
                                  : !opts.lower.empty() ? "--lower"
                                                        : "--runtime-ops") +
                      " needs the staticify runtime library, "
                      "not found at '" +
                      runtime +
                      "'; build it (target staticify_runtime) or "
                      "pass --runtime PATH");
    loadLibrary(runtime, opts.runtime.empty()
                             ? "rebuild it (target staticify_runtime) or pass "
                               "--runtime PATH"
                             : "check the path given to --runtime");
  }
  LoadOptions loadOptions;
  loadOptions.verbose = opts.verbose;
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&start] {
    auto now = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(now - start).count();
    start = now;
    return s;
  };
  LoadedModule loaded = loadModule(opts.input, loadOptions);
  double loadSeconds = elapsed();
  for (const std::string &warning : loaded.warnings)
    err << "staticify: warning: " << printable(warning) << "\n";
  if (opts.inference && loaded.module.is_training())
    throw UserError("--inference: '" + opts.input +
                    "' was saved in training mode; call model.eval() before "
                    "scripting and saving it (or use --specialize-training to "
                    "specialise on the training mode as saved)");

  Report report;
  report.toolVersion = STATICIFY_VERSION;
  report.torchVersion = std::to_string(compat::kTorchMajor) + "." +
                        std::to_string(compat::kTorchMinor);
  report.input = opts.input;
  report.output = opts.output;
  for (const std::string &name : opts.methods)
    if (!loaded.module.find_method(name)) {
      std::string known;
      for (const std::string &m : methodNames(loaded.module))
        known += (known.empty() ? "" : ", ") + m;
      throw UserError("'" + opts.input + "' has no method '" + name + "'; " +
                      (known.empty() ? std::string("it has no methods")
                                     : "its methods are: " + known));
    }
  checkInputTypes(opts, loaded.module);
  StaticifyOptions options;
  options.methods = opts.methods;
  options.passes = opts.passes;
  options.passOptions = passOptions;
  options.passOptions.keepEqualSyncRewrites |=
      opts.outline || opts.cudaGraphs || !opts.lower.empty() ||
      passOptions.paddedOutputs || passOptions.runtimeOps;
  options.outline = opts.outline;
  options.cudaGraphs = opts.cudaGraphs;
  options.specializeTraining = opts.specializeTraining || opts.inference;
  options.assumeNone = opts.assumeNone;
  options.assumeDefaultNone = opts.inference;
  options.lowerTarget = opts.lower;
  options.inputTypes = opts.inputTypes;
  options.batch = opts.batch;
  elapsed();
  StaticifyResult result = staticifyModule(loaded.module, options);
  std::vector<std::pair<std::string, double>> seconds = {{"load", loadSeconds}};
  seconds.insert(seconds.end(), result.seconds.begin(), result.seconds.end());
  seconds.emplace_back("other (module level)",
                       elapsed() - [&] {
                         double sum = 0;
                         for (const auto &step : result.seconds)
                           sum += step.second;
                         return sum;
                       }());
  notes.insert(notes.end(), result.notes.begin(), result.notes.end());
  if (passOptions.runtimeOps && !opts.output.empty() &&
      callsRuntimeOps(loaded.module))
    notes.push_back("the output calls the runtime library's kernels: load it "
                    "with torch.ops.load_library('" +
                    (opts.runtime.empty() ? defaultRuntimeLibrary()
                                          : opts.runtime) +
                    "') before torch.jit.load");
  for (const std::string &note : notes)
    err << "staticify: " << printable(note) << "\n";
  report.methods = std::move(result.methods);
  for (MethodReport &m : report.methods)
    m.hints = hintsFor(m, opts, passOptions, loaded.module);
  dot = result.dot;
  const std::set<std::string> &boundsMatched = result.boundsMatched;
  checkBoundsMatched(opts, boundsMatched);

  // Every output is written to a temporary file, then all are renamed: a
  // failure anywhere leaves none of them.
  std::string json = renderJson(report);
  OutputFiles outputs(opts.verbose);
  if (!opts.reportJson.empty())
    outputs.addText(opts.reportJson, json);
  if (!opts.dot.empty())
    outputs.addText(opts.dot, dot);
  if (!opts.output.empty()) {
    torch::jit::ExtraFilesMap extra = loaded.extraFiles;
    extra["staticify_report.json"] = json;
    outputs.addModule(opts.output, loaded.module, extra);
  }
  outputs.commit();
  seconds.emplace_back("report and save", elapsed());
  if (opts.timePasses) // method names come from the archive: escaped
    err << printable(renderSeconds(seconds, "staticify: time: "),
                           /*keepNewlines=*/true);
  if (opts.report)
    out << renderText(report, opts.reportDetail);
  if (!opts.output.empty() && !opts.report)
    for (const MethodReport &m : report.methods)
      err << "staticify: " << opts.output << ": " << m.name << ": "
          << m.before.syncPoints << " sync point"
          << (m.before.syncPoints == 1 ? "" : "s") << " -> "
          << m.after.syncPoints << " (" << m.before.counts.total()
          << " finding" << (m.before.counts.total() == 1 ? "" : "s")
          << " -> " << m.after.counts.total() << "); graph "
          << (m.after.isStatic() ? "static" : "not static")
          << (m.after.fallbackSyncPoints
                  ? " (" + std::to_string(m.after.fallbackSyncPoints) +
                        " guarded fallback" +
                        (m.after.fallbackSyncPoints == 1 ? "" : "s") +
                        " read the host)"
                  : std::string())
          << "\n";
  return 0;
}

/// Runs \p opts and turns every failure into one line and an exit code.
int runReportingErrors(const Options &opts, std::ostream &out,
                       std::ostream &err) {
  try {
    return run(opts, out, err);
  } catch (const CommandLineError &e) {
    err << "staticify: error: " << printable(e.what())
        << "; see 'staticify --help'\n";
    return 2;
  } catch (const UserError &e) {
    err << "staticify: error: " << printable(e.what()) << "\n";
  } catch (const std::bad_alloc &) {
    err << "staticify: error: out of memory while processing '" << opts.input
        << "'\n";
  } catch (const std::exception &e) {
    // Not a problem we know how to name: libtorch's text only with
    // --verbose, one line always.
    if (opts.verbose)
      err << "staticify: note: "
          << printable(libtorchText(e), /*keepNewlines=*/true) << "\n";
    err << "staticify: error: internal error while processing '" << opts.input
        << "'; please report it with the input (--verbose shows "
           "libtorch's message)\n";
  }
  return 1;
}

} // namespace

int staticify::runCommand(const std::vector<std::string> &args,
                          std::ostream &out, std::ostream &err,
                          bool supervised) {
  Options opts;
  try {
    int code = parseOptions(args, opts, out);
    if (code >= 0)
      return code;
  } catch (const std::invalid_argument &e) {
    err << "staticify: error: " << printable(e.what())
        << "; see 'staticify --help'\n";
    return 2;
  }
  auto work = [&] { return runReportingErrors(opts, out, err); };
  if (!supervised)
    return work();
  return runSupervised(work, opts.input,
                       {opts.output, opts.reportJson, opts.dot});
}
