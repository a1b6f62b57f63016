//===- SpecializeDTypes.cpp - A method versioned on its inputs' dtypes ----===//

#include "passes/SpecializeDTypes.h"

#include "passes/Analysis.h"
#include "passes/GraphUtils.h"
#include "passes/OpInfo.h"
#include "passes/Pipeline.h"
#include "passes/RewritePolicy.h"

#include <algorithm>
#include <unordered_map>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr int64_t kBool = static_cast<int64_t>(c10::ScalarType::Bool);

/// The default pipeline's passes after specialize-dtypes: what a trial
/// runs to see what each version becomes.
std::vector<std::string> passesAfterThis() {
  std::vector<std::string> all = defaultPipeline(/*inlineCalls=*/false);
  auto self = std::find(all.begin(), all.end(), "specialize-dtypes");
  return {self == all.end() ? all.end() : self + 1, all.end()};
}

/// The graph input \p index reads, through ops that keep their input's
/// dtype (views, clone, to(device)); nullptr where it is none.
Value *inputBehind(Value *index, const Graph &graph) {
  for (int depth = 0; depth < 16; ++depth) {
    Node *node = index->node();
    if (node->kind() == c10::prim::Param)
      return node->owningBlock() == graph.block() && isTensor(index) ? index
                                                                      : nullptr;
    const OpInfo *op = opInfo(node);
    if (!op || op->dtype != DTypeRule::KeepsInput || node->inputs().empty() ||
        !isTensor(node->input(0)))
      return nullptr;
    index = node->input(0);
  }
  return nullptr;
}

/// The graph inputs whose dtype would decide an index: given, unknown, to
/// indexing or an indexed store.
std::vector<Value *> inputsDecidingIndices(const Graph &graph,
                                           const AnalysisResult &analysis) {
  std::vector<Value *> inputs;
  for (Node *node : analysis.nodesWhere([](c10::Symbol op) {
         return op == c10::aten::index || op == c10::aten::index_put_ ||
                op == c10::aten::index_put;
       })) {
    Node *list = node->input(1)->node();
    if (list->kind() != c10::prim::ListConstruct)
      continue;
    for (Value *index : list->inputs()) {
      if (index->mustBeNone() ||
          analysis.info(index).dtype != DTypeKind::Unknown)
        continue;
      Value *input = inputBehind(index, graph);
      if (input && std::find(inputs.begin(), inputs.end(), input) == inputs.end())
        inputs.push_back(input);
    }
  }
  return inputs;
}

/// Versions \p graph's body on \p inputs (its own inputs) being bool.
void version(Graph &graph, const std::vector<Value *> &inputs) {
  Block *top = graph.block();
  Node *first = *top->nodes().begin();
  Node *ret = top->return_node();
  Value *test = nullptr;
  {
    torch::jit::WithInsertPoint at(first);
    for (Value *input : inputs) {
      Value *isBool =
          emit(graph, "aten::eq",
               {emit(graph, "prim::dtype", {input}, first), kBool}, first);
      test = test ? emit(graph, "aten::__and__", {test, isBool}, first)
                  : isBool;
    }
  }
  Node *ifNode = graph.create(c10::prim::If, {test}, 0);
  ifNode->insertBefore(first);
  ifNode->i_(guardAttr(), 1);
  ifNode->i_(specializedAttr(), 1);
  Block *then = ifNode->addBlock();
  Block *otherwise = ifNode->addBlock();
  // The original body becomes the fallback, as it is.
  for (Node *node = first; node != ret;) {
    Node *next = node->next();
    node->moveBefore(otherwise->return_node());
    node = next;
  }
  for (Value *out : ret->inputs())
    otherwise->registerOutput(out);
  // The specialized body: a copy reading each input as a bool tensor.
  std::unordered_map<Value *, Value *> env;
  {
    torch::jit::WithInsertPoint at(then->return_node());
    for (Value *input : inputs)
      env[input] = emit(graph, "aten::to", {input, kBool, false, false},
                        otherwise->nodes().front());
  }
  auto lookup = [&](Value *v) {
    auto it = env.find(v);
    return it == env.end() ? v : it->second;
  };
  for (Node *node : otherwise->nodes()) {
    Node *copy = graph.createClone(node, lookup);
    then->appendNode(copy);
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      copy->output(i)->copyMetadata(node->output(i));
      env[node->output(i)] = copy->output(i);
    }
  }
  for (size_t i = 0; i < ret->inputs().size(); ++i) {
    Value *out = ret->input(i);
    then->registerOutput(lookup(out));
    Value *result = ifNode->addOutput()->setType(out->type());
    ret->replaceInput(i, result);
  }
}

} // namespace

bool specializeDTypes(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  // A padded output changes the method's results' types in one version.
  if (ctx.options.paddedOutputs)
    return false;
  if (graph->block()->nodes().begin() == graph->block()->nodes().end())
    return false;
  std::vector<Value *> inputs =
      inputsDecidingIndices(*graph, ctx.facts.analysis(graph));
  if (inputs.empty())
    return false;
  // The copy is kept only where the rewrites then reach the host at fewer
  // points than they do on the method as it is: both tried.
  const std::vector<std::string> after = passesAfterThis();
  auto cost = [&](bool versioned) {
    RewriteTrial trial(*graph, ctx);
    if (versioned) {
      std::vector<Value *> theirs;
      for (Value *input : inputs)
        theirs.push_back(trial.counterpart(input));
      version(*trial.graph(), theirs);
    }
    trial.runPasses(after);
    return trial.cost().syncPoints;
  };
  if (cost(true) >= cost(false))
    return false;
  version(*graph, inputs);
  return true;
}

} // namespace staticify
