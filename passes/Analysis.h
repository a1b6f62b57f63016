//===- Analysis.h - Classify every value as DESIGN §1 defines
//---------------===//
//
// A forward dataflow analysis over a TorchScript graph, nested blocks
// included. Every value gets a class (host-static, device data,
// data-dependent); every node that makes a value data-dependent becomes a
// Finding, located in the original Python source. Loops iterate to a fixpoint;
// the lattice has height 3, so each loop body is visited at most four times.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Finding.h"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace staticify {

/// DESIGN §1's value classes, ordered so that `max` is the join.
enum class ValueClass : uint8_t { HostStatic, DeviceData, DataDependent };

/// For a data-dependent tensor: which dimensions may depend on data.
/// `Leading`: only dimension 0 (nonzero, x[mask], randperm(n)...), which is
/// what a later gather by a static index makes static again.
enum class ShapeDep : uint8_t { Static, Leading, Dynamic };

/// Just enough dtype knowledge to tell a boolean mask from an index tensor:
/// `Other` is known and none of bool, uint8 and int64 (a float); `Numeric`
/// is neither bool nor uint8, so never a mask (int64 or a float: a sum, a
/// count, integer arithmetic on one).
enum class DTypeKind : uint8_t { Unknown, Bool, Byte, Long, Other, Numeric };

struct ValueInfo {
  ValueClass cls = ValueClass::HostStatic;
  ShapeDep shape = ShapeDep::Static;
  DTypeKind dtype = DTypeKind::Unknown;
  /// A tensor (or a list of tensors) that lives on the host, computed there
  /// from host-static values (`torch.tensor(image.shape[-2:])` and what is
  /// computed from it): reading it is not a device sync. Joined as "all".
  bool onHost = false;
  /// A list whose length depends on data (appended under a data-dependent
  /// condition or loop, split from a tensor of data-dependent shape...). A
  /// list's class says what its elements are: `[boxes[keep]]` holds a
  /// data-dependent tensor, yet its length, 1, is host-static. Joined as
  /// "any".
  bool dataLength = false;
  /// Up to kMaxRoots ids of the root findings this value derives from.
  static constexpr size_t kMaxRoots = 4;
  std::array<uint32_t, kMaxRoots> roots{};
  uint8_t numRoots = 0;

  bool isDataDependent() const { return cls == ValueClass::DataDependent; }
  void addRoot(uint32_t id);
  void addRootsOf(const ValueInfo &other);
  /// Least upper bound; returns whether this changed.
  bool join(const ValueInfo &other);
  bool operator==(const ValueInfo &o) const;
};

/// How much an analysis records about each finding: its class, cause and
/// message always; with Report also its source location, node text and
/// value name (what a report shows; the passes and the sync count do not
/// need them).
enum class Detail : uint8_t { Facts, Report };

struct AnalysisResult {
  Detail detail = Detail::Report;
  std::vector<Finding> findings;
  /// findingNodes[i] is the node findings[i] is about.
  std::vector<const torch::jit::Node *> findingNodes;
  std::unordered_map<const torch::jit::Value *, ValueInfo> values;
  size_t numNodes = 0;
  bool outputsStatic = true;
  /// Sync points in the fallback branches of guards (guardAttr()), which
  /// run only when the host facts they check do not hold: counted here,
  /// not as findings.
  size_t fallbackSyncPoints = 0;
  /// Sync points in branches that only raise (an error message that reads
  /// a size or a value): they run only on the way to an exception, so they
  /// are counted here, not as findings.
  size_t errorPathSyncPoints = 0;

  /// Every node, in program order (collectNodes' order), and the positions
  /// in `nodes` of each op's nodes: a pass asks for the nodes of the ops it
  /// rewrites (nodesWhere) instead of walking the whole graph. Handles to
  /// the analysed graph's nodes, valid while it is unchanged.
  std::vector<torch::jit::Node *> nodes;
  std::unordered_map<c10::Symbol, std::vector<uint32_t>> positionsOfOp;
  /// The positions in `nodes` of the graph's own block's nodes: a node and
  /// its blocks' nodes run from its position to the next.
  std::vector<uint32_t> topLevel;

  const ValueInfo &info(const torch::jit::Value *v) const;
  /// Whether the analysis saw \p v (a value a pass made since did not).
  bool knows(const torch::jit::Value *v) const { return values.count(v) > 0; }

  /// The nodes whose op satisfies \p wanted (asked once per op), in program
  /// order.
  template <typename Pred>
  std::vector<torch::jit::Node *> nodesWhere(Pred &&wanted) const {
    std::vector<uint32_t> positions;
    for (const auto &[op, at] : positionsOfOp)
      if (wanted(op))
        positions.insert(positions.end(), at.begin(), at.end());
    std::sort(positions.begin(), positions.end());
    std::vector<torch::jit::Node *> out;
    out.reserve(positions.size());
    for (uint32_t i : positions)
      out.push_back(nodes[i]);
    return out;
  }
};

/// The attribute of a `prim::If` that a rewrite inserted as a guard on host
/// facts: its first branch is the static form, taken when the facts it
/// checks hold (two operands' ranks agree, a rank is high enough, two
/// branch results have one shape, dtype and device); its second computes
/// what the original computed, with host reads. The analysis takes the
/// if's results from the first branch and counts the second's sync points
/// apart, in fallbackSyncPoints. (TorchScript does not save node
/// attributes: a saved model analysed again counts them.)
inline c10::Symbol guardAttr() { return c10::Symbol::attr("staticify_guard"); }

/// guardAttr()'s value on a guard whose facts hold only for some inputs: a
/// test of a data-dependent size decided by its bound, a host value
/// (`boxes.numel() > 4000` of boxes of at most 1,000 rows). Its fallback
/// reads the host wherever the bound is too large to decide (a model's
/// sizes, not a program's accident), so it counts as one sync point, at
/// the guard, and its own reads apart as other guards'.
constexpr int64_t kBoundGuard = 2;

/// guardAttr()'s value on a guard whose fallback may return tensors of
/// shapes from data (pinned-sizes' widths: a padding mask against a size of
/// 1 broadcasts to the count's width). The analysis counts it as any guard;
/// batching, which stacks a fallback's results row by row, refuses it.
constexpr int64_t kShapeGuard = 3;

/// Analyses \p graph (which is not modified).
AnalysisResult analyzeGraph(const torch::jit::Graph &graph,
                            Detail detail = Detail::Report);

/// Raises \p analysis, at Detail::Facts, to Detail::Report: what a report
/// shows of each finding (value name, source location, node text) is
/// filled in from its node, which is what analysing again at that detail
/// would give, without the analysis.
void addReportDetail(AnalysisResult &analysis);

/// Where data reaches the host: every root finding syncs (a nonzero, an
/// item(), a branch on data); what derives from one does not sync again.
/// The rewrites that could trade one sync for several compare this count.
size_t countSyncPoints(const AnalysisResult &analysis);

/// Where \p node came from, when TorchScript recorded it.
std::optional<Location> locationOf(const torch::jit::Node *node);

} // namespace staticify
