//===- RandomRules.cpp - Random draws of a lifted size --------------------===//
//
//   randperm(n), n lifted, one use [:k]   -> the first k below n of
//                                            randperm(bound(n))
//   randperm(n), n lifted, other uses     -> all of them: a full random order
//   randint(lo, n, size), n lifted > lo   -> random_below: floor(u * (n - lo))
//                                            + lo of a float64 draw u
//
// The draw reads the generator for bound(n) entries, not n: the same
// distribution, another stream of numbers.
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Rules.h"

#include "passes/BoundedForms.h"
#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"

namespace staticify::bound {

using torch::jit::Node;
using torch::jit::Value;

namespace {

RuleResult randperm(Node *node, RuleContext &rc) {
  Rep *n = rc.lifted(node->input(0));
  if (!n || node->inputs().size() != 5)
    return RuleResult::declined();
  auto dtype = constantInt(node->input(1));
  if (!node->input(1)->mustBeNone() &&
      dtype != static_cast<int64_t>(c10::ScalarType::Long))
    return RuleResult::declined();
  Value *bound = rc.upper(n->range);
  if (!bound || !n->range.lo)
    return RuleResult::declined();
  // Its one use is [:k]: the prefix is drawn there (drawPrefix). Otherwise
  // a full random order.
  const auto &uses = node->output()->uses();
  if (uses.size() == 1 && is(uses[0].user, "aten::slice") &&
      uses[0].offset == 0) {
    Rep r(Rep::Kind::RandPerm);
    r.value = n->value;
    r.range = n->range;
    r.origin = node;
    rc.setRep(node->output(), r);
    return RuleResult::applied();
  }
  auto outs = insertForm(rc.graph, "random_prefix",
                         {n->value, bound, bound, node->input(3)}, node);
  rc.setBounded(node->output(), outs[0], n->value, true, /*is1D=*/true);
  return RuleResult::applied();
}

/// The first \p top entries below x's n of randperm(bound) (random_prefix),
/// \p count of them live: randperm(n)[:k]'s rows.
RuleResult drawnPrefix(Node *node, const Rep &x, Value *bound, Value *top,
                       Value *count, RuleContext &rc) {
  auto outs = insertForm(rc.graph, "random_prefix",
                         {x.value, bound, top, x.origin->input(3)}, node);
  Rep &r = rc.setBounded(node->output(), outs[0], count, true, /*is1D=*/true);
  r.drawOf = x.value;
  r.drawTop = top;
  return RuleResult::applied();
}

/// randperm(n)[:k] of a k of unknown sign: k >= 0 takes the first
/// min(k, n), a negative k the first max(n + k, 0), as Python's slice
/// counts from the end. Where the sign is the host's to know (detectron2's
/// `randperm(positive.numel())[:min(positive.numel(), num_pos)]`, num_pos
/// computed from a module's floats), the host chooses the rows to draw,
/// min(K, bound) or bound; where it is data (`randperm(m)[:min(m, B -
/// min(n, K))]`), every row is drawn and the device chooses the count.
RuleResult signedDrawPrefix(Node *node, Rep &x, RuleContext &rc) {
  Value *end = node->input(3);
  std::optional<RuleContext::SignGuard> sign = rc.signGuard(end, node);
  Value *bound = rc.upper(x.range);
  if (!bound || (!sign && !(rc.lifted(end) && is(node, "aten::slice"))))
    return RuleResult::declined();
  Value *count = rc.prefixCount(x.value, end, sign, node);
  Value *top = !sign ? bound
                     : emitIf(
                           rc.graph, sign->nonNegative, node,
                           [&] {
                             return rc.hostOp("prim::min", sign->whenNegative,
                                              bound, node);
                           },
                           [&] { return bound; });
  return drawnPrefix(node, x, bound, top, count, rc);
}

/// randperm(n)[:k]: the first min(k, n) of a random order of range(n), the
/// entries below n of one of range(bound(n)).
RuleResult drawPrefix(Node *node, RuleContext &rc) {
  Rep *x = rc.rep(node->input(0));
  if (!x || x->kind != Rep::Kind::RandPerm)
    return RuleResult::notApplicable();
  Value *end = node->input(3);
  if (!isRowPrefix(node) || end->mustBeNone())
    return RuleResult::declined();
  std::optional<Range> k = rc.length(end);
  if (!k)
    return signedDrawPrefix(node, *x, rc);
  Value *bound = rc.upper(x->range);
  Value *hi = rc.upper(*k);
  // A prefix of a small constant length (a sampler's `sub_sample`) is
  // padded to that length even where the draw holds fewer entries: its
  // shape is then static, and the host arithmetic on the input's size that
  // min(k, bound) needs, and every size derived from it, folds away. The
  // padding this costs is at most kStaticPrefixRows rows of a vector.
  constexpr int64_t kStaticPrefixRows = 4096;
  std::optional<int64_t> constantTop = hi ? constantInt(hi) : std::nullopt;
  Value *top = !hi ? bound
               : constantTop && *constantTop <= kStaticPrefixRows
                   ? rc.constant(*constantTop)
                   : rc.hostOp("prim::min", hi, bound, node);
  return drawnPrefix(node, *x, bound, top, rc.minCount(x->value, end, node),
                     rc);
}

/// randint(low, high, size) of a lifted high the ranges keep above the
/// constant low: random_below, the same distribution on high's device
/// (intDraw: a device given, or a draw read only as host numbers).
RuleResult drawBelow(Node *node, RuleContext &rc) {
  std::optional<IntDraw> draw = intDraw(node);
  if (!draw)
    return RuleResult::declined();
  Rep *high = rc.lifted(node->input(draw->highOffset));
  for (size_t i = 0; i < node->inputs().size(); ++i)
    if (i != draw->highOffset && rc.rep(node->input(i)))
      return RuleResult::declined();
  if (!high || !high->range.lo || *high->range.lo <= draw->low)
    return RuleResult::declined(
        "randint's high is not provably above its low: it may raise");
  Value *drawn = insertRandomBelow(rc.graph, draw->low, high->value,
                                   draw->size, draw->dtype, draw->device, node);
  rc.replaceStatic(node->output(), drawn);
  return RuleResult::applied();
}

} // namespace

void addRandomRules(std::vector<BoundRule> &rules) {
  using On = BoundRule::On;
  rules.push_back({"randperm", On::Use, ops({"aten::randperm"}), randperm});
  rules.push_back({"draw-below", On::Use, ops({"aten::randint"}), drawBelow});
  rules.push_back(
      {"draw-prefix", On::Use, ops({"aten::slice", "aten::narrow"}),
       drawPrefix});
}

} // namespace staticify::bound
