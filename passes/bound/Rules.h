//===- Rules.h - The bound pass's rules and the context they run in -------===//
//
// `bound` (passes/Bounded.h) is a conversion driver: one forward walk gives
// each value of the original graph a representation (`Rep`), and for each
// node the driver asks the rules registered for it, in registration order,
// until one answers. A rule is one function
//
//     RuleResult rule(Node *node, RuleContext &rc);
//
// that either does not match (`notApplicable()`: the next rule is asked),
// rewrites the node (`applied()`: the node's results have representations or
// static replacements, and the node is left to be erased when dead), or
// declines it (`declined(why)`: no other rule is asked; the reason, when
// there is one, goes into the report). What a rule inserted before the node
// is removed by the driver when the rule does not apply, so a rule may check
// late without leaving half a rewrite behind.
//
// Root rules see nodes whose inputs all keep their original computation
// (`nonzero(x)` of a graph input); use rules see nodes with at least one
// input that has a representation (`numel` of a bounded value). Rules live
// in files by family: roots (RootRules.cpp), host scalars (ScalarRules.cpp),
// indexing (IndexRules.cpp), per-row ops and reductions (RowRules.cpp),
// scans and order statistics (OrderRules.cpp),
// random draws (RandomRules.cpp) and detection ops, torchvision's included
// (DetectionRules.cpp). A rule for another library's op is registered with
// `registerBoundRule` before the pipeline runs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Analysis.h"
#include "passes/DictKeys.h"
#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace staticify::bound {

/// The rule name in the report.
constexpr const char *kRule = "bound";

/// The integer range of a host int: a constant lower bound, and an upper
/// bound that is a host int in the graph (a constant or an expression over
/// input sizes), with its constant value when it has one.
struct Range {
  std::optional<int64_t> lo;
  torch::jit::Value *hi = nullptr;
  std::optional<int64_t> hiConst;
};

/// What a value of the original graph has become.
struct Rep {
  enum class Kind {
    Lifted,    // a host scalar, now `value`: a 0-d tensor on the device
    Bounded,   // a tensor with a data-dependent leading dimension
    WhereList, // where(c) / nonzero_numpy(c): its elements are bounded
    RandPerm,  // randperm(n) whose one use is [:k], made a top-k there
    BoundedList, // a list of tensors built by appends (ListRules.cpp): its
                 // elements padded rows, their counts a list beside it
    SizeList,    // [x.size(0) for x in L] of a bounded list L: the list
                 // holds the padded sizes, `count` L's counts
  } kind;
  explicit Rep(Kind kind) : kind(kind) {}
  torch::jit::Value *value = nullptr; // Lifted: the tensor; Bounded: padded
                                      // rows; WhereList: c; RandPerm: n;
                                      // BoundedList, SizeList: the list
  torch::jit::Value *count = nullptr; // Bounded: valid rows, 0-d int64;
                                      // BoundedList, SizeList: the counts,
                                      // a Tensor[]
  torch::jit::Value *bound = nullptr; // Bounded: a host int for its rows,
                                      // when cheaper than the padded size
  Range range;          // Lifted ints; RandPerm: n's range
  bool isIndex = false; // Bounded (BoundedList: each element): holds int64
                        // indices
  bool is1D = false;    // Bounded (BoundedList: each element): a vector
                        // (numel is its count)
  // Bounded, where(c)[k]: c and k. Bounded, randperm(n)[:top]: n and top.
  torch::jit::Value *whereCond = nullptr;
  int64_t whereDim = 0;
  /// Bounded index: every valid index is in [0, this count) (where(c)[0]
  /// of a bounded c: c's count). WhereList: c's count, where c is bounded.
  torch::jit::Value *indexesBelow = nullptr;
  torch::jit::Value *drawOf = nullptr;
  torch::jit::Value *drawTop = nullptr;
  torch::jit::Node *origin = nullptr; // RandPerm: the randperm node
  /// Bounded x[m] (select_rows of a static x by an unwritten static mask):
  /// x and m. A top-k of it runs over x where m holds, with no compaction
  /// (RowRules.cpp, topOfSelection).
  torch::jit::Value *selectedFrom = nullptr;
  torch::jit::Value *selectedBy = nullptr;
  /// Bounded index into the rows of a selection by mask `selectedBy` (a
  /// top-k's indices): beside `value`, those rows' positions in the mask's
  /// elements. Rows of another selection by that mask (y[m][i], where(m)[k][i])
  /// are taken at the positions (IndexRules.cpp, gather).
  torch::jit::Value *atPositions = nullptr;
};

/// What a rule did with a node.
class RuleResult {
public:
  enum class Kind { NotApplicable, Applied, Declined };
  static RuleResult notApplicable() { return RuleResult(Kind::NotApplicable); }
  static RuleResult applied() { return RuleResult(Kind::Applied); }
  /// No other rule is asked. An empty \p why leaves the node unreported
  /// (its uses materialize, and say why there).
  static RuleResult declined(std::string why = "") {
    RuleResult r(Kind::Declined);
    r.why = std::move(why);
    return r;
  }
  /// Applied when \p ok, else not applicable: for rules whose checks and
  /// rewrite are one function.
  static RuleResult appliedIf(bool ok) {
    return ok ? applied() : notApplicable();
  }
  Kind kind;
  std::string why;

private:
  explicit RuleResult(Kind kind) : kind(kind) {}
};

class RuleContext;
using RuleFn = std::function<RuleResult(torch::jit::Node *, RuleContext &)>;

struct BoundRule {
  enum class On {
    Root, // a node whose inputs keep their original computation
    Use,  // a node with an input (or a list element) that has a Rep
  };
  std::string name;
  On on;
  /// The ops it is asked about; empty: every op (it checks a trait itself).
  std::vector<c10::Symbol> ops;
  RuleFn fn;
};

/// Registers \p rule after every rule registered so far (the built-in rules
/// come first).
void registerBoundRule(BoundRule rule);

/// Every rule, in the order the driver asks them.
const std::vector<BoundRule> &boundRules();

/// The built-in families (called once, by boundRules()).
void addRootRules(std::vector<BoundRule> &rules);
void addScalarRules(std::vector<BoundRule> &rules);
void addIndexRules(std::vector<BoundRule> &rules);
void addRowRules(std::vector<BoundRule> &rules);
void addOrderRules(std::vector<BoundRule> &rules);
void addRandomRules(std::vector<BoundRule> &rules);
void addDetectionRules(std::vector<BoundRule> &rules);
void addContainerRules(std::vector<BoundRule> &rules);
void addListRules(std::vector<BoundRule> &rules);
void addShapeRules(std::vector<BoundRule> &rules);

/// The state of one run of the driver, and what rules may do with it.
class RuleContext {
public:
  RuleContext(torch::jit::Graph &graph, PassContext &ctx,
              const AnalysisResult &analysis,
              const Aliases &aliases)
      : graph(graph), ctx(ctx), analysis(analysis), aliases(aliases) {}

  torch::jit::Graph &graph;
  PassContext &ctx;
  const AnalysisResult &analysis;
  const Aliases &aliases;
  /// Whether guardIfByBound may guard a test by a bound (the driver's
  /// trials run without where with guards the policy refused them).
  bool boundGuards = true;
  /// Whether returned dicts may keep bounded entries padded
  /// (--padded-outputs; ContainerRules.cpp). The driver's trials run
  /// without where a write the rules could not follow vetoed them.
  bool paddedDicts = true;
  /// Whether an if on a lifted bool whose branches have bounded results may
  /// run both branches (Driver::selectBothBranches). The driver's trials
  /// run without where the hoisted code turned out unsafe.
  bool bothBranches = true;
  /// Whether a list kept padded may be read by index and its sizes split
  /// by (ListRules.cpp); without, only lists that cat reads are. The
  /// driver's trials compare both where lists read by index still leave
  /// reads mid-way.
  bool indexedLists = true;
  /// Set when the walk kept such a list padded.
  bool madeIndexedLists = false;
  /// The driver's cutoff, when it has one: it and the nodes after it are
  /// not walked.
  const torch::jit::Node *cutoff = nullptr;

  //===--- Representations ------------------------------------------------===//

  Rep *rep(torch::jit::Value *v) {
    auto it = reps.find(v);
    return it == reps.end() ? nullptr : &it->second;
  }
  /// Whether no input of \p node but its first has a representation (the
  /// rules for ops of one bounded or lifted operand and host arguments).
  bool onlyFirstRepresented(const torch::jit::Node *node) {
    for (size_t i = 1; i < node->inputs().size(); ++i)
      if (rep(node->input(i)))
        return false;
    return true;
  }
  /// \p v's representation when it is bounded.
  Rep *bounded(torch::jit::Value *v) {
    Rep *r = rep(v);
    return r && r->kind == Rep::Kind::Bounded ? r : nullptr;
  }
  /// \p v's representation when it is a lifted scalar.
  Rep *lifted(torch::jit::Value *v) {
    Rep *r = rep(v);
    return r && r->kind == Rep::Kind::Lifted ? r : nullptr;
  }
  void setRep(torch::jit::Value *v, Rep r);
  /// What the rules know of \p from (a value in a representation, a
  /// count) now holds of \p to: \p from's uses moved to \p to
  /// (nestAfterGuards).
  void rename(torch::jit::Value *from, torch::jit::Value *to);
  /// \p v becomes bounded: \p padded rows, \p count of them valid.
  Rep &setBounded(torch::jit::Value *v, torch::jit::Value *padded,
                  torch::jit::Value *count, bool isIndex, bool is1D = false);
  /// Every use of \p v (a result that is static again) takes \p with.
  void replaceStatic(torch::jit::Value *v, torch::jit::Value *with) {
    v->replaceAllUsesWith(with);
  }
  /// \p node (a list construct the rule read) is part of the rewrite: its
  /// uses of bounded values need no materialization.
  void absorb(torch::jit::Node *node) { absorbed.insert(node); }
  /// The rule replaced \p node, which writes (never erased as dead), by
  /// static code: it is reported and destroyed after the rule returns.
  void replaceWriter(torch::jit::Node *node);
  /// Selections by one unwritten mask, where the first's count is visible,
  /// of bases provably of one rank, share the first one's count: their valid rows line up, so
  /// elementwise ops can combine them (`(pred[m] == tgt[m]).float().mean()`).
  /// Mask -> the first selection's base and count.
  std::unordered_map<const torch::jit::Value *,
                     std::pair<torch::jit::Value *, torch::jit::Value *>>
      selectionCounts;
  /// A count known equal to another (a selection by the same mask of a base
  /// of another rank) -> that one.
  std::unordered_map<const torch::jit::Value *, torch::jit::Value *>
      equalCounts;
  /// cat of a list built by appends, by the counts of its parts in program
  /// order -> its count: siblings (RetinaNet's per-level boxes, scores and
  /// labels) have their valid rows at the same places, so they share it.
  std::map<std::vector<const torch::jit::Value *>, torch::jit::Value *>
      appendedCatCounts;
  /// A bounded list's counts (its Rep's count, a Tensor[]): the count each
  /// append adds, in program order, and the appends (ListRules.cpp).
  struct ListCounts {
    std::vector<const torch::jit::Value *> key;
    std::vector<torch::jit::Node *> appends;
    const torch::jit::Node *list = nullptr; // the list's definition
  };
  std::unordered_map<const torch::jit::Value *, ListCounts> listCounts;
  /// A bounded list's users when it became one: the rewrite's own nodes
  /// use it too, as padded rows, and are not materialized for.
  std::unordered_map<const torch::jit::Value *,
                     std::unordered_set<const torch::jit::Node *>>
      listUsers;
  /// Nodes selectBothBranches hoisted out of the then branch of `if n > 0`,
  /// with n: there n was positive wherever the original ran them.
  std::unordered_map<const torch::jit::Node *, const torch::jit::Value *>
      hoistedWherePositive;
  /// Results of `if n > 0` whose branches differ in rank where the program
  /// after cannot tell their empty shapes apart (EmptyShapes.cpp): the
  /// then branch's rows stand for both. Result -> the then branch's rank.
  std::unordered_map<const torch::jit::Value *, int64_t> thenStandsForBoth;
  /// An element's count read from a bounded list's counts, by the counts
  /// and the index (a loop's or a non-negative constant): reads of one
  /// element share it.
  std::map<std::pair<const torch::jit::Value *, const torch::jit::Value *>,
           torch::jit::Value *>
      itemCounts;
  /// The random orders the rewrite of `where(c)[k][randperm(count)[:top]]`
  /// drew (a randperm of c's positions), each with the masks that took
  /// their picks from it. In one uniformly random permutation the orders
  /// of disjoint sets are independent: a mask disjoint from all of an
  /// order's masks takes its picks from that order, one draw for them all.
  struct RandomOrder {
    torch::jit::Value *order;
    std::vector<torch::jit::Value *> masks; // provably disjoint, one shape
    /// The first mask's sizes and, per coordinate, their row stride: host
    /// arithmetic every mask drawing the order shares.
    torch::jit::Value *sizes = nullptr;
    std::map<int64_t, torch::jit::Value *> strides;
  };
  std::vector<RandomOrder> randomOrders;
  /// Whether counts \p a and \p b are provably equal.
  /// Besides equalCounts, counts the forms compute alike from equal counts
  /// and equal host sizes (two cats of one selection and n rows: `c + n`,
  /// n read as `ones([n]).size(0)` and as `arange(n)`'s moved dim).
  bool sameCount(const torch::jit::Value *a, const torch::jit::Value *b,
                 int depth = 0) const;

  //===--- Emitting -------------------------------------------------------===//

  torch::jit::Value *constant(int64_t c) { return graph.insertConstant(c); }
  /// The elements of int list \p list: a constant list's as constants, a
  /// list construct's inputs; empty for a list made otherwise.
  std::vector<torch::jit::Value *> intListElements(torch::jit::Value *list);
  torch::jit::Value *none() { return graph.insertConstant(c10::IValue()); }
  torch::jit::Value *deviceOf(torch::jit::Value *t,
                              const torch::jit::Node *anchor);
  /// The 0-d tensor for scalar \p v: its lifted value, or a host scalar put
  /// on \p device.
  torch::jit::Value *tensorOf(torch::jit::Value *v, torch::jit::Value *device,
                              const torch::jit::Node *anchor);
  /// The count of a static tensor's rows, on its device.
  torch::jit::Value *rowsOf(torch::jit::Value *x,
                            const torch::jit::Node *anchor);
  /// A host int for the rows of bounded \p r.
  torch::jit::Value *boundOf(const Rep &r, const torch::jit::Node *anchor);
  /// A guard (guardAttr()) on host fact \p cond: \p fast where it holds,
  /// else a copy of \p node, the original, whose uses of represented values
  /// read them on the host (counted apart). Its result has \p node's type.
  torch::jit::Value *guardOriginal(torch::jit::Value *cond,
                                   torch::jit::Node *node,
                                   const std::function<torch::jit::Value *()> &fast);
  /// min(count, k) for a 0-d count and a host or lifted k, once per pair
  /// where the first is visible.
  torch::jit::Value *minCount(torch::jit::Value *count, torch::jit::Value *k,
                              const torch::jit::Node *anchor);
  std::map<std::pair<const torch::jit::Value *, const torch::jit::Value *>,
           torch::jit::Value *>
      minCounts;

  //===--- Ranges (Ranges.cpp) --------------------------------------------===//

  /// min/max/+/-/*/floordiv of two host ints, folded when both are
  /// constants.
  torch::jit::Value *hostOp(const char *op, torch::jit::Value *a,
                            torch::jit::Value *b,
                            const torch::jit::Node *anchor);
  Range rangeOf(torch::jit::Value *v);
  torch::jit::Value *upper(const Range &r);
  /// The range of scalar op \p node's result from its operands' ranges.
  Range rangeOfOp(torch::jit::Node *node);
  Range join(const Range &a, const Range &b, const torch::jit::Node *anchor);
  /// Upper bounds of min(a, b) and max(a, b): where one operand's constant
  /// bounds settle which is smaller (a <= 500 <= b), that operand's bound,
  /// with no host op.
  torch::jit::Value *upperOfMin(const Range &a, const Range &b,
                                const torch::jit::Node *anchor);
  torch::jit::Value *upperOfMax(const Range &a, const Range &b,
                                const torch::jit::Node *anchor);
  /// An int operand's range when it is a valid, non-negative length.
  std::optional<Range> length(torch::jit::Value *v);
  /// For an int whose sign only the host knows (a module's attribute K, or
  /// min(K, n) of such a K and a length n, as torchvision's _topk_min and
  /// `keep[:self.detections_per_img]` have it): a host bool that holds when
  /// \p v >= 0, and a host int equal to \p v whenever \p v < 0 (the
  /// value a rule's fallback gives the original op, so that it raises or
  /// counts from the end as the original did). No sync: neither reads the
  /// device.
  struct SignGuard {
    torch::jit::Value *nonNegative;
    torch::jit::Value *whenNegative;
  };
  std::optional<SignGuard> signGuard(torch::jit::Value *v,
                                     const torch::jit::Node *anchor);
  /// The rows Python's `x[:k]` keeps of \p count rows for a k of either
  /// sign: min(count, k) for k >= 0, max(count + k, 0) below (a negative
  /// end counts from the end). Chosen on the host by \p sign where there
  /// is one, else, of a lifted k, on the device.
  torch::jit::Value *prefixCount(torch::jit::Value *count, torch::jit::Value *k,
                                 const std::optional<SignGuard> &sign,
                                 const torch::jit::Node *anchor);
  /// A user bound (`--bound NAME=N`) for \p v, if one names it.
  std::optional<int64_t> hintFor(const torch::jit::Value *v);

  //===--- Facts ----------------------------------------------------------===//

  /// Whether \p v is known to hold int64 indices.
  bool isIndex(torch::jit::Value *v);
  /// \p v's dtype: the analysis's, or for a value made since, inferred.
  DTypeKind dtypeOf(const torch::jit::Value *v, int depth = 0);

  //===--- Driver state ---------------------------------------------------===//

  std::unordered_map<torch::jit::Value *, Rep> reps;
  std::vector<torch::jit::Value *> repOrder; // program order
  std::unordered_set<torch::jit::Node *> absorbed;
  /// where(c) list -> the count its elements share.
  std::unordered_map<torch::jit::Value *, torch::jit::Value *> whereCounts;
  /// Set by replaceWriter for the driver.
  torch::jit::Node *replacedWriter = nullptr;

  /// --padded-outputs: a dict built in the graph and returned whose
  /// bounded entries stay padded, each with its count under a key of its
  /// own (ContainerRules.cpp).
  struct PaddedDict {
    const torch::jit::Node *construct;
    std::map<std::string, std::string> countKeys; // entry -> its count's
  };
  std::vector<PaddedDict> paddedDictsMade;
  /// Writes of a padded entry that come later in the walk, each with the
  /// count key it must write too: the store rule rewrites them; one left
  /// at the end of the walk vetoes the run (Driver::run).
  std::unordered_map<const torch::jit::Node *, std::string> pendingStores;
  /// The dicts of the graph, solved when a rule first asks.
  const DictObjects &dictObjects();

private:
  void applyHint(const torch::jit::Value *v, Range &range);
  std::unique_ptr<DictObjects> dicts;
};

//===--- Helpers the rule families share ------------------------------------===//

/// Whether \p node is the op \p op (a qualified name).
bool is(const torch::jit::Node *node, const char *op);

/// Whether \p user puts its input at a graph output: the return itself, or
/// a tuple only the return takes.
bool isOutputPosition(const torch::jit::Node *user);
/// Whether \p user yields a branch's results (or a tuple of them) to an if
/// whose results are only returned (at any depth of such ifs, a guard's
/// too): what leaves there leaves the method, as a returned value does, but
/// --padded-outputs does not pad it.
bool leavesToReturn(const torch::jit::Node *user, int depth = 0);
/// Whether \p user moves dimensions of its input (movedim, transpose,
/// permute, t: every element kept, the rows' count still a size) into a
/// returned value: leading-selections' move back of `edge_index[:, mask]`.
bool returnedAsMoved(const torch::jit::Node *user);
/// Whether \p user builds a dict that is only returned (DictRecords.h
/// builds a record's dict at the return): its entries leave the method.
bool returnedInDict(const torch::jit::Node *user);

/// Whether \p node takes the first rows of dim 0: `slice(x, 0, 0|None, k,
/// 1)` or `narrow(x, 0, 0, k)`.
bool isRowPrefix(const torch::jit::Node *node);

//===--- Flow (Flow.cpp) --------------------------------------------------===//

/// Whether \p node's results are never written to (mayBeWritten).
bool writable(const torch::jit::Node *node);

/// A clone of \p node at the insertion point on the operands in
/// \p replaced (a list's elements, \p parts, in a new list); its results.
std::vector<torch::jit::Value *>
cloneOnRows(torch::jit::Graph &graph, torch::jit::Node *node,
            std::unordered_map<torch::jit::Value *, torch::jit::Value *> replaced,
            torch::jit::Node *list,
            const std::vector<torch::jit::Value *> &parts);

/// cloneOnRows of an op batched on the padded rows of \p rows (an operand
/// in \p replaced) with \p count valid ones: where the runtime library is
/// loaded (--runtime-ops), staticify::valid_rows gives the op the valid rows
/// on the CPU (a CPU count is read without waiting for a device) and every
/// padded row elsewhere, and staticify::padded_rows brings its one result
/// back to the padded rows. Otherwise plain cloneOnRows.
std::vector<torch::jit::Value *>
cloneOnValidRows(RuleContext &rc, torch::jit::Node *node,
                 std::unordered_map<torch::jit::Value *, torch::jit::Value *> replaced,
                 torch::jit::Value *rows, torch::jit::Value *count);

/// Makes an op's results from operands: a node's inputs replaced as given,
/// and the parts of its list.
using OnOperands = std::function<std::vector<torch::jit::Value *>(
    const std::unordered_map<torch::jit::Value *, torch::jit::Value *> &replaced,
    const std::vector<torch::jit::Value *> &parts)>;

/// `node` on padded rows whose ranks only the run time knows: a rank is a
/// host fact, so one `if` on \p cond (ranks that agree, `dim() == dim()`;
/// a rank high enough for a negative dim to be a trailing one, `dim() >=
/// 2`) picks the row-by-row form, with no sync. Otherwise operands would
/// broadcast by their trailing dimensions, or the dim would be 0: the
/// fallback branch computes the original op on the valid rows (cut at
/// `int(count)`, a host read) and pads its result back to the padded rows.
/// The caller makes sure that result has `count` rows wherever the
/// original does not raise (the operand of highest rank keeps dimension 0,
/// an op along dim 0 of a vector keeps its length): an op whose result
/// could have other rows (linear of a vector contracts them) must not be
/// guarded so. The if carries guardAttr(): the analysis counts the
/// fallback's host reads apart (AnalysisResult::fallbackSyncPoints).
///
/// \p apply makes the op's \p results from operands (the fallback's, and
/// the fast branch's unless \p fast is given).
std::vector<torch::jit::Value *>
emitRankGuarded(RuleContext &rc, torch::jit::Node *node,
                const std::unordered_map<torch::jit::Value *,
                                         torch::jit::Value *> &replaced,
                const std::vector<torch::jit::Value *> &parts,
                torch::jit::Value *firstPadded, torch::jit::Value *cond,
                torch::jit::Value *count, size_t results,
                const OnOperands &apply, const OnOperands &fast = nullptr);

/// emitRankGuarded of a clone of \p node (its list \p list, if any,
/// rebuilt of the parts).
std::vector<torch::jit::Value *>
emitRankGuarded(RuleContext &rc, torch::jit::Node *node,
                const std::unordered_map<torch::jit::Value *,
                                         torch::jit::Value *> &replaced,
                torch::jit::Node *list,
                const std::vector<torch::jit::Value *> &parts,
                torch::jit::Value *firstPadded, torch::jit::Value *cond,
                torch::jit::Value *count, const OnOperands &fast = nullptr);

/// Whether fresh tensor \p v may be written through a use: a view, an
/// index list, an if's result, or a container someone reads it out of.
bool mayBeWritten(const torch::jit::Value *v, int depth);
/// Whether dict or list \p c may hand an element to something that writes
/// it.
bool mayExposeElements(const torch::jit::Value *c, int depth);
/// The first node of \p ifNode's block that computes only its condition.
const torch::jit::Node *conditionStart(const torch::jit::Node *ifNode);
/// An `if` on a lifted comparison of an int whose upper bound the host
/// knows, against a host int (batched_nms's `boxes.numel() > 4000` of
/// bounded boxes): where the bound decides the comparison, the branch it
/// decides runs with no host read. \p ifNode becomes the fallback of a guard
/// (guardAttr()) on that host test, whose first block is a copy of the
/// decided branch; the guard is returned, nullptr when there is no such
/// test. The guard's outputs replace \p ifNode's.
torch::jit::Node *guardIfByBound(torch::jit::Node *ifNode, RuleContext &rc);
/// An `if n == 0` on a lifted n, the numel, size(0) or len of bounded x,
/// whose then branch only makes tensors of no rows (`torch.empty((0,))`:
/// the early return before batched_nms's coordinate trick) and whose else
/// branch returns rows: matched before the driver visits its branches.
struct EmptyEarlyReturn {
  torch::jit::Value *tested = nullptr; // x
  std::vector<torch::jit::Value *> elseResults;
  std::vector<int64_t> ranks; // of then's results
  std::unordered_set<const torch::jit::Node *> originals; // else's nodes
};
std::optional<EmptyEarlyReturn>
matchEmptyEarlyReturn(torch::jit::Node *ifNode, RuleContext &rc);
/// After the driver visited \p ifNode's branches and joined its results
/// as bounded rows: where its else branch, as the rules left it, runs on
/// padded rows whatever the count (no materialization, no host read, no
/// op that may raise), the if tests on the host whether x has padded rows
/// at all, and otherwise runs the else branch with its counts 0 where n
/// is 0: no read. Whether it applied.
bool selectEmptyBranch(torch::jit::Node *ifNode, const EmptyEarlyReturn &match,
                       RuleContext &rc);
/// A host read of a tensor's value (`int(t)`, `t.item()`...).
bool readsTensor(const torch::jit::Node *node);

/// Whether \p v is made with no rows, of sizes the host knows are valid:
/// `torch.empty((0,), ...)`, `x.new_zeros((0, 4))`... (a factory whose size
/// list is constant, starts with 0 and has no negative size): it raises
/// nothing.
bool madeWithNoRows(const torch::jit::Value *v);

//===--- Both branches (BothBranches.cpp) ---------------------------------===//

/// Why the branches of \p ifNode, an if on a lifted bool with results
/// (not a guard), whose results must be tensors, cannot both run before the rules see them: effects,
/// raises, loops or writes outside a guard's fallback, a result written in
/// place. Empty where they can be tried.
std::string whyNotBothBranches(torch::jit::Node *ifNode, RuleContext &rc);
/// In the branch of \p ifNode where its test caps a count (`numel(x) > L`,
/// `x.size(0) > L`, `len(x) > L` leave at most L / x's elements per row
/// in the else branch; <= and < in the then branch), each bounded value of
/// that count the branch reads is cut to that many rows first: x[:T] is x
/// wherever the branch runs, and its rewrite runs on T padded rows, not on
/// the whole bound (batched_nms's coordinate trick, taken for at most 1,000
/// boxes on the CPU, over SSD300's 36,000 padded rows). Returns whether it
/// cut any.
bool capBranchRows(torch::jit::Node *ifNode, RuleContext &rc);
/// After the driver visited the hoisted branches, [\p from, \p end): why
/// the code as the rules left it may not run whichever way the if goes.
/// An original node (one of \p originals) that is still used must not
/// raise on values nor read a represented value (it would be materialized
/// there); no node may have an effect or read the device; a guard's
/// fallback is not looked at (nestAfterGuards replaces it), but a guard
/// inside another if is refused. Empty where it may.
std::string whyNotSafeUnconditionally(
    torch::jit::Node *from, torch::jit::Node *end,
    const std::unordered_set<const torch::jit::Node *> &originals,
    RuleContext &rc);
/// Moves what follows the first guard (guardAttr()) in [\p from, \p end)
/// into its fast block, then the same in that block, and so on: \p guards
/// gets them, outermost first. Their results' uses move with them (and what
/// \p rc knows of them, RuleContext::rename), and \p renamed maps each old
/// result to the value its fast block made (for the branches' results,
/// read after). The old results stay, unused. The caller gives each guard
/// the branches' selected results as new results and, as its fallback, the
/// original if.
void nestAfterGuards(torch::jit::Node *from, torch::jit::Node *end,
                     std::vector<torch::jit::Node *> &guards,
                     std::unordered_map<torch::jit::Value *, torch::jit::Value *>
                         &renamed,
                     RuleContext &rc);

/// A constant that provably divides the product of \p v's sizes past the
/// first (its row size), as the ops that made it show: L tensors stacked
/// along a dimension past the rows, flattened back (BoxCoder's
/// `stack((x1, y1, x2, y2), dim=2).flatten(1)`: 4), a reshape to constant
/// sizes. 1 where they show nothing (ShapeRules.cpp).
int64_t rowSizeFactor(const torch::jit::Value *v, int depth = 0);

//===--- Empty results of either shape (EmptyShapes.cpp) ------------------===//

/// Result \p i of \p ifNode, `if n > 0` on a lifted count n >= 0, has
/// branches of different ranks (BoxCoder.decode's `if box_sum > 0:
/// pred_boxes = pred_boxes.reshape(box_sum, -1, 4)`), which differ only
/// where n is 0, in the shape of a tensor with no rows. Why the program
/// after the if might tell the two empty tensors apart (read a size or a
/// rank that differs, raise for one shape and not the other, return one),
/// as shape arithmetic over one unknown row size shows; empty where it
/// cannot, and the then branch's rows may stand for both.
std::string whyEmptyShapesDiffer(torch::jit::Node *ifNode, size_t i,
                                 RuleContext &rc);

/// A branch result the device picked: padded rows and their count, or
/// (count null) a static tensor.
struct Picked {
  torch::jit::Value *padded, *count;
  bool isIndex, is1D;
};
/// Whether pick() can pick between branch results \p a and \p b: each
/// bounded or static, of one rank where both ranks are known, and both
/// bounded where one is not (rows the rules made on both sides: where()
/// then picks under a guard on equal shapes, which a static tensor of
/// another rank would fail, reading the test every time).
bool canPick(torch::jit::Value *a, torch::jit::Value *b, RuleContext &rc);
/// The device's pick between \p a and \p b by the lifted test \p c
/// (canPick): static tensors as if-convert picks them; bounded rows (or a
/// static tensor's, all valid) padded to as many rows, with the count
/// picked alike.
Picked pick(torch::jit::Value *c, torch::jit::Value *a, torch::jit::Value *b,
            const torch::jit::Node *anchor, RuleContext &rc);
/// Each of \p guards (nestAfterGuards's, outermost first) returns
/// \p results from its fast block and, from its fallback, the results of a
/// copy of \p original (the if \p ifNode was, with all rows valid);
/// \p results become the outermost guard's.
void returnPicks(const std::vector<torch::jit::Node *> &guards,
                 torch::jit::Node *original, std::vector<Picked> &results,
                 const torch::jit::Node *ifNode, RuleContext &rc);

/// Why \p user reads \p v where it is, when \p user sits in a cold branch
/// that \p v is defined outside: one that only raises, or a guard's
/// fallback. nullptr where it does not.
const char *coldPath(const torch::jit::Node *user, const torch::jit::Value *v);
/// The outermost guard fallback around \p user that \p v is defined
/// outside of, or nullptr.
torch::jit::Block *guardFallbackAround(torch::jit::Node *user,
                                       const torch::jit::Value *v);
/// Whether \p v is defined before \p at.
bool definedBefore(const torch::jit::Value *v, const torch::jit::Node *at);
/// Whether \p def is in \p b or a block nested in it.
bool encloses(const torch::jit::Block *b, const torch::jit::Node *def);
/// Whether \p v may be used at \p at: defined before it, in its block or
/// one around it (a value made earlier inside a branch or loop body may not).
bool visibleAt(const torch::jit::Value *v, const torch::jit::Node *at);
/// Whether constant dimension argument \p dim of an op on bounded \p r (the
/// value \p of) is the rows' dimension: 0, or -1 of a vector, or a negative
/// one the rank resolves to 0. False for a dim computed at run time.
bool alongRows(const torch::jit::Value *dim, const torch::jit::Value *of,
               const Rep &r, const AnalysisResult &analysis);
/// Whether \p node is one of \p graph's.
bool inGraph(torch::jit::Graph &graph, const torch::jit::Node *node);

/// The symbols of qualified op names, for a rule's registration.
std::vector<c10::Symbol> ops(std::initializer_list<const char *> names);

} // namespace staticify::bound
