//===- PassContext.h - What a rewriting pass reports back -----------------===//
//
// Rewrites record, for the report, which findings they removed (`rewrote`,
// called while the node is still alive) and why they left one alone
// (`declined`). Findings are keyed by the node the analysis found them on.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Analysis.h"

#include <torch/csrc/jit/ir/alias_analysis.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace staticify {

struct PassOptions {
  /// if-convert: drop branches that only raise on data (data asserts).
  bool dropDataAsserts = false;
  /// lift-scalars: a loop that stops on data runs on to its bound with an
  /// active mask (no read of the device, every iteration's work done).
  bool staticLoops = false;
  /// bound: upper bounds the user supplies (`--bound NAME=N`), for a source
  /// variable NAME or for the values computed on line `FILE:LINE`.
  std::vector<std::pair<std::string, int64_t>> bounds;
  /// bound: a bounded graph output is returned as `(padded, count)` instead
  /// of being cut to its count (which reads count on the host).
  bool paddedOutputs = false;
  /// The pipeline's last word keeps a rewritten method that reaches the
  /// host at as many points as before though it runs more ops: its static
  /// regions are what the caller wants (--outline, --cuda-graphs, --lower,
  /// --padded-outputs). Otherwise such a method is left as it was.
  bool keepEqualSyncRewrites = false;
  /// After the passes, equal ops a rewrite emitted (reads of one count
  /// included) are merged, as TorchScript's executor would merge them
  /// (staticify; staticify-opt with --as-staticify).
  bool mergeAfterRewrites = true;
  /// bound: where a rewrite has a kernel in the runtime library
  /// (staticify::nms_padded), emit it instead of its TorchScript form, when
  /// that library is loaded. The output then needs it loaded too.
  bool runtimeOps = false;
  /// The pipeline renders the final graph's partition as DOT (--dot).
  bool renderDot = false;
  /// After every pass, lint the graph and check that a pass reporting no
  /// change left it as it was (staticify-opt --verify-each; every lit test).
  bool verifyEach = false;
  /// specialize-training: the saved `training` flag of the submodule at an
  /// attribute path from `self` ({} is the module itself), or nullopt when
  /// there is none. Empty: the pass does nothing.
  std::function<std::optional<bool>(const std::vector<std::string> &)>
      savedTraining;
  /// normalize: the dtype and rank of the tensor attribute at an attribute
  /// path from `self` (the last name the tensor's), or nullopt where there
  /// is none or a method of the module stores to that attribute (they may
  /// then change). A buffer's dtype and rank are facts of the model, as
  /// torch.jit.freeze takes its value to be. Empty: no attribute has known
  /// ones.
  struct TensorFacts {
    c10::ScalarType dtype;
    int64_t rank;
  };
  std::function<std::optional<TensorFacts>(const std::vector<std::string> &)>
      attributeFacts;
  /// assume-none: Optional arguments, by name, that callers never pass.
  std::vector<std::string> assumeNone;
};

/// What the passes ask about writes and aliasing: libtorch's alias database,
/// built only for a graph in which some node may write. Most graphs the
/// passes see have none (no in-place op, no attribute store, no call left),
/// and there every value is unwritten: the answers need no database, whose
/// construction is the costliest step of several passes on large graphs.
class Aliases {
public:
  /// \p nodes, when given, are every node of \p graph (an analysis's
  /// census): looking for a writer through them saves walking the graph.
  explicit Aliases(std::shared_ptr<torch::jit::Graph> graph,
                   const std::vector<torch::jit::Node *> *nodes = nullptr);

  /// Whether a node may write to \p v's memory.
  bool hasWriters(const torch::jit::Value *v) const;
  /// For a tensor an op made afresh, whether a node other than \p except
  /// writes to its memory, followed through the values that alias it;
  /// nullopt for another value, or a use this does not model.
  static std::optional<bool> writtenAfresh(const torch::jit::Value *v,
                                           const torch::jit::Node *except);
  /// Whether \p v is a tensor made afresh whose memory nothing but \p v
  /// itself reaches after \p point (no view, container or read out of one
  /// made before it and used after it): a write there may then be a new
  /// value that the uses of \p v after it read instead.
  static bool onlyItselfReadAfter(const torch::jit::Value *v,
                                  const torch::jit::Node *point);
  /// Whether \p node writes to memory that a value in \p values may use.
  bool writesToAlias(torch::jit::Node *node,
                     const torch::jit::ValueSet &values) const {
    return anyWriter && db().writesToAlias(node, values);
  }
  /// Whether \p a and \p b may share memory.
  bool mayAlias(const torch::jit::Value *a, const torch::jit::Value *b) const {
    return db().mayAlias(a, b);
  }
  /// Whether a node of the graph may write (as libtorch's alias analysis
  /// sees it: a write in its schema, a conservatively modelled op, an
  /// attribute store, a call).
  static bool mayWrite(const torch::jit::Node *node);

private:
  const torch::jit::AliasDb &db() const;
  std::shared_ptr<torch::jit::Graph> graph;
  bool anyWriter;
  mutable std::unique_ptr<torch::jit::AliasDb> db_;
};

/// Facts about the graph the passes work on, computed on first request and
/// kept until a pass changes the graph: a pass that only looks (most passes,
/// on most graphs) costs no analysis and no alias database of its own.
/// The pipeline invalidates after every pass that reports a change; a pass
/// that changes the graph and then asks again invalidates first.
class FactCache {
public:
  FactCache() = default;
  /// A copy starts empty: facts belong to one graph object.
  FactCache(const FactCache &) {}
  FactCache &operator=(const FactCache &) {
    invalidate();
    return *this;
  }

  /// The value classes and findings of \p graph (analyzeGraph), at least
  /// at Detail::Facts.
  const AnalysisResult &analysis(const std::shared_ptr<torch::jit::Graph> &graph);
  /// What may write or alias in \p graph.
  const Aliases &aliases(const std::shared_ptr<torch::jit::Graph> &graph);
  /// The cached analysis of \p graph at \p detail or more, shared
  /// (computed if needed).
  std::shared_ptr<const AnalysisResult>
  sharedAnalysis(const std::shared_ptr<torch::jit::Graph> &graph,
                 Detail detail = Detail::Facts);
  void invalidate();

private:
  void check(const torch::jit::Graph *graph);
  const torch::jit::Graph *graph_ = nullptr;
  std::shared_ptr<const AnalysisResult> analysis_;
  std::unique_ptr<Aliases> aliases_;
};

class PassContext {
public:
  PassOptions options;
  /// Analysis facts of the current graph, shared by the passes.
  FactCache facts;
  /// How many data-dependent ops the graph had when normalize first ran
  /// (the pipeline replaces a method when normalization erased dead ones),
  /// counted when countDynamicOpsAtNormalize.
  std::optional<size_t> dynamicOpsAtNormalize;
  bool countDynamicOpsAtNormalize = true;

  /// Re-keys everything recorded per node through \p map (old node -> its
  /// counterpart), for a context that moves to a copy of its graph.
  void remapNodes(
      const std::unordered_map<const torch::jit::Node *, torch::jit::Node *>
          &map);

  /// Starts tracking the findings of \p analysis (the graph before rewrites).
  void track(const AnalysisResult &analysis);

  /// \p node is about to disappear because \p rule rewrote it.
  void rewrote(const torch::jit::Node *node, std::string_view rule);
  /// \p rule left \p node alone for \p reason. The last rule to decline a
  /// node is the one the report names.
  void declined(const torch::jit::Node *node, std::string_view rule,
                std::string_view reason);

  /// Whether \p node is a node the "before" analysis found (and that no rule
  /// has rewritten): an "after" finding on any other node was introduced by a
  /// rewrite.
  bool isTracked(const torch::jit::Node *node) const {
    return findingOf.count(node) != 0;
  }
  /// Whether a rule said why it left \p node alone.
  bool explained(const torch::jit::Node *node) const;
  /// Why a rule left \p node (a node a rewrite created) alone, or "".
  std::string reasonForNewNode(const torch::jit::Node *node) const;

  /// finding id -> rule that rewrote it.
  const std::unordered_map<size_t, std::string> &rewritten() const {
    return rewrittenBy;
  }
  /// finding id -> "rule: reason" for findings a rule declined.
  const std::unordered_map<size_t, std::string> &reasons() const {
    return declinedBecause;
  }

private:
  std::unordered_map<const torch::jit::Node *, size_t> findingOf;
  std::unordered_map<size_t, std::string> rewrittenBy;
  std::unordered_map<size_t, std::string> declinedBecause;
  std::unordered_map<const torch::jit::Node *, std::string> newNodeReasons;
};

} // namespace staticify
