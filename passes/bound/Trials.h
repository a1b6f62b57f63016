//===- Trials.h - What the bound pass's trials weigh ----------------------===//
//
// bound (Driver.cpp) rewrites each dynamic island of a graph in a trial,
// kept only where the rewrite policy allows it: these are the facts a
// trial is weighed and reported by.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Analysis.h"
#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <unordered_set>
#include <vector>

namespace staticify::bound {

/// Whether \p node is in \p dead or in a block of a node that is.
bool isDead(const torch::jit::Node *node,
            const std::unordered_set<const torch::jit::Node *> &dead);

/// The sync points of \p analysis on live nodes (not in \p dead).
size_t liveSyncPoints(const AnalysisResult &analysis,
                      const std::unordered_set<const torch::jit::Node *> &dead);

/// What the syncs a rewrite introduced are, most frequent first: "uses
/// with no bounded form materialize: 'torchvision::nms' 4, returned 2, ...".
std::string
materializationSummary(const AnalysisResult &analysis, const PassContext &ctx,
                       const std::unordered_set<const torch::jit::Node *> &dead);

/// The root findings of \p analysis grouped by the dynamic island of the
/// graph's partition they are in, islands in program order.
std::vector<std::vector<torch::jit::Node *>>
rootsByIsland(torch::jit::Graph &graph, const AnalysisResult &analysis);

/// \p why, as bound's reason, for each of \p roots.
void declineAll(PassContext &ctx, const std::vector<torch::jit::Node *> &roots,
                const std::string &why);

} // namespace staticify::bound
