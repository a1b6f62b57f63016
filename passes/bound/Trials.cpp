//===- Trials.cpp - What the bound pass's trials weigh --------------------===//

#include "passes/bound/Trials.h"

#include "passes/Partition.h"
#include "passes/bound/Rules.h"

#include <algorithm>
#include <map>

namespace staticify::bound {

using torch::jit::Graph;
using torch::jit::Node;

bool isDead(const Node *node, const std::unordered_set<const Node *> &dead) {
  for (; node; node = node->owningBlock()->owningNode())
    if (dead.count(node))
      return true;
  return false;
}

size_t liveSyncPoints(const AnalysisResult &analysis,
                      const std::unordered_set<const Node *> &dead) {
  size_t n = 0;
  for (size_t i = 0; i < analysis.findings.size(); ++i)
    n += analysis.findings[i].role == Role::Root &&
         !isDead(analysis.findingNodes[i], dead);
  return n;
}

std::string materializationSummary(const AnalysisResult &analysis,
                                   const PassContext &ctx,
                                   const std::unordered_set<const Node *> &dead) {
  std::map<std::string, size_t> count;
  for (size_t i = 0; i < analysis.findings.size(); ++i) {
    const Node *node = analysis.findingNodes[i];
    if (analysis.findings[i].role != Role::Root || ctx.isTracked(node) ||
        isDead(node, dead))
      continue;
    std::string why = ctx.reasonForNewNode(node);
    size_t quote = why.find('\'');
    size_t end = quote == std::string::npos ? quote : why.find('\'', quote + 1);
    if (end != std::string::npos)
      ++count[why.substr(quote, end - quote + 1)];
    else if (why.find("returned") != std::string::npos)
      ++count["returned"];
    else if (!why.empty())
      ++count["leaving a loop or an if"];
  }
  std::vector<std::pair<std::string, size_t>> sorted(count.begin(), count.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto &a, const auto &b) { return a.second > b.second; });
  std::string text = "uses with no bounded form materialize";
  for (size_t k = 0; k < sorted.size() && k < 5; ++k)
    text += (k ? ", " : ": ") + sorted[k].first + " " +
            std::to_string(sorted[k].second);
  if (sorted.size() > 5)
    text += ", ...";
  return text;
}

std::vector<std::vector<Node *>> rootsByIsland(Graph &graph,
                                               const AnalysisResult &analysis) {
  PartitionResult partition = partitionGraph(graph, analysis);
  std::map<size_t, std::vector<Node *>> bySegment;
  for (size_t i = 0; i < analysis.findings.size(); ++i) {
    if (analysis.findings[i].role != Role::Root)
      continue;
    Node *node = const_cast<Node *>(analysis.findingNodes[i]);
    std::optional<size_t> seg =
        partition.segmentOf.find(topLevel(node, graph.block()));
    bySegment[seg.value_or(SIZE_MAX)].push_back(node);
  }
  std::vector<std::vector<Node *>> islands;
  for (auto &[segment, nodes] : bySegment)
    islands.push_back(std::move(nodes));
  return islands;
}

void declineAll(PassContext &ctx, const std::vector<Node *> &roots,
                const std::string &why) {
  for (const Node *node : roots)
    ctx.declined(node, kRule, why);
}

} // namespace staticify::bound
