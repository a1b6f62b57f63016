//===- DetectionRules.cpp - Detection ops as bounded values ---------------===//
//
//   torchvision::nms(boxes, scores, t)   -> bounded indices: the `nms` form
//   of static boxes, or of bounded       (IoU matrix + greedy walk of host-
//   boxes and scores of one count        static trip count), or with
//                                        --runtime-ops the runtime's kernel
//                                        staticify::nms_padded
//   staticify::nms_padded or            -> the kernel with their count:
//   nms_kept_mask(boxes, scores, t, None,  indices or mask bounded by that
//   classes) of bounded boxes, scores and  count (batched_nms's per-class
//   classes of one count                   loop, as batched-nms left it)
//
// Left alone: boxes and scores of different selections, a threshold read
// from data, selected rows inside a loop of data-dependent trips (each
// iteration would walk the whole bound; batched_nms's per-class loop is the
// batched-nms pass's, passes/BatchedNms.h), and inside any loop without the
// runtime's kernel (the form's walk per iteration). batched_nms's coordinate trick is elementwise
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

/// The loops around \p node: whether there is one, and whether one of
/// them runs a number of times read from data (batched_nms's loop over
/// `unique(labels)`).
struct Loops {
  bool any = false;
  bool dataTrips = false;
};
Loops enclosingLoops(const Node *node, RuleContext &rc) {
  Loops loops;
  for (const Node *n = node->owningBlock()->owningNode(); n;
       n = n->owningBlock()->owningNode())
    if (n->kind() == c10::prim::Loop) {
      loops.any = true;
      loops.dataTrips |= rc.analysis.info(n->input(0)).isDataDependent();
    }
  return loops;
}

/// Why NMS of \p node's boxes and scores (bounded \p b and \p s, or both
/// null) cannot run on their padded rows; empty where it can.
std::string whyNotOnPaddedRows(Node *node, Rep *b, Rep *s, RuleContext &rc) {
  if (rc.rep(node->input(2)))
    return "its IoU threshold is read from data";
  if (b || s) {
    // Row i of the boxes must be row i of the scores: one count.
    if (!b || !s || !rc.sameCount(b->count, s->count))
      return "its boxes and scores are not rows of one selection";
    // Padded rows are as many as the bound, not the count: in a loop of
    // data-dependent trips (the per-class loop of batched_nms, whose bound
    // is every class's boxes) the walk would cost the bound squared per
    // iteration. A loop of host-static trips (per image, as every
    // torchvision detector's postprocess runs) takes the kernel; the
    // form's N-step walk per image made Faster R-CNN 17x slower.
    Loops loops = enclosingLoops(node, rc);
    if (loops.dataTrips)
      return "inside a loop of data-dependent trips, NMS over padded rows "
             "would cost the padded size squared per iteration";
    if (loops.any && !(rc.ctx.options.runtimeOps && opRegistered(kNmsKernel)))
      return "inside a loop, the TorchScript form walks every padded row per "
             "iteration (--runtime-ops uses the kernel)";
  }
  return "";
}

RuleResult nms(Node *node, RuleContext &rc) {
  if (node->inputs().size() != 3)
    return RuleResult::notApplicable();
  Value *boxes = node->input(0), *scores = node->input(1);
  Value *threshold = node->input(2);
  Rep *b = rc.rep(boxes), *s = rc.rep(scores);
  if ((b && b->kind != Rep::Kind::Bounded) ||
      (s && s->kind != Rep::Kind::Bounded))
    return RuleResult::declined();
  if (std::string why = whyNotOnPaddedRows(node, b, s, rc); !why.empty())
    return RuleResult::declined(why);
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

/// The runtime's kernels as the batched-nms pass emits them for
/// batched_nms's per-class loop (no count, classes given), on bounded boxes,
/// scores and classes of one count: the kernel takes the count. Rows from
/// the count on take no part, so the first count rows of the kept mask are
/// the mask the original made, and the rest are false; nms_padded's indices
/// are padded to the boxes' rows either way, with the first kept index (the
/// best-scoring valid row) where nothing is kept, so the first count rows
/// are again the original's. Either result is bounded by the boxes' count;
/// the number nms_padded keeps is the kernel's, static.
RuleResult nmsKernel(Node *node, RuleContext &rc) {
  if (node->inputs().size() != 5 || !node->input(3)->mustBeNone())
    return RuleResult::notApplicable();
  Rep *b = rc.bounded(node->input(0)), *s = rc.bounded(node->input(1));
  Value *classes = node->input(4);
  Rep *c = rc.bounded(classes);
  if (!b || !s || (rc.rep(classes) && !c) ||
      (!c && !classes->mustBeNone()))
    return RuleResult::declined();
  if (std::string why = whyNotOnPaddedRows(node, b, s, rc); !why.empty())
    return RuleResult::declined(why);
  if (c && !rc.sameCount(c->count, b->count))
    return RuleResult::declined(
        "its classes are not rows of its boxes' selection");
  Node *onPadded = rc.graph.insertNode(rc.graph.create(
      node->kind(),
      {b->value, s->value, node->input(2), b->count, c ? c->value : classes},
      node->outputs().size()));
  onPadded->setSourceRange(node->sourceRange());
  for (size_t i = 0; i < node->outputs().size(); ++i)
    onPadded->output(i)->setType(node->output(i)->type());
  bool isIndex = node->kind() == c10::Symbol::fromQualString(kNmsKernel);
  rc.setBounded(node->output(0), onPadded->output(0), b->count, isIndex,
                /*is1D=*/true);
  if (isIndex)
    rc.replaceStatic(node->output(1), onPadded->output(1));
  return RuleResult::applied();
}

} // namespace

void addDetectionRules(std::vector<BoundRule> &rules) {
  using On = BoundRule::On;
  rules.push_back({"nms", On::Root, ops({"torchvision::nms"}), nms});
  rules.push_back({"nms-of-selection", On::Use, ops({"torchvision::nms"}), nms});
  rules.push_back({"nms-kernel-of-selection", On::Use,
                   ops({kNmsKernel, kNmsMaskKernel}), nmsKernel});
}

} // namespace staticify::bound
