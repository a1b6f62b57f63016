//===- AnalysisScaling.cpp - Analysis time against graph size
//--------------===//
//
// Generates graphs of about 1k, 10k and 100k nodes (elementwise chains with a
// dynamic island every 20 steps: nonzero, a size read, a branch on it, and a
// full reduction that makes the result static again, as in real models) and
// times the dynamism analysis, the normalize pass and the whole default
// pipeline (every rewrite, both analyses) on each. Reports the
// median of several runs and the time per node: linear scaling shows as a flat
// ns/node column. Not a test: no assertion on time.
//
//===----------------------------------------------------------------------===//

#include "passes/Analysis.h"
#include "passes/GraphUtils.h"
#include "passes/Pipeline.h"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace staticify;
using torch::jit::Graph;
using torch::jit::Value;

namespace {

/// About \p targetNodes nodes, every one with a schema.
std::shared_ptr<Graph> makeGraph(size_t targetNodes) {
  auto graph = std::make_shared<Graph>();
  Value *x = graph->addInput("x")->setType(c10::TensorType::get());
  Value *zero = graph->insertConstant(0);
  Value *five = graph->insertConstant(5);
  static const c10::Symbol numel = c10::Symbol::fromQualString("aten::numel");
  size_t nodes = 2;
  for (size_t step = 0; nodes < targetNodes; ++step) {
    nodes += 5;
    Value *m = graph->insert(c10::aten::gt, {x, zero});
    Value *y = graph->insert(c10::aten::mul, {x, x});
    Value *z = graph->insert(c10::aten::add, {y, x});
    Value *w = graph->insert(c10::aten::where, {m, z, y});
    if (step % 20 == 0) {
      Value *idx = graph->insert(c10::aten::nonzero, {m});
      Value *n = graph->insert(numel, {idx});
      Value *c = graph->insert(c10::aten::lt, {n, five});
      torch::jit::Node *branch = graph->create(c10::prim::If, {c}, 1);
      graph->insertNode(branch);
      branch->output()->setType(c10::TensorType::get());
      for (int b = 0; b < 2; ++b) {
        torch::jit::Block *block = branch->addBlock();
        torch::jit::WithInsertPoint guard(block);
        Value *r = graph->insert(b ? c10::aten::relu : c10::aten::neg, {w});
        block->registerOutput(r);
      }
      // A dynamic island that ends in a full reduction, static again.
      Value *s = graph->insert(c10::aten::sum, {branch->output()});
      w = graph->insert(c10::aten::add, {w, s});
      nodes += 8;
    }
    x = graph->insert(c10::aten::sigmoid, {w});
  }
  graph->registerOutput(x);
  return graph;
}

/// The median time of \p f over \p runs runs, each on a fresh copy of
/// \p graph (if any) made and destroyed outside the timed part: the passes
/// run on the graph the loader made, which staticify does not copy.
template <typename F>
double medianSeconds(int runs, const std::shared_ptr<Graph> &graph, F &&f) {
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    std::shared_ptr<Graph> copy = graph ? graph->copy() : nullptr;
    auto start = std::chrono::steady_clock::now();
    f(copy);
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  // Usage: staticify-bench-analysis [RUNS] [--breakdown] [--nodes N]
  // `--breakdown`: each step of the pipeline's last run, on stderr;
  // `--nodes N`: one graph of about N nodes instead of the three sizes.
  int runs = 5;
  bool breakdown = false;
  std::vector<size_t> targets = {1000, 10000, 100000};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--breakdown")
      breakdown = true;
    else if (arg == "--nodes" && i + 1 < argc)
      targets = {static_cast<size_t>(std::atol(argv[++i]))};
    else if (std::atoi(arg.c_str()) > 0)
      runs = std::atoi(arg.c_str());
    else {
      std::fprintf(stderr,
                   "usage: staticify-bench-analysis [RUNS] [--breakdown] "
                   "[--nodes N]\n");
      return 2;
    }
  }
  std::printf("%-8s %9s %12s %10s %14s %10s %13s %10s %15s\n", "nodes",
              "findings", "analysis_ms", "ns/node", "normalize_ms", "ns/node",
              "pipeline_ms", "ns/node", "fresh_analysis");
  for (size_t target : targets) {
    auto graph = makeGraph(target);
    size_t nodes = countNodes(graph->block());
    size_t findings = 0;
    // The analysis does not change the graph: no copy. Timed again and
    // again on one graph, it finds the graph in cache; the pipeline runs on
    // a fresh copy each time. The analysis of a fresh copy, on the same
    // terms as the pipeline, is the last column.
    double analysis = medianSeconds(runs, nullptr, [&](auto &) {
      findings = analyzeGraph(*graph).findings.size();
    });
    double freshAnalysis = medianSeconds(
        runs, graph, [&](auto &g) { analyzeGraph(*g); });
    double normalize = medianSeconds(runs, graph, [&](auto &g) {
      PassContext ctx;
      findPass("normalize")->run(g, ctx);
    });
    // The whole default pipeline, every rewrite included, with its two
    // analyses: what `staticify` spends between loading and saving.
    std::vector<std::pair<std::string, double>> steps;
    double pipeline = medianSeconds(runs, graph, [&](auto &g) {
      steps = runPipeline(g, "bench", defaultPipeline(false), {}, graph.get())
                  .seconds;
    });
    if (breakdown)
      for (const auto &[step, seconds] : steps)
        std::fprintf(stderr, "%8zu %10.2f ms  %s\n", nodes, seconds * 1e3,
                     step.c_str());
    std::printf("%-8zu %9zu %12.2f %10.0f %14.2f %10.0f %13.2f %10.0f %15.2f\n",
                nodes, findings, analysis * 1e3, analysis * 1e9 / nodes,
                normalize * 1e3, normalize * 1e9 / nodes, pipeline * 1e3,
                pipeline * 1e9 / nodes, freshAnalysis * 1e3);
  }
  return 0;
}
