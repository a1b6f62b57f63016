//===- GraphUtils.h - Small helpers the rewriting passes share ------------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <string>
#include <string_view>
#include <vector>

namespace staticify {

/// Inserts \p op at the graph's insertion point, matching its schema, with
/// the source range of \p anchor so that diagnostics keep pointing at the
/// user's line.
torch::jit::Value *emit(torch::jit::Graph &graph, const char *op,
                        std::vector<torch::jit::NamedValue> args,
                        const torch::jit::Node *anchor,
                        std::vector<torch::jit::NamedValue> kwargs = {});

/// Whether an op named \p op (a qualified name) is registered in this
/// process: a runtime library's kernel is only once the library is loaded.
bool opRegistered(const char *op);

/// The two results of a two-result op emitted with `emit` (which packs
/// them in a tuple): the tuple's inputs, or an unpack of it.
std::pair<torch::jit::Value *, torch::jit::Value *>
unpackPair(torch::jit::Graph &graph, torch::jit::Value *tuple);

/// Clones \p nodes (in order) at the insertion point, or
/// right after each original with \p afterOriginals, reading \p map's
/// values for the originals' and adding the clones' results to it.
void cloneNodes(torch::jit::Graph &graph,
                const std::vector<torch::jit::Node *> &nodes,
                std::unordered_map<torch::jit::Value *, torch::jit::Value *> &map,
                bool afterOriginals);

/// The default dtype at run time (`torch.get_default_dtype()`, which
/// TorchScript's torch.tensor makes a float in first): an empty tensor's.
torch::jit::Value *emitDefaultDType(torch::jit::Graph &graph,
                                    const torch::jit::Node *anchor);

/// `then() if cond else otherwise()` for a host bool \p cond and one result
/// (a tensor, or a host number of one type in both): the branches are
/// emitted in their blocks. Used for choices on
/// facts known on the host (a rank, a dtype, a device): no sync.
torch::jit::Value *
emitIf(torch::jit::Graph &graph, torch::jit::Value *cond,
       const torch::jit::Node *anchor,
       const std::function<torch::jit::Value *()> &then,
       const std::function<torch::jit::Value *()> &otherwise);

/// emitIf with \p results results per branch.
std::vector<torch::jit::Value *> emitIf(
    torch::jit::Graph &graph, torch::jit::Value *cond,
    const torch::jit::Node *anchor, size_t results,
    const std::function<std::vector<torch::jit::Value *>()> &then,
    const std::function<std::vector<torch::jit::Value *>()> &otherwise);

/// Whether \p block only leads to an exception: one of its own nodes raises
/// (what follows the raise never runs; what precedes it runs only on the
/// way to the error: the message's sizes and values).
bool onlyRaises(const torch::jit::Block *block);

/// Whether \p block only warns: it issues a warning (aten::warn), returns
/// nothing, and has no other effect (the functional losses' `if not
/// (target.size() == input.size()): warnings.warn(...)`). Like a branch
/// that only raises, it runs only on the way to its message, and what it
/// reads for the message (the sizes) is read only then.
bool onlyWarns(const torch::jit::Block *block);

/// Whether \p node sits in one of \p owner's blocks, at any depth.
bool insideOf(const torch::jit::Node *node, const torch::jit::Node *owner);
/// Whether \p node sits in \p block, at any depth.
bool insideOf(const torch::jit::Node *node, const torch::jit::Block *block);

/// Whether only the graph's own return takes \p v (a tuple it returns):
/// nothing in the graph reads or writes it after.
bool returnedOnly(const torch::jit::Value *v);

/// Whether \p block is a guard's fallback: the second block of an if with
/// guardAttr().
bool isGuardFallback(const torch::jit::Block *block);

/// Whether \p node sits in a guard's fallback, at any depth.
bool inGuardFallback(const torch::jit::Node *node);

/// Names the first result of every guard of \p graph after its kind
/// (`staticify_guard`, `staticify_guard_bound`): TorchScript saves no node
/// attribute, but its printer keeps a result's name as the variable's, so
/// that a saved output analysed again knows its guards.
void nameGuards(torch::jit::Graph &graph);

/// Gives guardAttr() back to the ifs of a loaded \p graph that nameGuards
/// named (an if inside a guard's branch that yields the guard's result
/// under its name is no guard of its own).
void recoverGuards(torch::jit::Graph &graph);

/// Whether \p v is a tensor (by its TorchScript type).
bool isTensor(const torch::jit::Value *v);

/// Whether \p v is undefined (prim::Uninitialized): a branch's value where
/// the program returned early or broke out, never read there.
bool isUndefined(const torch::jit::Value *v);

/// Whether values of \p type may carry a tensor (lists, tuples, optionals).
bool carriesTensor(const c10::TypePtr &type);

/// The constant int of \p v, if it is one.
std::optional<int64_t> constantInt(const torch::jit::Value *v);
/// The constant bool of \p v, if it is one.
std::optional<bool> constantBool(const torch::jit::Value *v);
/// The constant string of \p v, if it is one.
std::optional<std::string> constantString(const torch::jit::Value *v);
/// The constant int list of \p v, if it is one (a constant, or a list of
/// constant ints).
std::optional<std::vector<int64_t>> constantIntList(const torch::jit::Value *v);
/// The dims a constant `dim` argument names: its list, or its one int.
std::optional<std::vector<int64_t>> constantDims(const torch::jit::Value *v);

/// The index of \p node's input named \p name in its schema, if any.
std::optional<size_t> inputIndex(const torch::jit::Node *node,
                                 std::string_view name);

/// The input of \p node named \p name in its schema, if any.
torch::jit::Value *namedInput(const torch::jit::Node *node,
                              std::string_view name);

/// Destroys \p node if none of its outputs is used and it has no side
/// effects, logging it as rewritten by \p rule; then does the same for the
/// producers of its inputs. Returns how many nodes were destroyed.
size_t eraseIfDead(torch::jit::Node *node, PassContext &ctx,
                   std::string_view rule);

/// Erases every node of \p graph (nested blocks included) whose results are
/// unused and that has no side effects, logging each as rewritten by \p rule.
size_t eraseDeadNodes(torch::jit::Graph &graph, PassContext &ctx,
                      std::string_view rule);

/// What is dead in a graph: the nodes eraseDeadNodes would erase if the
/// nodes in `alsoDead` were gone (writers a rewrite replaced), and those.
/// A rewrite under a GraphCheckpoint leaves them in place until it is kept.
struct DeadNodes {
  /// Every dead node, `alsoDead` included.
  std::unordered_set<const torch::jit::Node *> all;
  /// The erasable ones (`alsoDead` excluded), consumers before producers.
  std::vector<torch::jit::Node *> order;
};
DeadNodes findDeadNodes(torch::jit::Graph &graph,
                        const std::vector<torch::jit::Node *> &alsoDead);

/// Destroys \p order (consumers first, as DeadNodes::order), logging each
/// as rewritten by \p rule. Returns how many.
size_t eraseNodes(const std::vector<torch::jit::Node *> &order,
                  PassContext &ctx, std::string_view rule);

/// libtorch's ConstantPropagation, with the same result, but without its
/// alias analysis where no node needs it: the nodes of immutable types are
/// folded first (ConstantPropagationImmutableTypes), and the full pass runs
/// only if a node with constant inputs and a mutable input or result (a
/// tensor, a list) is left. An alias analysis of a large graph costs more
/// than everything else normalize does. Returns whether the graph changed;
/// \p nodesAfter, when given, receives the graph's nodes afterwards
/// (collectNodes).
bool propagateConstants(std::shared_ptr<torch::jit::Graph> &graph,
                        std::vector<torch::jit::Node *> *nodesAfter = nullptr);

/// libtorch's EliminateDeadCode, with the same result: the pure dead nodes
/// go first without an alias analysis, and libtorch's pass (which builds
/// one) runs only if something it might remove is left: a node with unused
/// results that may write to memory, or an if or loop with an unused result.
/// Returns whether it removed anything. \p snapshot, when given, is the
/// graph's nodes as they are (collectNodes), which saves walking it.
bool eliminateDeadCode(
    std::shared_ptr<torch::jit::Graph> &graph,
    const std::vector<torch::jit::Node *> *snapshot = nullptr);

/// Whether \p a and \p b provably hold the same value: the same value,
/// equal constants, or the same deterministic op (no blocks, no writes, no
/// side effects) on inputs that provably hold the same values and that
/// nothing writes (`valid > 0` computed twice). Looks \p depth producers up.
bool computesSameValue(const torch::jit::Value *a, const torch::jit::Value *b,
                       const Aliases &aliases, int depth = 4);

/// Whether a node of \p graph other than \p except writes to (an alias of)
/// \p v. libtorch's alias analysis counts a write to a graph input as a
/// possible write to anything stored in a list (an index list, say); a
/// rewrite replacing the writer itself must not count its own write.
bool writtenByOthers(torch::jit::Graph &graph,
                     const Aliases &aliases,
                     const torch::jit::Value *v,
                     const torch::jit::Node *except);

/// The attribute path from the graph's `self` (its first input) to \p v,
/// or nullopt when \p v is not reached from `self` by attribute reads.
std::optional<std::vector<std::string>>
modulePath(const torch::jit::Graph &graph, const torch::jit::Value *v);

/// The nodes a rule inserts right before \p anchor (where WithInsertPoint
/// puts them). rollback() destroys them, last first, so that a rule that
/// finds out late that it does not apply leaves no half rewrite behind
/// (staticify-opt --verify-each catches one that does).
class InsertedBefore {
public:
  explicit InsertedBefore(torch::jit::Node *anchor)
      : anchor(anchor), before(anchor->prev()) {}
  void rollback() {
    for (torch::jit::Node *n = anchor->prev(); n != before;) {
      torch::jit::Node *prev = n->prev();
      n->destroy();
      n = prev;
    }
  }

private:
  torch::jit::Node *anchor, *before;
};

/// Makes \p dst a copy of \p src (inputs, nodes, outputs) in place, for a
/// graph others hold (a method's): what a failed or unwanted rewrite of
/// \p dst restores from a copy taken before.
void replaceGraphContents(torch::jit::Graph &dst, const torch::jit::Graph &src);

/// Each node of \p from and its counterpart in \p to, a copy of it
/// (Graph::copy, replaceGraphContents): the same nodes in the same order.
/// Throws std::logic_error when the two differ.
std::unordered_map<const torch::jit::Node *, torch::jit::Node *>
correspondingNodes(const torch::jit::Graph &from, torch::jit::Graph &to);

/// Nodes of \p block and its nested blocks, in program order: a snapshot to
/// walk while mutating.
std::vector<torch::jit::Node *> collectNodes(torch::jit::Block *block);

/// A map from nodes to indices, built once and then only read: a sorted
/// flat array (one allocation, binary search), where a hash map would
/// allocate per node, which dominated partitioning a 120k-node graph.
class NodeIndex {
public:
  NodeIndex() = default;
  /// Takes (node, index) pairs in any order; a node appears once.
  explicit NodeIndex(
      std::vector<std::pair<const torch::jit::Node *, size_t>> entries);
  /// The index of \p node, or nullopt.
  std::optional<size_t> find(const torch::jit::Node *node) const;

private:
  std::vector<std::pair<const torch::jit::Node *, size_t>> entries_;
};

/// Counts every node of \p block, nested blocks included.
size_t countNodes(const torch::jit::Block *block);
/// \p node and every node nested in its blocks.
size_t countNodes(const torch::jit::Node *node);

} // namespace staticify
