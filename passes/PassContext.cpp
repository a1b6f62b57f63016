//===- PassContext.cpp - What passes share: cached facts, aliases, report -===//
//
// The fact cache (one analysis and one alias view per graph state), the
// alias queries the rules ask, and what a pass tells the report (rewrote,
// declined, and why).
//
//===----------------------------------------------------------------------===//

#include "passes/PassContext.h"

#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"

#include <torch/csrc/jit/runtime/operator.h>

#include <functional>
#include <memory>
#include <optional>
#include <unordered_set>
#include <string>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

void FactCache::check(const Graph *graph) {
  if (graph != graph_) {
    invalidate();
    graph_ = graph;
  }
}

const AnalysisResult &FactCache::analysis(const std::shared_ptr<Graph> &graph) {
  return *sharedAnalysis(graph);
}

std::shared_ptr<const AnalysisResult>
FactCache::sharedAnalysis(const std::shared_ptr<Graph> &graph, Detail detail) {
  check(graph.get());
  if (!analysis_) {
    analysis_ =
        std::make_shared<const AnalysisResult>(analyzeGraph(*graph, detail));
  } else if (detail == Detail::Report && analysis_->detail != Detail::Report) {
    // The same facts, with what a report shows of each finding: filled in
    // place when nothing else holds them, on a copy otherwise.
    std::shared_ptr<AnalysisResult> raised =
        analysis_.use_count() == 1
            ? std::const_pointer_cast<AnalysisResult>(analysis_)
            : std::make_shared<AnalysisResult>(*analysis_);
    addReportDetail(*raised);
    analysis_ = std::move(raised);
  }
  return analysis_;
}

static bool anyWriterIn(const torch::jit::Block *block) {
  for (const Node *node : block->nodes()) {
    if (Aliases::mayWrite(node))
      return true;
    for (const torch::jit::Block *b : node->blocks())
      if (anyWriterIn(b))
        return true;
  }
  return false;
}

bool Aliases::mayWrite(const Node *node) {
  if (node->maybeSchema()) {
    if (node->getOperator().aliasAnalysisKind() ==
        c10::AliasAnalysisKind::CONSERVATIVE)
      return true; // modelled as writing to every input
    return writesAnything(node);
  }
  // Nodes without a schema: the structural ones libtorch models as creating
  // or forwarding values; anything else (prim::SetAttr, calls, Python ops,
  // fork) may write.
  switch (node->kind()) {
  case c10::prim::Constant:
  case c10::prim::ListConstruct:
  case c10::prim::ListUnpack:
  case c10::prim::TupleConstruct:
  case c10::prim::TupleUnpack:
  case c10::prim::TupleIndex:
  case c10::prim::DictConstruct:
  case c10::prim::GetAttr:
  case c10::prim::Uninitialized:
  case c10::prim::RaiseException:
  case c10::prim::unchecked_cast:
  case c10::prim::If: // its blocks' nodes are asked one by one
  case c10::prim::Loop:
  case c10::prim::Return:
  case c10::prim::Param:
    return false;
  default:
    return true;
  }
}

namespace {

/// Whether \p node reads its operands and makes no alias of them: a node
/// with no schema libtorch models as reading only.
bool readsOnly(const Node *node) {
  switch (node->kind()) {
  case c10::prim::dtype:
  case c10::prim::device:
  case c10::prim::layout:
  case c10::prim::requires_grad:
  case c10::prim::is_cuda:
  case c10::prim::RaiseException:
    return true;
  default:
    return node->kind() == c10::Symbol::prim("is_cpu");
  }
}

/// Whether \p v is a tensor an op made afresh: its schema returns no alias
/// of an argument (comparisons, arithmetic, clone, reductions...).
bool madeAfresh(const Value *v) {
  const Node *node = v->node();
  if (!isTensor(v) || node->kind() == c10::prim::Param)
    return false;
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema || node->getOperator().aliasAnalysisKind() ==
                     c10::AliasAnalysisKind::CONSERVATIVE)
    return false;
  for (const c10::Argument &ret : schema->returns())
    if (ret.alias_info())
      return false;
  return true;
}

} // namespace

namespace {

/// For a tensor made afresh, calls \p visit(w, user, writes) for each use
/// of each value that shares its memory (v itself, views of it, containers
/// holding it, reads out of them), followed forward; whether every use was
/// one it models (false: the walk stopped, and its visits say nothing).
/// libtorch's alias database puts every tensor stored in a list into the
/// wildcard set of its type, which a write to any graph input reaches (a
/// mask given to index_put_ as `[m]` is "written" by every store to an
/// input); memory made afresh is reached only through such values.
bool forEachAliasUse(
    const Value *v,
    const std::function<void(const Value *, const Node *, bool)> &visit) {
  if (!madeAfresh(v))
    return false;
  std::vector<const Value *> work = {v};
  std::unordered_set<const Value *> seen = {v};
  auto share = [&](const Value *w) {
    if (seen.insert(w).second)
      work.push_back(w);
  };
  while (!work.empty()) {
    const Value *w = work.back();
    work.pop_back();
    for (const torch::jit::Use &use : w->uses()) {
      const Node *user = use.user;
      switch (user->kind()) {
      case c10::prim::Return:
        if (user->owningBlock() != user->owningGraph()->block())
          return false; // an if's or a loop's result aliases it
        visit(w, user, false); // the method returns it
        continue;
      case c10::prim::ListConstruct:
      case c10::prim::TupleConstruct:
      case c10::prim::ListUnpack:
      case c10::prim::TupleUnpack:
      case c10::prim::TupleIndex:
        visit(w, user, false);
        for (const Value *out : user->outputs())
          share(out);
        continue;
      default:
        break;
      }
      if (readsOnly(user)) {
        visit(w, user, false);
        continue;
      }
      const c10::FunctionSchema *schema = user->maybeSchema();
      if (!schema || user->getOperator().aliasAnalysisKind() ==
                         c10::AliasAnalysisKind::CONSERVATIVE ||
          use.offset >= schema->arguments().size())
        return false;
      const c10::AliasInfo *alias =
          schema->arguments()[use.offset].alias_info();
      visit(w, user, alias && writesThrough(*alias));
      if (!alias)
        continue; // read, and no result aliases it
      if (alias->isWildcardBefore() || alias->isWildcardAfter() ||
          !alias->containedTypes().empty())
        return false; // stored into something else (append)
      for (size_t i = 0; i < user->outputs().size(); ++i)
        if (i < schema->returns().size() && schema->returns()[i].alias_info())
          share(user->output(i));
    }
  }
  return true;
}

} // namespace

std::optional<bool> Aliases::writtenAfresh(const Value *v,
                                           const Node *except) {
  bool written = false;
  if (!forEachAliasUse(v, [&](const Value *, const Node *user, bool writes) {
        written |= writes && user != except;
      }))
    return std::nullopt;
  return written;
}

bool Aliases::onlyItselfReadAfter(const Value *v, const Node *point) {
  bool seen = false;
  return forEachAliasUse(v,
                         [&](const Value *w, const Node *user, bool) {
                           // An alias made after the point is made of
                           // what v is then: the new value.
                           seen |= w != v && w->node() != point &&
                                   !w->node()->isAfter(point) &&
                                   user != point && user->isAfter(point);
                         }) &&
         !seen;
}

bool Aliases::hasWriters(const Value *v) const {
  if (!anyWriter)
    return false;
  if (std::optional<bool> written = writtenAfresh(v, nullptr))
    return *written;
  return db().hasWriters(v);
}

Aliases::Aliases(std::shared_ptr<Graph> graph, const std::vector<Node *> *nodes)
    : graph(std::move(graph)),
      anyWriter(nodes ? std::any_of(nodes->begin(), nodes->end(), mayWrite)
                      : anyWriterIn(this->graph->block())) {
  if (anyWriter) // built now, on the graph as it is before any rewrite
    db();
}

const torch::jit::AliasDb &Aliases::db() const {
  if (!db_)
    db_ = std::make_unique<torch::jit::AliasDb>(graph);
  return *db_;
}

const Aliases &FactCache::aliases(const std::shared_ptr<Graph> &graph) {
  check(graph.get());
  if (!aliases_)
    aliases_ = std::make_unique<Aliases>(graph, analysis_ ? &analysis_->nodes
                                                          : nullptr);
  return *aliases_;
}

void FactCache::invalidate() {
  analysis_.reset();
  aliases_.reset();
  graph_ = nullptr;
}

void PassContext::remapNodes(
    const std::unordered_map<const Node *, Node *> &map) {
  auto remap = [&](auto &table) {
    std::remove_reference_t<decltype(table)> out;
    for (auto &[node, value] : table) {
      auto it = map.find(node);
      if (it != map.end())
        out.emplace(it->second, std::move(value));
    }
    table = std::move(out);
  };
  remap(findingOf);
  remap(newNodeReasons);
  facts.invalidate();
}

void PassContext::track(const AnalysisResult &analysis) {
  findingOf.clear();
  for (size_t i = 0; i < analysis.findingNodes.size(); ++i)
    findingOf.emplace(analysis.findingNodes[i], analysis.findings[i].id);
}

void PassContext::rewrote(const Node *node, std::string_view rule) {
  newNodeReasons.erase(node); // the address may be reused by a new node
  auto it = findingOf.find(node);
  if (it == findingOf.end())
    return;
  rewrittenBy.emplace(it->second, std::string(rule));
  declinedBecause.erase(it->second);
  findingOf.erase(it);
}

void PassContext::declined(const Node *node, std::string_view rule,
                           std::string_view reason) {
  std::string why = std::string(rule) + ": " + std::string(reason);
  auto it = findingOf.find(node);
  if (it == findingOf.end()) {
    newNodeReasons[node] = std::move(why);
    return;
  }
  if (!rewrittenBy.count(it->second))
    declinedBecause[it->second] = std::move(why);
}

bool PassContext::explained(const Node *node) const {
  auto it = findingOf.find(node);
  return it == findingOf.end() ? newNodeReasons.count(node) != 0
                               : declinedBecause.count(it->second) != 0;
}

std::string PassContext::reasonForNewNode(const Node *node) const {
  auto it = newNodeReasons.find(node);
  return it == newNodeReasons.end() ? "" : it->second;
}

} // namespace staticify
