//===- DetectionRules.cpp - Detection ops as bounded values ---------------===//
//
//   torchvision::nms(boxes, scores, t)   -> bounded indices: the `nms` form
//   of static boxes, or of bounded       (IoU matrix + greedy walk of host-
//   boxes and scores of one count        static trip count), or with
//                                        --runtime-ops the runtime's kernel
//                                        staticify::nms_padded
//
// Left alone: boxes and scores of different selections, a threshold read
// from data, and selected rows inside a loop (each iteration would walk the
// whole bound; batched_nms's per-class loop is the batched-nms pass's,
// passes/BatchedNms.h). batched_nms's coordinate trick is elementwise
// arithmetic and one nms: its nms takes this rule.
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Rules.h"

#include "passes/BoundedForms.h"
#include "passes/GraphUtils.h"

namespace staticify::bound {

using torch::jit::Node;
using torch::jit::Value;

namespace {

bool insideLoop(const Node *node) {
  for (const Node *n = node->owningBlock()->owningNode(); n;
       n = n->owningBlock()->owningNode())
    if (n->kind() == c10::prim::Loop)
      return true;
  return false;
}

RuleResult nms(Node *node, RuleContext &rc) {
  if (node->inputs().size() != 3)
    return RuleResult::notApplicable();
  Value *boxes = node->input(0), *scores = node->input(1);
  Value *threshold = node->input(2);
  if (rc.rep(threshold))
    return RuleResult::declined("its IoU threshold is read from data");
  Rep *b = rc.rep(boxes), *s = rc.rep(scores);
  if ((b && b->kind != Rep::Kind::Bounded) ||
      (s && s->kind != Rep::Kind::Bounded))
    return RuleResult::declined();
  if (b || s) {
    // Row i of the boxes must be row i of the scores: one count.
    if (!b || !s || !rc.sameCount(b->count, s->count))
      return RuleResult::declined(
          "its boxes and scores are not rows of one selection");
    // Padded rows are as many as the bound, not the count: in a loop (the
    // per-class loop of batched_nms, whose bound is every class's boxes)
    // the walk would cost the bound squared per iteration.
    if (insideLoop(node))
      return RuleResult::declined(
          "inside a loop, NMS over padded rows would cost the padded size "
          "squared per iteration");
  }
  Value *count = b ? b->count : rc.none();
  if (b) {
    boxes = b->value;
    scores = s->value;
  }
  Value *indices, *kept;
  if (rc.ctx.options.runtimeOps && opRegistered(kNmsKernel)) {
    std::tie(indices, kept) = unpackPair(
        rc.graph,
        emit(rc.graph, kNmsKernel, {boxes, scores, threshold, count}, node));
  } else {
    auto outs = insertForm(rc.graph, "nms",
                           {boxes, scores, threshold, count, rc.none()}, node);
    indices = outs[0];
    kept = outs[1];
  }
  rc.setBounded(node->output(), indices, kept, /*isIndex=*/true,
                /*is1D=*/true);
  return RuleResult::applied();
}

} // namespace

void addDetectionRules(std::vector<BoundRule> &rules) {
  using On = BoundRule::On;
  rules.push_back({"nms", On::Root, ops({"torchvision::nms"}), nms});
  rules.push_back({"nms-of-selection", On::Use, ops({"torchvision::nms"}), nms});
}

} // namespace staticify::bound
