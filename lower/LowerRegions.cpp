//===- LowerRegions.cpp - A method's static regions, lowered one by one --===//
#include "lower/LowerRegions.h"

#include "passes/Analysis.h"
#include "passes/GraphUtils.h"
#include "passes/ModuleAttributes.h"
#include "passes/Outline.h"
#include "passes/Partition.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/remove_mutation.h>
#include <torch/csrc/jit/passes/lower_tuples.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace staticify::lower {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// The dtype and rank of each region's inputs the first time it ran in one
/// run of \p graph (the method, calling its regions, in loops too) on
/// \p inputs, by region method; a region with an input other than a tensor,
/// or that did not run, has none. Each input is appended to a list made at
/// the start of the run, returned after the method's results.
std::map<std::string, std::vector<TensorSignature>>
regionSignatures(torch::jit::Module &module, Graph &graph,
                 const std::set<std::string> &regions,
                 const std::vector<c10::IValue> &inputs, std::string &why) {
  std::shared_ptr<Graph> run = graph.copy();
  std::vector<Value *> results(run->outputs().begin(), run->outputs().end());
  std::vector<Node *> calls;
  for (Node *n : collectNodes(run->block()))
    if (n->kind() == c10::prim::CallMethod &&
        regions.count(n->s(c10::attr::name)))
      calls.push_back(n);
  std::vector<std::pair<std::string, size_t>> recorded; // name, inputs
  for (Node *call : calls) {
    bool tensors = true;
    for (size_t i = 1; i < call->inputs().size(); ++i)
      tensors = tensors &&
                call->input(i)->type()->kind() == c10::TypeKind::TensorType;
    if (!tensors)
      continue;
    recorded.emplace_back(call->s(c10::attr::name), call->inputs().size() - 1);
    for (size_t i = 1; i < call->inputs().size(); ++i) {
      Value *list;
      {
        torch::jit::WithInsertPoint atStart(run->block()->nodes().front());
        list = run->insertNode(run->createList(c10::TensorType::get(), {}))
                   ->output();
      }
      torch::jit::WithInsertPoint beforeCall(call);
      run->insert(c10::aten::append, {list, call->input(i)});
      results.push_back(list);
    }
  }
  size_t first = run->outputs().size();
  while (!run->outputs().empty())
    run->eraseOutput(0);
  {
    torch::jit::WithInsertPoint guard(run->return_node());
    run->registerOutput(run->insertNode(run->createTuple(results))->output());
  }
  torch::jit::GraphFunction fn("staticify_example_run", run, nullptr);
  std::vector<c10::IValue> stack{module._ivalue()};
  stack.insert(stack.end(), inputs.begin(), inputs.end());
  c10::IValue result;
  try {
    torch::NoGradGuard noGrad;
    result = fn(stack);
  } catch (const std::exception &e) {
    // TorchScript's message ends with the error itself.
    std::string what = e.what(), last;
    std::istringstream lines(what);
    for (std::string line; std::getline(lines, line);)
      if (line.find_first_not_of(" \t") != std::string::npos)
        last = line.substr(line.find_first_not_of(" \t"));
    why = "the example run (each ? size 8) raised: " + last;
    return {};
  }
  const auto &values = result.toTupleRef().elements();
  std::map<std::string, std::vector<TensorSignature>> out;
  size_t at = first;
  for (const auto &[name, count] : recorded) {
    std::vector<TensorSignature> sig;
    for (size_t i = 0; i < count; ++i, ++at) {
      c10::List<at::Tensor> seen = values[at].toTensorList();
      if (!seen.empty())
        sig.push_back({seen.get(0).scalar_type(),
                       std::vector<int64_t>(seen.get(0).dim(), -1)});
    }
    if (sig.size() == count)
      out[name] = sig;
  }
  return out;
}

/// Moves the top-level reads of the module's attributes (chains of
/// prim::GetAttr from `self`) to the start of \p graph, where nothing in it
/// writes an attribute: they read the same values there.
void hoistAttributeReads(Graph &graph) {
  if (writesAttributes(graph.block()))
    return;
  std::vector<Node *> reads;
  for (Node *n : graph.nodes())
    if (n->kind() == c10::prim::GetAttr &&
        (n->input(0) == graph.inputs()[0] ||
         n->input(0)->node()->kind() == c10::prim::GetAttr))
      reads.push_back(n);
  Node *after = nullptr;
  for (Node *n : reads) {
    if (after)
      n->moveAfter(after);
    else
      n->moveBefore(graph.block()->nodes().front());
    after = n;
  }
}

/// Whether the bridge lowers \p node and what is nested in it (a read of
/// the module is a kernel input: ModuleAttributes.h).
bool bridgeTakes(Node *node, const std::set<std::string> &ops) {
  if (node->kind() != c10::prim::GetAttr && !ops.count(loweringKey(node)))
    return false;
  // The bridge unrolls a loop whose trip count it knows when compiling: a
  // constant, or one from a shape (a rank, a list of sizes' length); a loop
  // over a list's elements (the detectors' per-image loops) is cut, and its
  // body's runs are regions of their own (nestedRuns).
  if (node->kind() == c10::prim::Loop) {
    Node *trip = node->input(0)->node();
    bool fromShape =
        trip->kind() == c10::prim::Constant || trip->kind() == c10::aten::dim ||
        (trip->kind() == c10::aten::len &&
         trip->input(0)->node()->kind() == c10::aten::size);
    if (!fromShape)
      return false;
  }
  for (torch::jit::Block *b : node->blocks())
    for (Node *n : b->nodes())
      if (!bridgeTakes(n, ops))
        return false;
  return true;
}

/// \p partition with each static region cut where an op the bridge does
/// not take is (a convolution, say): that op stays TorchScript between the
/// kernels of the pieces around it.
PartitionResult cutAtUnlowered(Graph &graph, const PartitionResult &partition,
                               const std::set<std::string> &ops) {
  PartitionResult out;
  std::vector<std::pair<const Node *, size_t>> index;
  std::optional<size_t> open, last; // the static piece, the last segment
  size_t statics = 0, islands = 0;
  for (Node *n : graph.nodes()) {
    std::optional<size_t> seg = partition.segmentOf.find(n);
    if (!seg)
      continue; // a constant: copied into the regions that use it
    // (A top-level read of the module, hoisted first, is a region's input.)
    bool isStatic =
        partition.segments[*seg].kind == Segment::Kind::StaticRegion &&
        n->kind() != c10::prim::GetAttr && bridgeTakes(n, ops);
    if (isStatic && (!open || last != seg)) {
      Segment piece;
      piece.number = ++statics;
      out.segments.push_back(piece);
      open = out.segments.size() - 1;
    } else if (!isStatic) {
      Segment island;
      island.kind = Segment::Kind::DynamicIsland;
      island.number = ++islands;
      out.segments.push_back(island);
      open.reset();
    }
    size_t at = isStatic ? *open : out.segments.size() - 1;
    out.segments[at].numNodes += countNodes(n);
    index.emplace_back(n, at);
    last = seg;
  }
  out.segmentOf = NodeIndex(std::move(index));
  return out;
}

/// Whether \p node computes only host-static values (nothing nested in it
/// depends on data).
bool staticNode(Node *node, const AnalysisResult &analysis) {
  for (Value *v : node->outputs())
    if (analysis.info(v).isDataDependent())
      return false;
  for (torch::jit::Block *b : node->blocks())
    for (Node *n : b->nodes())
      if (!staticNode(n, analysis))
        return false;
  return true;
}

/// Inside the blocks of \p node (a loop or branch left out of the regions:
/// the detectors' per-image loops), the runs of static nodes the bridge
/// takes, of \p minNodes or more, by block.
void nestedRuns(Node *node, const AnalysisResult &analysis,
                const std::set<std::string> &ops, size_t minNodes,
                std::vector<std::pair<torch::jit::Block *, std::vector<Node *>>> &out) {
  for (torch::jit::Block *block : node->blocks()) {
    std::vector<Node *> run;
    size_t size = 0;
    auto close = [&] {
      if (size >= minNodes)
        out.emplace_back(block, run);
      run.clear();
      size = 0;
    };
    for (Node *n : block->nodes()) {
      if (n->kind() == c10::prim::Constant)
        continue;
      // No kernel takes a list or writes one: a list's element read, or an
      // append to it, stays between the regions.
      bool lists = false;
      for (Value *v : n->inputs())
        if (auto list = v->type()->cast<c10::ListType>())
          lists = lists || !list->getElementType()->isSubtypeOf(
                               *c10::NumberType::get());
      const c10::FunctionSchema *schema = n->maybeSchema();
      bool writes = schema && schema->is_mutable();
      if (n->kind() != c10::prim::GetAttr && !lists && !writes &&
          bridgeTakes(n, ops) && staticNode(n, analysis)) {
        run.push_back(n);
        size += countNodes(n);
        continue;
      }
      close();
      if (!n->blocks().empty())
        nestedRuns(n, analysis, ops, minNodes, out);
    }
    close();
  }
}

/// The region's nodes back where its call is, and its method removed.
void putBack(torch::jit::Module &module, Graph &graph, const OutlinedRegion &r,
             Graph &body) {
  {
    torch::jit::WithInsertPoint guard(r.call);
    std::vector<Value *> args(r.call->inputs().begin(), r.call->inputs().end());
    std::vector<Value *> outs =
        torch::jit::insertGraph(graph, body, args);
    r.call->output()->replaceAllUsesWith(outs.at(0));
  }
  r.call->destroy();
  module.type()->unsafeRemoveMethod(r.method);
  module.type()->compilation_unit()->unsafeRemoveMethod(
      c10::QualifiedName(*module.type()->name(), r.method));
}

} // namespace

std::vector<RegionLowering>
lowerRegions(torch::jit::Module &module, const std::string &method,
             const std::vector<TensorSignature> &signature,
             const LoweringTargets &targets, std::string &why) {
  std::shared_ptr<Graph> graph =
      torch::jit::toGraphFunction(module.get_method(method).function())
          .graph();
  std::shared_ptr<Graph> before = graph->copy(); // kept if none lowers
  // The regions see through calls (as the bridge does), and the module's
  // attributes are read first: a region takes them as inputs (a region of
  // reads alone would copy the weights).
  torch::jit::Inline(*graph);
  // The bridge's values are SSA tensors: an in-place op on a tensor nothing
  // else sees (a form's own ranks) becomes its functional twin.
  torch::jit::RemoveTensorMutation(graph);
  hoistAttributeReads(*graph);
  AnalysisResult analysis = analyzeGraph(*graph, Detail::Facts);
  std::vector<std::string> lowered = loweredOperators();
  std::set<std::string> ops(lowered.begin(), lowered.end());
  PartitionResult partition =
      cutAtUnlowered(*graph, partitionGraph(*graph, analysis), ops);
  // Runs inside the loops and branches that are no region's (collected
  // before the regions are outlined: these nodes stay where they are).
  std::vector<std::pair<torch::jit::Block *, std::vector<Node *>>> nested;
  for (Node *n : graph->nodes()) {
    std::optional<size_t> seg = partition.segmentOf.find(n);
    if (seg && !n->blocks().empty() &&
        partition.segments[*seg].kind != Segment::Kind::StaticRegion)
      nestedRuns(n, analysis, ops, 3, nested);
  }
  std::vector<OutlinedRegion> regions =
      outlineRegions(module, method, *graph, partition);
  size_t number = partition.segments.size();
  for (auto &[block, run] : nested) {
    ++number; // its name and its number agree
    if (auto r = outlineNodes(module, *graph, block, run,
                              method + "_region_" + std::to_string(number),
                              number))
      regions.push_back(std::move(*r));
  }
  if (regions.empty()) {
    why = "no static region of three ops or more";
    replaceGraphContents(*graph, *before);
    return {};
  }
  std::set<std::string> names;
  std::map<std::string, std::shared_ptr<Graph>> bodies; // before lowering
  for (const OutlinedRegion &r : regions) {
    names.insert(r.method);
    bodies[r.method] = r.graph->copy();
  }
  // Arguments past the typed ones take their defaults.
  std::vector<c10::IValue> example = exampleInputs(signature);
  const auto &arguments = module.get_method(method).function().getSchema().arguments();
  for (size_t i = example.size() + 1; i < arguments.size(); ++i)
    example.push_back(arguments[i].default_value().value_or(c10::IValue()));
  auto typed = regionSignatures(module, *graph, names, example, why);
  std::vector<RegionLowering> out;
  for (const OutlinedRegion &r : regions) {
    RegionLowering &rl = out.emplace_back();
    rl.region = r.region;
    auto sig = typed.find(r.method);
    if (sig == typed.end()) {
      rl.outcome.reason =
          why.empty() ? "an input is not a tensor, or the example run did "
                        "not reach it"
                      : why;
    } else {
      rl.outcome = lowerMethod(module, r.method, sig->second, targets);
    }
    if (rl.outcome.lowered)
      rl.method = r.method;
    else
      putBack(module, *graph, r, *bodies.at(r.method));
  }
  if (std::none_of(out.begin(), out.end(),
                   [](const RegionLowering &r) { return r.outcome.lowered; }))
    replaceGraphContents(*graph, *before);
  else
    torch::jit::LowerSimpleTuples(graph);
  return out;
}

} // namespace staticify::lower
