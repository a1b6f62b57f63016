//===- staticify-opt.cpp - Run passes on textual TorchScript IR
//------------===//
//
// The driver of the lit tests: reads IR in the format torch::jit::parseIR
// accepts, runs each --pass=NAME in order, prints the graph (or, with
// --analyze, the analysis findings).
//
//===----------------------------------------------------------------------===//

#include "passes/IRSource.h"
#include "passes/Pipeline.h"
#include "passes/Report.h"
#include "tools/CommandLine.h"

#include <dlfcn.h>

#ifdef STATICIFY_WITH_MLIR
#include "lower/CpuTarget.h"
#include "lower/TorchToMlir.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#endif

#include <fstream>
#include <iostream>
#include <sstream>

using namespace staticify;

static const char *const kUsage =
    R"(usage: staticify-opt [--pass=NAME]... [--verify-each] [--analyze [--print-graph]] INPUT.ir|-

Runs staticify passes on textual TorchScript IR (the format of
torch::jit::parseIR) and prints the resulting graph.

options:
  --pass NAME      run pass NAME; repeatable, runs in the order given
  --analyze        print the report instead of the graph: the findings before
                   the passes, what each rule rewrote or declined and why, and
                   the summary after them (as staticify --report does)
  --print-graph    with --analyze, print the graph too (after the findings)
  --print-classes  with --analyze, print every value's class, shape
                   dependence and dtype, and `on-host` for a tensor the
                   analysis knows lives on the host
                   (`%x: data-dependent leading long`)
  --report-json F  with --analyze, also write the report as JSON to F
  --verify-each    after every pass, lint the graph and check that a pass
                   that reports no change left it as it was (every lit test)
  --time-passes    print the wall time of each pass and analysis to stderr
  --load-library P dlopen() a custom-op library the IR uses (torchvision's
                   _C.so for torchvision::nms); repeatable
  --runtime-ops    bound emits the runtime library's kernels where it has
                   one (staticify::nms_padded); load that library first
  --static-loops   lift-scalars runs a loop that stops on data on to its
                   bound with an active mask
  --as-staticify   after the passes, what staticify does: equal ops the
                   rewrites emitted merged (reads of one count included),
                   and a method that reaches the host as often as before
                   and runs more ops left as it was (by default
                   staticify-opt shows what the passes wrote, as
                   staticify --static-forms keeps it)
  --padded-outputs bound returns a bounded output padded, with its count
                   (as staticify --padded-outputs)
  --drop-data-asserts
                   drop-data-asserts removes the asserts on tensor data
                   (as staticify --drop-data-asserts)
  --saved-training=true|false
                   what specialize-training takes every module's saved
                   `training` flag to be (IR carries no module)
  --assume-none N  what the assume-none pass takes to be None: the graph
                   input N (its name without the numeric suffix); repeatable
  --emit-mlir SIG  after the passes, print the MLIR functions the bridge builds
                   for inputs of signature SIG ('f32[?], i64[?]', as staticify's
                   --input-types): the shape function and the kernel, on
                   tensors, before the CPU pipeline; or "not lowered: WHY" on
                   stderr and exit 1 (needs a build with MLIR)
  --emit-for-cuda  with --emit-mlir: what the bridge builds for a CUDA kernel
                   (x.is_cuda is true; no host read of a tensor's values)
  --help           print this help
)";

static const char *className(ValueClass c) {
  switch (c) {
  case ValueClass::HostStatic:
    return "host-static";
  case ValueClass::DeviceData:
    return "device-data";
  case ValueClass::DataDependent:
    return "data-dependent";
  }
  return "?";
}

static const char *shapeName(ShapeDep s) {
  switch (s) {
  case ShapeDep::Static:
    return "static";
  case ShapeDep::Leading:
    return "leading";
  case ShapeDep::Dynamic:
    return "dynamic";
  }
  return "?";
}

static const char *dtypeName(DTypeKind d) {
  switch (d) {
  case DTypeKind::Unknown:
    return "unknown";
  case DTypeKind::Bool:
    return "bool";
  case DTypeKind::Byte:
    return "uint8";
  case DTypeKind::Long:
    return "long";
  case DTypeKind::Other:
    return "other";
  case DTypeKind::Numeric:
    return "numeric";
  }
  return "?";
}

/// One line per value defined in \p block, in program order.
static void printValueClasses(std::ostream &os, const torch::jit::Block &block,
                              const AnalysisResult &analysis) {
  auto print = [&](const torch::jit::Value *v) {
    const ValueInfo &vi = analysis.info(v);
    os << "%" << v->debugName() << ": " << className(vi.cls);
    if (v->type()->kind() == c10::TypeKind::TensorType)
      os << " " << shapeName(vi.shape) << " " << dtypeName(vi.dtype);
    if (vi.onHost)
      os << " on-host";
    os << "\n";
  };
  for (const torch::jit::Value *in : block.inputs())
    print(in);
  for (const torch::jit::Node *node : block.nodes()) {
    for (const torch::jit::Value *out : node->outputs())
      print(out);
    for (const torch::jit::Block *b : node->blocks())
      printValueClasses(os, *b, analysis);
  }
}

/// --emit-mlir: the bridge's functions for \p graph, printed.
static int emitFunctions(torch::jit::Graph &graph, const std::string &signature,
                         bool cuda) {
#ifdef STATICIFY_WITH_MLIR
  mlir::DialectRegistry registry;
  lower::registerLoweringDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(mlir::UnknownLoc::get(&ctx));
  bool hasSelf = !graph.inputs().empty() &&
                 graph.inputs()[0]->type()->kind() == c10::TypeKind::ClassType;
  lower::BridgeResult result = lower::buildFunctions(graph, hasSelf,
                                                     lower::parseSignature(signature), "graph",
                                                     *module,
                                                     cuda ? lower::KernelDevice::Cuda
                                                          : lower::KernelDevice::Cpu);
  if (!result.unsupported.empty()) {
    std::cerr << "staticify-opt: not lowered: " << result.unsupported << "\n";
    return 1;
  }
  if (mlir::failed(mlir::verify(*module))) {
    std::cerr << "staticify-opt: error: the bridge built invalid MLIR\n";
    module->print(llvm::errs());
    return 1;
  }
  module->print(llvm::outs());
  llvm::outs().flush();
  return 0;
#else
  std::cerr << "staticify-opt: error: --emit-mlir needs a build with MLIR\n";
  return 1;
#endif
}

int main(int argc, char **argv) {
  std::vector<std::string> passes;
  std::string input, reportJson, emitMlir;
  bool emitForCuda = false;
  bool analyze = false, printGraph = false, printClasses = false,
       timePasses = false;
  PassOptions options;
  // The passes' own output, by default: what they rewrote stays even where
  // the method then reaches the host as often and runs more ops, and equal
  // ops they emitted stay apart.
  options.keepEqualSyncRewrites = true;
  options.mergeAfterRewrites = false;
  try {
    CommandLine cl(argc, argv);
    std::string value;
    while (!cl.done()) {
      if (cl.flag("--help") || cl.flag("-h")) {
        std::cout << kUsage;
        return 0;
      }
      if (cl.flag("--analyze"))
        analyze = true;
      else if (cl.flag("--verify-each"))
        options.verifyEach = true;
      else if (cl.flag("--time-passes"))
        timePasses = true;
      else if (cl.flag("--runtime-ops"))
        options.runtimeOps = true;
      else if (cl.flag("--static-loops"))
        options.staticLoops = true;
      else if (cl.flag("--padded-outputs"))
        options.paddedOutputs = true;
      else if (cl.flag("--drop-data-asserts"))
        options.dropDataAsserts = true;
      else if (cl.flag("--as-staticify")) {
        options.keepEqualSyncRewrites = false;
        options.mergeAfterRewrites = true;
      }
      else if (cl.flag("--print-graph"))
        printGraph = true;
      else if (cl.flag("--print-classes"))
        printClasses = true;
      else if (cl.option("--report-json", reportJson))
        continue;
      else if (cl.flag("--emit-for-cuda"))
        emitForCuda = true;
      else if (cl.option("--emit-mlir", emitMlir))
        continue;
      else if (cl.option("--saved-training", value)) {
        if (value != "true" && value != "false")
          throw std::invalid_argument("--saved-training takes true or false");
        bool training = value == "true";
        options.savedTraining = [training](const std::vector<std::string> &) {
          return std::optional<bool>(training);
        };
      }
      else if (cl.option("--assume-none", value))
        options.assumeNone.push_back(value);
      else if (cl.option("--load-library", value)) {
        // A custom-op library the IR names (torchvision's, for its nms).
        if (!dlopen(value.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
          std::cerr << "staticify-opt: error: cannot load library '" << value
                    << "': " << dlerror() << "\n";
          return 1;
        }
      } else if (cl.option("--pass", value)) {
        for (std::string &p : parsePassList(value))
          passes.push_back(p);
      } else
        input = cl.positional();
    }
    if (input.empty())
      throw std::invalid_argument("no input file");
  } catch (const std::invalid_argument &e) {
    std::cerr << "staticify-opt: error: " << e.what()
              << "; see 'staticify-opt --help'\n";
    return 2;
  }

  std::stringstream text;
  if (input == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(input);
    if (!in) {
      std::cerr << "staticify-opt: error: cannot open '" << input << "'\n";
      return 1;
    }
    text << in.rdbuf();
  }

  try {
    auto graph =
        parseIRWithLocations(text.str(), input == "-" ? "<stdin>" : input);
    // The pipeline driver, as staticify runs it: the report then says what
    // each rule rewrote and why it declined the rest.
    PipelineResult result = runPipeline(graph, "graph", passes, options);
    if (timePasses)
      std::cerr << renderSeconds(result.seconds, "");
    if (!emitMlir.empty())
      return emitFunctions(*graph, emitMlir, emitForCuda);
    if (!analyze) {
      graph->print(std::cout, /*print_source_locations=*/false);
      return 0;
    }
    Report report;
    report.toolVersion = STATICIFY_VERSION;
    report.input = input;
    report.methods.push_back(std::move(result.report));
    std::cout << renderText(report);
    if (printClasses)
      printValueClasses(std::cout, *graph->block(), analyzeGraph(*graph));
    if (printGraph)
      graph->print(std::cout, /*print_source_locations=*/false);
    if (!reportJson.empty())
      std::ofstream(reportJson) << renderJson(report);
  } catch (const std::exception &e) {
    // parseIR's messages start with a blank line and end with a backtrace.
    std::string what = e.what();
    size_t start = what.find_first_not_of("\n ");
    what = start == std::string::npos ? "invalid IR" : what.substr(start);
    std::cerr << "staticify-opt: error: " << input << ": "
              << what.substr(0, what.find('\n')) << "\n";
    return 1;
  }
  return 0;
}
