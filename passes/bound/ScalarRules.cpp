//===- ScalarRules.cpp - Host scalars and the shapes of bounded values ----===//
//
//   int arithmetic, min/max, comparisons   -> lifted, ranges propagate
//   numel/size(0)/len of a bounded value   -> the lifted count
//   size(d > 0) of a bounded value         -> the padded tensor's (static)
//   dim/dtype/device of a bounded value    -> the padded tensor's
//   arange(k) with a lifted k              -> arange(upper bound), count k
//   full/new_full/full_like, lifted fill   -> made, then fill_ on the device
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Rules.h"

#include "passes/BoundedForms.h"
#include "passes/Selection.h"

#include "passes/GraphUtils.h"
#include "passes/LiftScalars.h"
#include "passes/OpCatalogue.h"

namespace staticify::bound {

using torch::jit::NamedValue;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// A host scalar op with a lifted operand runs on 0-d tensors instead.
RuleResult liftScalarOp(Node *node, RuleContext &rc) {
  if (!isScalarOp(node))
    return RuleResult::notApplicable();
  Value *device = nullptr;
  for (Value *in : node->inputs())
    if (Rep *r = rc.lifted(in)) {
      device = rc.deviceOf(r->value, node);
      break;
    }
  if (!device)
    return RuleResult::notApplicable();
  std::vector<Value *> operands;
  for (Value *in : node->inputs()) {
    Rep *r = rc.rep(in);
    if (r && r->kind != Rep::Kind::Lifted)
      return RuleResult::notApplicable();
    if (!r && !liftedDType(in->type()))
      return RuleResult::notApplicable();
    operands.push_back(rc.tensorOf(in, device, node));
  }
  Rep out(Rep::Kind::Lifted);
  out.range = rc.rangeOfOp(node);
  out.value = emitScalarOpOnTensors(rc.graph, node, operands);
  rc.setRep(node->output(), out);
  return RuleResult::applied();
}

/// Rank, dtype and device of a bounded value are its padded tensor's; a
/// rank the program fixes (knownRank: `stack(...).flatten(1)` in
/// torchvision's BoxCoder) is a constant, so that the ops that take it as a
/// dim (clip_boxes_to_image's `torch.stack(..., dim=boxes.dim())`) are
/// row-wise ops on a constant dim.
RuleResult metadata(Node *node, RuleContext &rc) {
  if (opRole(node) != OpRole::MetadataRead)
    return RuleResult::notApplicable();
  if (is(node, "aten::dim") && node->inputs().size() == 1)
    if (std::optional<int64_t> rank =
            knownRank(node->input(0), &rc.analysis)) {
      rc.replaceStatic(node->output(), rc.constant(*rank));
      return RuleResult::applied();
    }
  for (size_t i = 0; i < node->inputs().size(); ++i)
    if (Rep *r = rc.bounded(node->input(i)))
      node->replaceInput(i, r->value);
  return RuleResult::applied();
}

/// A new tensor of a size argument (kMakesSized: `counts.new_zeros(1)`,
/// `x.new_full((k,), v)`) made with a bounded value as self: it reads only
/// self's dtype and device, which are its padded tensor's. Its other
/// operands must be static (a size from a lifted count is
/// rows-of-lifted-size's).
RuleResult madeLike(Node *node, RuleContext &rc) {
  const OpInfo *op = opInfo(node);
  if (!op || !op->has(kMakesSized) || node->inputs().empty())
    return RuleResult::notApplicable();
  Rep *self = rc.bounded(node->input(0));
  if (!self || std::any_of(node->inputs().begin() + 1, node->inputs().end(),
                           [&](Value *in) { return rc.rep(in) != nullptr; }))
    return RuleResult::notApplicable();
  node->replaceInput(0, self->value);
  return RuleResult::applied();
}

/// Whether \p node is `reshape(y, x.size())` (or view) of bounded x and y
/// with one count, \p x being \p sizesOf: torchvision's
/// clip_boxes_to_image ends with `clipped_boxes.reshape(boxes.shape)`.
bool reshapesLike(const Node *node, const Rep &sizesOf, RuleContext &rc) {
  if ((!is(node, "aten::reshape") && !is(node, "aten::view")) ||
      node->inputs().size() != 2)
    return false;
  Rep *y = rc.bounded(node->input(0));
  return y && rc.sameCount(y->count, sizesOf.count);
}

/// reshape(y, x.size()) of bounded x and y with one count: y's padded rows
/// take x's padded shape (one bound, by the count). Where a row of y has
/// other elements than a row of x the original raises unless it has no
/// rows, and so does the guard's fallback, on the valid rows (a host read,
/// counted apart); padded rows would raise even with none.
RuleResult reshapeLike(Node *node, RuleContext &rc) {
  Node *sizes = node->input(1)->node();
  Rep *x = sizes->inputs().size() == 1 && is(sizes, "aten::size")
               ? rc.bounded(sizes->input(0))
               : nullptr;
  if (!x || !reshapesLike(node, *x, rc))
    return RuleResult::notApplicable();
  const Rep y = *rc.bounded(node->input(0));
  torch::jit::Graph &graph = rc.graph;
  Value *sameRows = emit(graph, "aten::eq",
                         {emit(graph, "aten::numel", {y.value}, node),
                          emit(graph, "aten::numel", {x->value}, node)},
                         node);
  Value *padded = emitIf(
      graph, sameRows, node,
      [&] {
        return emit(graph, node->kind().toQualString(),
                    {y.value, emit(graph, "aten::size", {x->value}, node)},
                    node);
      },
      [&] {
        Value *n = emit(graph, "aten::Int", {y.count}, node);
        Value *rows =
            emit(graph, "aten::slice", {y.value, 0, rc.constant(0), n, 1}, node);
        Value *first = graph.insertNode(graph.createList(c10::IntType::get(), {n}))
                           ->output();
        Value *rest =
            emit(graph, "aten::slice",
                 {emit(graph, "aten::size", {x->value}, node), 1, rc.none(), 1},
                 node);
        Value *shaped = emit(graph, node->kind().toQualString(),
                             {rows, emit(graph, "aten::add", {first, rest}, node)},
                             node);
        return insertForm(graph, "pad_rows",
                          {shaped, emit(graph, "aten::size", {y.value, 0}, node)},
                          node)[0];
      });
  padded->node()->i_(guardAttr(), 1);
  rc.setBounded(node->output(), padded, y.count, y.isIndex, x->is1D);
  return RuleResult::applied();
}

/// A size list whose rows are those of a bounded value, with host sizes
/// after it: `y.size()`, or `y.size() + [4]` (the checks batched_nms's
/// rewrite makes of boxes against classes); or its rows alone,
/// `y.size()[:1]` (AllTestedSelections.cpp's guard that a mask is a vector
/// of y's rows).
struct RowSizes {
  const Rep *of = nullptr;
  Value *extra = nullptr; // the host list after the sizes, or null
  bool rowsOnly = false;
};

/// Whether \p node is `sizes[:1]`, of \p sizes if given.
bool leadingSize(const Node *node, const Value *sizes = nullptr) {
  return is(node, "aten::slice") && node->inputs().size() == 4 &&
         (!sizes || node->input(0) == sizes) &&
         (node->input(1)->mustBeNone() || constantInt(node->input(1)) == 0) &&
         constantInt(node->input(2)) == 1 && constantInt(node->input(3)) == 1;
}

std::optional<RowSizes> rowSizes(Value *list, RuleContext &rc) {
  Node *node = list->node();
  RowSizes sizes;
  if (leadingSize(node)) {
    sizes.rowsOnly = true;
    node = node->input(0)->node();
  } else if (is(node, "aten::add") && node->inputs().size() == 2 &&
             !rc.rep(node->input(1))) {
    sizes.extra = node->input(1);
    node = node->input(0)->node();
  }
  sizes.of = node->inputs().size() == 1 && is(node, "aten::size")
                 ? rc.bounded(node->input(0))
                 : nullptr;
  if (!sizes.of)
    return std::nullopt;
  return sizes;
}

/// `x.size() == y.size()` (or `!=`) of bounded x and y with one count,
/// either side followed by host sizes (`x.size() == y.size() + [4]`): the
/// functional losses' check that target and input agree, on two selections
/// by one mask, or batched_nms's rewrite's that boxes have 4 columns per
/// class. Their rows agree, so the lists are equal where the rest are: the
/// padded tensors' trailing sizes, then the host sizes (no sync). Applies
/// when every use of the size list is such a comparison, or a reshape to
/// it (reshapeLike); one whose result is already replaced (its partner's
/// list came first) is left to be erased.
RuleResult sizeListCompared(Node *node, const Rep &r, RuleContext &rc) {
  // Only its trailing sizes read (`x.shape[2:]`, a slice from a constant
  // start >= 1): the padded rows have the same.
  if (node->output()->hasUses() &&
      std::all_of(node->output()->uses().begin(), node->output()->uses().end(),
                  [](const torch::jit::Use &use) {
                    const Node *user = use.user;
                    return is(user, "aten::slice") && use.offset == 0 &&
                           user->inputs().size() == 4 &&
                           constantInt(user->input(1)).value_or(0) >= 1 &&
                           constantInt(user->input(3)) == 1;
                  })) {
    rc.replaceStatic(node->output(),
                     emit(rc.graph, "aten::size", {r.value}, node));
    return RuleResult::applied();
  }
  struct Compare {
    Node *cmp;
    RowSizes mine, theirs;
  };
  std::vector<Compare> compares;
  // A comparison \p use of this list as \p mine with another's.
  auto compare = [&](const torch::jit::Use &use, const RowSizes &mine) {
    Node *cmp = use.user;
    if (!is(cmp, "aten::eq") && !is(cmp, "aten::ne"))
      return false;
    std::optional<RowSizes> theirs = rowSizes(cmp->input(1 - use.offset), rc);
    if (!theirs || !rc.sameCount(r.count, theirs->of->count))
      return false;
    compares.push_back({cmp, mine, *theirs});
    return true;
  };
  for (const torch::jit::Use &use : node->output()->uses()) {
    Node *user = use.user;
    if (use.offset == 1 && reshapesLike(user, r, rc))
      continue; // the reshape's own rule (reshapeLike)
    if (use.offset == 0 && is(user, "aten::add") &&
        !rc.rep(user->input(1))) {
      for (const torch::jit::Use &sum : user->output()->uses())
        if (!compare(sum, RowSizes{&r, user->input(1)}))
          return RuleResult::declined();
    } else if (use.offset == 0 && leadingSize(user, node->output())) {
      for (const torch::jit::Use &rows : user->output()->uses())
        if (!compare(rows, RowSizes{&r, nullptr, true}))
          return RuleResult::declined();
    } else if (!compare(use, RowSizes{&r, nullptr})) {
      return RuleResult::declined();
    }
  }
  auto trailing = [&](const RowSizes &sizes) {
    if (sizes.rowsOnly) // the rows alone: nothing after them
      return rc.graph.insertConstant(std::vector<int64_t>{});
    Value *all = emit(rc.graph, "aten::size", {sizes.of->value}, node);
    Value *rest = emit(rc.graph, "aten::slice", {all, 1, rc.none(), 1}, node);
    return sizes.extra ? emit(rc.graph, "aten::add", {rest, sizes.extra}, node)
                       : rest;
  };
  for (const Compare &c : compares) {
    if (!c.cmp->output()->hasUses())
      continue; // replaced already: its other list came first
    // At the comparison, where both lists and their host sizes are made.
    torch::jit::WithInsertPoint at(c.cmp);
    rc.replaceStatic(c.cmp->output(),
                     emit(rc.graph, c.cmp->kind().toQualString(),
                          {trailing(c.mine), trailing(c.theirs)}, node));
  }
  return RuleResult::applied();
}

/// numel, size and len of a bounded value.
RuleResult sizeOf(Node *node, RuleContext &rc) {
  if (opRole(node) != OpRole::ShapeRead)
    return RuleResult::notApplicable();
  Rep *r = rc.bounded(node->input(0));
  if (!r)
    return RuleResult::declined();
  Value *bound = rc.boundOf(*r, node);
  if (is(node, "aten::size")) {
    if (node->inputs().size() != 2) // the whole size list
      return sizeListCompared(node, *r, rc);
    std::optional<int64_t> given = constantInt(node->input(1)), d = given;
    if (d) // size(-1) of a value whose rank the program fixes
      d = resolveDim(*d, node->input(0), 0, &rc.analysis);
    if (!d && given && *given < 0) {
      // Of a rank only the run time knows (`class_logits.shape[-1]` of a
      // linear's result): a trailing size where the rank says so, a host
      // fact; the fallback reads the original (counted apart).
      torch::jit::Graph &graph = rc.graph;
      Value *trailing = emit(graph, "aten::ge",
                             {emit(graph, "aten::dim", {r->value}, node),
                              rc.constant(1 - *given)},
                             node);
      Value *out = rc.guardOriginal(trailing, node, [&] {
        return emit(graph, "aten::size", {r->value, *given}, node);
      });
      rc.replaceStatic(node->output(), out);
      return RuleResult::applied();
    }
    if (!d)
      return RuleResult::declined();
    if (*d > 0) { // trailing sizes are the padded tensor's
      rc.replaceStatic(node->output(),
                       emit(rc.graph, "aten::size", {r->value, *d}, node));
      return RuleResult::applied();
    }
  }
  Rep out(Rep::Kind::Lifted);
  out.range.lo = 0;
  out.range.hi = bound;
  out.value = r->count;
  if (is(node, "aten::numel") && !r->is1D) {
    // count * (numel / bound): the rows' size, 0 when there are none.
    Value *numel = emit(rc.graph, "aten::numel", {r->value}, node);
    Value *rowSize =
        rc.hostOp("aten::floordiv", numel,
                  rc.hostOp("prim::max", bound, rc.constant(1), node), node);
    out.value = emit(rc.graph, "aten::mul", {r->count, rowSize}, node);
    out.range.hi = numel;
  }
  rc.setRep(node->output(), out);
  return RuleResult::applied();
}

/// arange(k) with a lifted k: arange(upper bound of k), count max(k, 0):
/// k itself where it is never negative (a count: `arange(x.size(0))` of
/// bounded x has x's count, so that its rows line up with x's).
RuleResult arange(Node *node, RuleContext &rc) {
  Rep *k = rc.lifted(node->input(0));
  if (!k || node->inputs().size() != 5)
    return RuleResult::notApplicable();
  Value *hi = rc.upper(k->range);
  if (!hi)
    return RuleResult::notApplicable();
  Node *copy = rc.graph.insertNode(rc.graph.createClone(
      node, [&](Value *v) { return v == node->input(0) ? hi : v; }));
  Value *count = k->range.lo.value_or(-1) >= 0
                     ? k->value
                     : emit(rc.graph, "aten::clamp", {k->value}, node,
                            {NamedValue("min", rc.constant(0))});
  rc.setBounded(node->output(), copy->output(), count,
                rc.analysis.info(node->output()).dtype == DTypeKind::Long,
                /*is1D=*/true);
  return RuleResult::applied();
}

/// The size list of factories (`torch.zeros((num_rois, C, H, W))` with
/// num_rois = len(rois) of bounded rois, as torchvision's
/// MultiScaleRoIAlign makes its result) whose first size is a lifted length
/// with an upper bound: each factory makes the bound's rows, as many valid
/// as the length. Every use of the list must be such a factory's size, with
/// no other represented input; random factories are not (more rows draw
/// more numbers).
RuleResult rowsOfLiftedSize(Node *node, RuleContext &rc) {
  if (node->inputs().empty() ||
      node->output()->type()->kind() != c10::TypeKind::ListType)
    return RuleResult::notApplicable();
  Rep *n = rc.lifted(node->input(0));
  if (!n || n->range.lo.value_or(-1) < 0 || !rc.onlyFirstRepresented(node))
    return RuleResult::notApplicable();
  static const std::vector<c10::Symbol> factories =
      ops({"aten::zeros", "aten::ones", "aten::empty", "aten::full",
           "aten::new_zeros", "aten::new_ones", "aten::new_empty",
           "aten::new_full"});
  std::vector<Node *> users;
  for (const torch::jit::Use &use : node->output()->uses()) {
    Node *user = use.user;
    if (std::find(factories.begin(), factories.end(), user->kind()) ==
            factories.end() ||
        namedInput(user, "size") != node->output())
      return RuleResult::notApplicable();
    for (Value *in : user->inputs())
      if (in != node->output() && rc.rep(in))
        return RuleResult::notApplicable();
    users.push_back(user);
  }
  Value *hi = rc.upper(n->range);
  if (!hi)
    return RuleResult::notApplicable();
  Node *sizes = rc.graph.insertNode(rc.graph.createClone(
      node, [&](Value *v) { return v == node->input(0) ? hi : v; }));
  for (Node *user : users) {
    torch::jit::WithInsertPoint at(user);
    Node *made = rc.graph.insertNode(rc.graph.createClone(
        user, [&](Value *v) { return v == node->output() ? sizes->output() : v; }));
    rc.setBounded(user->output(), made->output(), n->value,
                  rc.analysis.info(user->output()).dtype == DTypeKind::Long,
                  node->inputs().size() == 1);
    rc.absorb(user);
  }
  return RuleResult::applied();
}

/// torch.tensor([a, b, ...]) of numbers some of which are lifted (librosa's
/// trim returns `torch.tensor([start, end])` of its bounds): the numbers
/// stacked as 0-d tensors, in the dtype torch.tensor gives them (the one
/// named; else int64 for ints, the default dtype for floats, bool for
/// bools), on the device named. With none named torch.tensor makes a host
/// tensor: the stacked numbers are copied to the host once, a read of the
/// device where they live (counted), at the output where the method
/// returns the tensor.
RuleResult numbersAsTensor(Node *node, RuleContext &rc) {
  auto list = node->output()->type()->cast<c10::ListType>();
  if (!list || node->inputs().empty() || node->output()->uses().size() != 1)
    return RuleResult::notApplicable();
  const torch::jit::Use use = node->output()->uses()[0];
  Node *user = use.user;
  if (user->kind() != c10::aten::tensor || use.offset != 0)
    return RuleResult::notApplicable();
  c10::TypeKind kind = list->getElementType()->kind();
  if (kind != c10::TypeKind::IntType && kind != c10::TypeKind::FloatType &&
      kind != c10::TypeKind::BoolType)
    return RuleResult::notApplicable();
  Value *grad = namedInput(user, "requires_grad");
  Value *dtype = namedInput(user, "dtype");
  Value *device = namedInput(user, "device");
  if (!dtype || !device)
    return RuleResult::notApplicable();
  if (grad && constantBool(grad) != false)
    return RuleResult::declined("torch.tensor of numbers read from data "
                                "that requires grad");
  for (Value *in : user->inputs())
    if (in != node->output() && rc.rep(in))
      return RuleResult::notApplicable();
  torch::jit::WithInsertPoint at(user);
  Value *where = nullptr; // the device of a lifted number
  for (Value *in : node->inputs())
    if (Rep *r = rc.lifted(in); r && !where)
      where = rc.deviceOf(r->value, user);
  std::vector<Value *> parts;
  for (Value *in : node->inputs())
    parts.push_back(rc.tensorOf(in, where, user));
  Value *stacked = emit(
      rc.graph, "aten::stack",
      {rc.graph.insertNode(rc.graph.createList(c10::TensorType::get(), parts))
           ->output(),
       0},
      user);
  Value *dt = !dtype->mustBeNone() ? dtype
              : kind == c10::TypeKind::IntType
                  ? rc.constant(static_cast<int64_t>(c10::ScalarType::Long))
              : kind == c10::TypeKind::BoolType
                  ? rc.constant(static_cast<int64_t>(c10::ScalarType::Bool))
                  : emitDefaultDType(rc.graph, user);
  Value *out = nullptr;
  if (!device->mustBeNone()) {
    out = emit(rc.graph, "aten::to", {stacked, device, dt}, user);
  } else {
    out = emit(rc.graph, "aten::cpu",
               {emit(rc.graph, "aten::to", {stacked, dt}, user)}, user);
    bool returned = std::all_of(
        user->output()->uses().begin(), user->output()->uses().end(),
        [](const torch::jit::Use &u) {
          return isOutputPosition(u.user) || leavesToReturn(u.user);
        });
    rc.ctx.declined(out->node(), kRule,
                    returned ? "materialized: it is returned (torch.tensor "
                               "of numbers read from data makes a host "
                               "tensor)"
                             : "materialized: torch.tensor of numbers read "
                               "from data makes a host tensor");
  }
  rc.replaceStatic(user->output(), out);
  rc.absorb(user);
  return RuleResult::applied();
}

/// full/new_full/full_like with a lifted fill value (`objectness.new_full(
/// (1,), float(n))`): made with a fill of the same type (so a dtype left to
/// inference is the same), then filled on the device. fill_ takes a 0-d
/// tensor and casts it to the result's dtype as the scalar would be.
RuleResult fillWithLifted(Node *node, RuleContext &rc) {
  Value *fill = namedInput(node, "fill_value");
  Rep *r = fill ? rc.lifted(fill) : nullptr;
  if (!r)
    return RuleResult::notApplicable();
  for (Value *in : node->inputs())
    if (in != fill && rc.rep(in))
      return RuleResult::notApplicable();
  Value *zero;
  switch (fill->type()->kind()) {
  case c10::TypeKind::IntType:
    zero = rc.constant(0);
    break;
  case c10::TypeKind::FloatType:
    zero = rc.graph.insertConstant(0.0);
    break;
  case c10::TypeKind::BoolType:
    zero = rc.graph.insertConstant(false);
    break;
  default:
    return RuleResult::notApplicable();
  }
  Node *copy = rc.graph.insertNode(rc.graph.createClone(
      node, [&](Value *v) { return v == fill ? zero : v; }));
  // copy_, not fill_: libtorch 1.13's fill_ of a tensor value reads it on
  // the host (value.item()); a 0-d copy broadcasts and casts on the device.
  rc.replaceStatic(node->output(), emit(rc.graph, "aten::copy_",
                                        {copy->output(), r->value}, node));
  return RuleResult::applied();
}

} // namespace

void addScalarRules(std::vector<BoundRule> &rules) {
  using On = BoundRule::On;
  rules.push_back({"lift-scalar-op", On::Use, {}, liftScalarOp});
  rules.push_back({"metadata", On::Use, {}, metadata});
  rules.push_back({"made-like", On::Use, {}, madeLike});
  rules.push_back({"size", On::Use, {}, sizeOf});
  rules.push_back({"reshape-like", On::Use,
                   ops({"aten::reshape", "aten::view"}), reshapeLike});
  rules.push_back({"arange", On::Use, ops({"aten::arange"}), arange});
  rules.push_back({"rows-of-lifted-size", On::Use, ops({"prim::ListConstruct"}),
                   rowsOfLiftedSize});
  rules.push_back({"numbers-as-tensor", On::Use, ops({"prim::ListConstruct"}),
                   numbersAsTensor});
  rules.push_back({"fill", On::Use,
                   ops({"aten::full", "aten::new_full", "aten::full_like"}),
                   fillWithLifted});
}

} // namespace staticify::bound
