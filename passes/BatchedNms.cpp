//===- BatchedNms.cpp - batched_nms's per-class loop -> one NMS of classes ===//

#include "passes/BatchedNms.h"

#include "passes/Analysis.h"
#include "passes/BoundedForms.h"
#include "passes/Containers.h"
#include "passes/GraphUtils.h"
#include "passes/OpInfo.h"
#include "passes/Selection.h"

#include <torch/csrc/jit/ir/constants.h>

#include <string>
#include <unordered_set>
#include <variant>
#include <vector>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr const char *kRule = "batched-nms";

bool is(const Node *node, const char *op) {
  return node->kind() == c10::Symbol::fromQualString(op);
}

/// `x[i]` (aten::index with one index): x and i, and the index list.
struct Gather {
  Value *base = nullptr, *index = nullptr;
  Node *list = nullptr;
};
std::optional<Gather> gatherOf(Value *v) {
  Node *node = v->node();
  if (node->kind() != c10::aten::index)
    return std::nullopt;
  Node *list = node->input(1)->node();
  if (list->kind() != c10::prim::ListConstruct || list->inputs().size() != 1 ||
      list->output()->uses().size() != 1)
    return std::nullopt;
  return Gather{node->input(0), list->input(0), list};
}

/// The matched parts of one per-class loop.
struct ClassLoop {
  Node *loop = nullptr, *unique = nullptr, *len = nullptr;
  Node *store = nullptr; // the index_put_ into keep_mask
  Value *idxs = nullptr, *boxes = nullptr, *scores = nullptr;
  Value *threshold = nullptr, *keepMask = nullptr;
  c10::IValue fill; // the constant stored
  /// The nodes that read data on the host, for the report.
  std::vector<Node *> syncs;
};

/// The per-class loop around \p nms, or why the loop is not one.
std::variant<ClassLoop, std::string> matchClassLoop(Node *nms) {
  const std::string notOne =
      "the loop around it is not batched_nms's per-class loop";
  ClassLoop m;
  m.loop = nms->owningBlock()->owningNode();
  if (!m.loop || m.loop->kind() != c10::prim::Loop ||
      nms->inputs().size() != 3)
    return notOne;
  Node *loop = m.loop;
  torch::jit::Block *body = loop->blocks().at(0);
  // `for c in unique(idxs)`: no carried values, always continuing.
  if (loop->inputs().size() != 2 || loop->outputs().size() != 0 ||
      constantBool(loop->input(1)) != true || body->inputs().size() != 1 ||
      body->outputs().size() != 1 || constantBool(body->outputs()[0]) != true)
    return notOne;
  m.len = loop->input(0)->node();
  if (!is(m.len, "aten::len") || m.len->owningBlock() != loop->owningBlock())
    return notOne;
  Value *classes = m.len->input(0);
  m.unique = classes->node();
  if (!is(m.unique, "aten::_unique2") || classes->offset() != 0 ||
      m.unique->owningBlock() != loop->owningBlock())
    return notOne;
  m.idxs = m.unique->input(0);

  // keep = nms(boxes[curr], scores[curr], t)
  auto boxes = gatherOf(nms->input(0)), scores = gatherOf(nms->input(1));
  if (!boxes || !scores || boxes->index != scores->index)
    return std::string("its boxes and scores are not rows of one selection");
  m.boxes = boxes->base;
  m.scores = scores->base;
  m.threshold = nms->input(2);
  // curr = where(idxs == class_id)[0], class_id = classes.select(0, i)
  Value *curr = boxes->index;
  Value *classMask = rowIndicesOf(curr);
  if (!classMask)
    return notOne;
  Node *get = curr->node();
  Node *where = get->input(0)->node();
  if (where->output()->uses().size() != 1)
    return notOne;
  Node *eq = classMask->node();
  if (eq->kind() != c10::aten::eq || eq->inputs().size() != 2 ||
      eq->output()->uses().size() != 1)
    return notOne;
  bool idxsFirst = eq->input(0) == m.idxs;
  Node *select = eq->input(idxsFirst ? 1 : 0)->node();
  if ((!idxsFirst && eq->input(1) != m.idxs) ||
      select->kind() != c10::aten::select || select->input(0) != classes ||
      constantInt(select->input(1)) != 0 ||
      select->input(2) != body->inputs()[0])
    return notOne;
  // keep_mask[curr[keep]] = value, value = tensor(c, dtype(keep_mask), ...)
  auto doesMore = [](const Node *extra) {
    return std::string("the loop body does more than batched_nms's "
                       "per-class NMS ('") +
           extra->kind().toQualString() + "')";
  };
  for (const torch::jit::Use &use : nms->output()->uses())
    if (use.user->kind() != c10::prim::ListConstruct)
      return doesMore(use.user);
  if (nms->output()->uses().size() != 1)
    return notOne;
  Node *keepList = nms->output()->uses()[0].user;
  if (keepList->kind() != c10::prim::ListConstruct ||
      keepList->output()->uses().size() != 1)
    return notOne;
  Node *kept = keepList->output()->uses()[0].user;
  auto keptRows = gatherOf(kept->output());
  if (!keptRows || keptRows->base != curr || kept->output()->uses().size() != 1)
    return notOne;
  Node *storeList = kept->output()->uses()[0].user;
  if (storeList->kind() != c10::prim::ListConstruct ||
      storeList->inputs().size() != 1 ||
      storeList->output()->uses().size() != 1)
    return notOne;
  m.store = storeList->output()->uses()[0].user;
  if (!is(m.store, "aten::index_put_") || m.store->inputs().size() != 4 ||
      m.store->input(1) != storeList->output() ||
      constantBool(m.store->input(3)) != false || m.store->output()->hasUses())
    return notOne;
  m.keepMask = m.store->input(0);
  Node *value = m.store->input(2)->node();
  if (!is(value, "aten::tensor") || value->inputs().size() != 4 ||
      value->output()->uses().size() != 1)
    return std::string("the value it stores is not a constant");
  auto fill = torch::jit::toIValue(value->input(0));
  Node *dtype = value->input(1)->node();
  auto exact = [](const c10::IValue &v) {
    return v.isBool() || (v.isInt() && (v.toInt() == 0 || v.toInt() == 1)) ||
           (v.isDouble() && (v.toDouble() == 0.0 || v.toDouble() == 1.0));
  };
  if (!fill || !exact(*fill) ||
      dtype->kind() != c10::prim::dtype || dtype->input(0) != m.keepMask)
    return std::string("the value it stores is not a constant every dtype "
                       "holds exactly (a bool, 0 or 1) of the mask's dtype");
  // A bool as the int it holds: a Scalar argument takes numbers only.
  m.fill = fill->isBool() ? c10::IValue(static_cast<int64_t>(fill->toBool()))
                          : *fill;

  // Nothing else in the body: every node is one of the above, or a
  // constant, or the device of keep_mask for the stored value.
  std::unordered_set<const Node *> parts = {
      select, eq,       where,    get,  boxes->list,      scores->list,
      nms->input(0)->node(), nms->input(1)->node(), nms, keepList, kept,
      storeList, m.store, value, dtype};
  for (Node *node : body->nodes()) {
    if (parts.count(node) || node->kind() == c10::prim::Constant)
      continue;
    if (node->kind() == c10::prim::device && node->input(0) == m.keepMask &&
        node->output()->uses().size() == 1 &&
        node->output()->uses()[0].user == value)
      continue;
    return doesMore(node);
  }
  // unique(idxs) is read by the loop only: it moves into the fallback.
  for (size_t i = 0; i < m.unique->outputs().size(); ++i)
    for (const torch::jit::Use &use : m.unique->output(i)->uses())
      if (use.user != m.len && use.user != select)
        return std::string("the classes unique() found are used after the "
                           "loop");
  if (m.len->output()->uses().size() != 1)
    return notOne;
  m.syncs = {m.unique, where, nms};
  return m;
}

/// The host facts under which the loop is nms_kept_mask: shapes (as lists,
/// so that no check can raise on a rank), dtypes and devices.
Value *emitGuard(Graph &graph, const ClassLoop &m) {
  const Node *at = m.loop;
  auto all = [&](std::vector<Value *> conditions) {
    Value *c = conditions[0];
    for (size_t i = 1; i < conditions.size(); ++i)
      c = emit(graph, "aten::__and__", {c, conditions[i]}, at);
    return c;
  };
  auto sizes = [&](Value *t) { return emit(graph, "aten::size", {t}, at); };
  auto same = [&](const char *fact, Value *a, Value *b) {
    return emit(graph, "aten::eq",
                {emit(graph, fact, {a}, at), emit(graph, fact, {b}, at)}, at);
  };
  Value *rows = sizes(m.idxs);
  Value *notTrue = graph.insertConstant(false);
  return all({
      emit(graph, "aten::eq", {emit(graph, "aten::dim", {m.idxs}, at), 1}, at),
      emit(graph, "aten::eq", {sizes(m.scores), rows}, at),
      emit(graph, "aten::eq", {sizes(m.keepMask), rows}, at),
      emit(graph, "aten::eq",
           {sizes(m.boxes),
            emit(graph, "aten::add", {rows, std::vector<int64_t>{4}}, at)},
           at),
      emit(graph, "aten::eq",
           {emit(graph, "aten::is_floating_point", {m.idxs}, at), notTrue},
           at),
      emit(graph, "aten::eq",
           {emit(graph, "aten::is_complex", {m.idxs}, at), notTrue}, at),
      emit(graph, "aten::is_floating_point", {m.boxes}, at),
      same("prim::dtype", m.boxes, m.scores),
      same("prim::device", m.boxes, m.scores),
      same("prim::device", m.boxes, m.idxs),
      same("prim::device", m.boxes, m.keepMask),
  });
}

/// Why the loop's writes to keep_mask cannot become a new mask that its
/// later uses read instead; empty where they can: keep_mask is made fresh
/// (zeros_like), and before the loop only read for its metadata, so no
/// alias made there sees the write.
std::string whyNotOutOfPlace(const ClassLoop &m) {
  const OpInfo *made = opInfo(m.keepMask->node());
  if (!made || !(made->has(kLikeInput) || made->has(kMakesSized)))
    return "the mask it writes is not made fresh before the loop "
           "(zeros_like)";
  for (const torch::jit::Use &use : m.keepMask->uses()) {
    if (!use.user->isBefore(m.loop))
      continue;
    for (const Value *out : use.user->outputs())
      if (holdsTensors(out->type()))
        return "the mask it writes is used before the loop ('" +
               std::string(use.user->kind().toQualString()) + "')";
  }
  return "";
}

void rewrite(Graph &graph, const ClassLoop &m, PassContext &ctx) {
  torch::jit::WithInsertPoint before(m.loop);
  Value *holds = emitGuard(graph, m);
  Node *guard = graph.insertNode(graph.create(c10::prim::If, {holds}, 0));
  guard->setSourceRange(m.loop->sourceRange());
  guard->i_(guardAttr(), 1);
  torch::jit::Block *fast = guard->addBlock();
  torch::jit::Block *fallback = guard->addBlock();
  // Both blocks make a new mask, which keep_mask's later uses read: never
  // written in place, it stays a value the bound pass can pad.
  Value *marked = guard->addOutput()->setType(m.keepMask->type());
  for (const torch::jit::Use &use : std::vector<torch::jit::Use>(
           m.keepMask->uses().begin(), m.keepMask->uses().end()))
    if (guard->isBefore(use.user) && !insideOf(use.user, m.loop))
      use.user->replaceInput(use.offset, marked);
  {
    torch::jit::WithInsertPoint in(fast);
    Value *kept = emit(graph, kNmsMaskKernel,
                       {m.boxes, m.scores, m.threshold,
                        graph.insertConstant(c10::IValue()), m.idxs},
                       m.loop);
    // The stored constant as a Scalar: the loop's torch.tensor(fill,
    // device=...) is a host-to-device copy (which waits for the stream) and
    // masked_fill with a tensor value reads it back (value.item()). The
    // match takes only fills every dtype holds exactly (bool, 0, 1), so the
    // Scalar's conversion cannot raise where the tensor's would not.
    fast->registerOutput(
        emit(graph, "aten::masked_fill", {m.keepMask, kept, m.fill}, m.store));
  }
  {
    torch::jit::WithInsertPoint in(fallback);
    Value *copy = emit(graph, "aten::clone", {m.keepMask}, m.store);
    m.store->replaceInput(0, copy);
    fallback->registerOutput(copy);
  }
  for (Node *sync : m.syncs)
    ctx.rewrote(sync, kRule);
  for (Node *node : {m.unique, m.len, m.loop})
    node->moveBefore(fallback->return_node());
}

} // namespace

bool batchedNms(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  const AnalysisResult &analysis = ctx.facts.analysis(graph);
  static const c10::Symbol nmsOp =
      c10::Symbol::fromQualString("torchvision::nms");
  std::vector<std::pair<Node *, ClassLoop>> loops;
  for (Node *nms :
       analysis.nodesWhere([](c10::Symbol op) { return op == nmsOp; })) {
    const Node *owner = nms->owningBlock()->owningNode();
    if (!owner || owner->kind() != c10::prim::Loop)
      continue; // not in a loop: bound's nms rule
    auto matched = matchClassLoop(nms);
    if (auto *why = std::get_if<std::string>(&matched))
      ctx.declined(nms, kRule, *why);
    else
      loops.emplace_back(nms, std::get<ClassLoop>(matched));
  }
  if (loops.empty())
    return false;
  if (!ctx.options.runtimeOps || !opRegistered(kNmsMaskKernel)) {
    // torchvision takes this loop only above 1,000 boxes (CPU) or 5,000
    // (CUDA). There the TorchScript form (nms_kept_mask: a greedy walk of
    // N sequential steps) costs far more than the loop's syncs: 17x at
    // 1,100 boxes, Faster R-CNN's box head 18x per image (docs/benchmarks.md).
    for (const auto &[nms, m] : loops)
      ctx.declined(nms, kRule,
                   "above 1,000 boxes, where torchvision takes this loop, "
                   "the TorchScript NMS form is many times slower than the "
                   "loop's syncs; --runtime-ops replaces it by the runtime's "
                   "kernel");
    return false;
  }
  const Aliases &aliases = ctx.facts.aliases(graph);
  bool changed = false;
  for (const auto &[nms, m] : loops) {
    if (aliases.mayAlias(m.keepMask, m.boxes) ||
        aliases.mayAlias(m.keepMask, m.scores) ||
        aliases.mayAlias(m.keepMask, m.idxs)) {
      ctx.declined(nms, kRule,
                   "the mask it writes may share memory with its boxes, "
                   "scores or classes");
      continue;
    }
    if (std::string why = whyNotOutOfPlace(m); !why.empty()) {
      ctx.declined(nms, kRule, why);
      continue;
    }
    rewrite(*graph, m, ctx);
    changed = true;
  }
  return changed;
}

} // namespace staticify
