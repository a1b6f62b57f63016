//===- LiftScalars.cpp - host scalars read from data -> 0-d device tensors ===//

#include "passes/LiftScalars.h"

#include "passes/BoundedForms.h"
#include "passes/GraphUtils.h"
#include "passes/IfConvert.h"
#include "passes/OpCatalogue.h"
#include "passes/Selection.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr const char *kRule = "lift-scalars";

/// The offset a range store's write is recorded as a sink with: it takes
/// the lifted bounds of its slices, at none of its own operands.
constexpr size_t kRangeStore = std::numeric_limits<size_t>::max();
/// A sink offset: a slice read by a bound of the region (isRangeRead).
constexpr size_t kRangeRead = kRangeStore - 1;

} // namespace

std::optional<c10::ScalarType> liftedDType(const c10::TypePtr &t) {
  switch (t->kind()) {
  case c10::TypeKind::IntType:
    return c10::ScalarType::Long;
  case c10::TypeKind::FloatType:
    return c10::ScalarType::Double;
  case c10::TypeKind::BoolType:
    return c10::ScalarType::Bool;
  default:
    return std::nullopt;
  }
}

namespace {

/// `t.item()`: a Scalar whose Python type (int, float, bool) follows t's
/// dtype at run time. Lifted, it keeps t's dtype.
bool isItem(const Node *node) {
  return node->kind() == c10::Symbol::fromQualString("aten::item") &&
         isTensor(node->input(0));
}

/// What `where(m)[k].numel()`, `nonzero(m).size(0)`, `nonzero(m).numel()`
/// and their len/size spellings read: the count of m's nonzero elements,
/// times m.dim() for the numel of nonzero's [count, m.dim()] coordinates.
struct CountedMask {
  Value *mask = nullptr;
  bool timesRank = false;
  explicit operator bool() const { return mask != nullptr; }
};

CountedMask countedMask(const Node *node) {
  const std::string op = node->kind().toQualString();
  bool rows =
      op == "aten::len" || (op == "aten::size" && node->inputs().size() == 2 &&
                            constantInt(node->input(1)) == 0);
  if (!rows && op != "aten::numel")
    return {};
  const Node *producer = node->input(0)->node();
  if (producer->kind() == c10::aten::__getitem__) {
    const Node *where = producer->input(0)->node();
    if (where->kind() == c10::aten::where && where->inputs().size() == 1)
      return {where->input(0)}; // each index tensor has one entry per nonzero
  }
  const OpInfo *info = opInfo(producer);
  if (info && info->has(kNonzeroCoordinates))
    return {producer->input(0), /*timesRank=*/!rows};
  return {};
}

bool isSource(const Node *node) {
  const OpInfo *op = opInfo(node);
  bool conversion = op && op->has(kHostConversion) &&
                    isTensor(node->input(0)) &&
                    liftedDType(node->output()->type());
  return conversion || isItem(node) || countedMask(node);
}

bool isNumber(const Value *v) {
  return v->type()->kind() == c10::TypeKind::NumberType;
}

/// The tensor op computing scalar op \p node on 0-d tensors, if any.
const char *tensorOpFor(const Node *node) {
  const OpInfo *op = opInfo(node);
  return op ? op->tensorForm : nullptr;
}

/// int(x), float(x), bool(x): a conversion of a host number (or a Scalar).
bool isConversion(const Node *node) {
  const OpInfo *op = opInfo(node);
  return op && op->has(kHostConversion) && op->tensorForm;
}

} // namespace

bool isScalarOp(const Node *node) {
  if (!tensorOpFor(node) || node->outputs().size() != 1 ||
      !liftedDType(node->output()->type()))
    return false;
  // int()/float()/bool() also convert an item()'s Scalar: types are known
  // from there on, and so is a comparison's (a bool: `t.item() > 0`; the
  // lifted Scalar holds the Python number's value, as int64, float64 or
  // bool, and is compared in float64 beside a float as Python compares).
  // Other arithmetic on a Scalar has a run-time type.
  const OpInfo *info = opInfo(node);
  // `n % k` of ints stops the process for k = 0 on the host, and gives
  // what the device gives on a tensor: lifted only by a non-zero constant
  // (`n_sel % 2`, SpeechBrain's VAD boundaries).
  if (node->kind() == c10::aten::remainder && node->inputs().size() == 2) {
    std::optional<int64_t> k = constantInt(node->input(1));
    if (!k || *k == 0)
      return false;
  }
  bool takesScalar =
      isConversion(node) || (info && info->has(kComparison));
  for (const Value *in : node->inputs())
    if (!liftedDType(in->type()) && !(takesScalar && isNumber(in)))
      return false; // lists (prim::min of a list), tensors, strings...
  return true;
}

Value *castTo(Graph &graph, Value *t, c10::ScalarType dtype,
              const Node *anchor) {
  if (dtype == c10::ScalarType::Bool)
    return emit(graph, "aten::ne", {t, 0}, anchor);
  return emit(graph, "aten::to", {t, static_cast<int64_t>(dtype)}, anchor);
}

Value *emitScalarOpOnTensors(Graph &graph, Node *node,
                             const std::vector<Value *> &operands) {
  c10::ScalarType out = *liftedDType(node->output()->type());
  const OpInfo &info = *opInfo(node);
  std::vector<Value *> args;
  bool anyFloat = false;
  for (Value *in : node->inputs())
    anyFloat |= in->type()->kind() == c10::TypeKind::FloatType;
  for (size_t i = 0; i < operands.size(); ++i) {
    Value *in = node->input(i), *t = operands[i];
    // Python promotes int to float in mixed arithmetic and comparisons;
    // true division always computes in float.
    if ((anyFloat || info.has(kDivision)) &&
        in->type()->kind() != c10::TypeKind::FloatType &&
        in->type()->kind() != c10::TypeKind::BoolType)
      t = castTo(graph, t, c10::ScalarType::Double, node);
    args.push_back(t);
  }
  if (isConversion(node))
    return castTo(graph, args[0], out, node);
  if (node->kind() == c10::aten::floordiv) // emitted as div(rounding_mode)
    return emit(
        graph, "aten::div", {args[0], args[1]}, node,
        {torch::jit::NamedValue("rounding_mode", std::string("floor"))});
  std::vector<torch::jit::NamedValue> named(args.begin(), args.end());
  return emit(graph, tensorOpFor(node), named, node);
}

namespace {

/// `torch.as_tensor(x, dtype=d, device=dev)` (or torch.tensor,
/// torch.scalar_tensor) of a host number x with a dtype and a device: the
/// 0-d tensor `t.to(dev, d)` makes from x's lifted tensor t, which holds
/// x's value in int64, float64 or bool, a float first cast to the default
/// dtype as TorchScript makes it (torchaudio's biquads rebuild each
/// coefficient they read so). The two differ only where the original
/// raises: a float that overflows the default dtype, which its checked
/// conversion refuses and a cast makes inf. Without a dtype, or without a
/// device (the result lives on the host, where the lifted tensor is not):
/// left alone.
/// Whether \p node is a tuple, list or dict construct whose result the
/// method returns, directly or in another such construct (`return loss,
/// int(n_correct)`): a host value in it is an output of the method.
static bool returnedByConstructs(const Node *node, int depth = 0) {
  c10::Symbol k = node->kind();
  if (depth > 8 || (k != c10::prim::TupleConstruct &&
                    k != c10::prim::ListConstruct &&
                    k != c10::prim::DictConstruct) ||
      node->outputs().size() != 1 || !node->output()->hasUses())
    return false;
  const torch::jit::Block *top = node->owningGraph()->block();
  return std::all_of(node->output()->uses().begin(),
                     node->output()->uses().end(),
                     [&](const torch::jit::Use &use) {
                       return use.user == top->return_node() ||
                              returnedByConstructs(use.user, depth + 1);
                     });
}

bool isScalarFactory(const Node *node, size_t offset) {
  static const auto asTensor = c10::Symbol::fromQualString("aten::as_tensor");
  if (offset != 0 || node->outputs().size() != 1 ||
      !(node->kind() == asTensor || node->kind() == c10::aten::tensor ||
        node->kind() == c10::aten::scalar_tensor) ||
      !liftedDType(node->input(0)->type()))
    return false;
  const Value *dtype = namedInput(node, "dtype");
  const Value *device = namedInput(node, "device");
  const Value *grad = namedInput(node, "requires_grad");
  return dtype && !dtype->mustBeNone() && device && !device->mustBeNone() &&
         (!grad || constantBool(grad) == false);
}

/// randint(low, high, size) with high at \p offset, a bound the program
/// keeps above the constant low (`max(1, n - w)`): random_below draws it
/// below a lifted high (SpecAugment's mask starts and widths).
bool drawsBelow(const Node *node, size_t offset) {
  std::optional<IntDraw> draw = intDraw(node);
  if (!draw || draw->highOffset != offset)
    return false;
  std::optional<int64_t> lo = sizeLowerBound(node->input(offset));
  return lo && *lo > draw->low;
}

/// `fake_quantize_per_tensor_affine(x, scale, zero_point, qmin, qmax)`: its
/// tensor_qparams overload takes scale (float32) and zero_point (int32) as
/// tensors and reads them on the device (quantization-aware training's
/// observers compute both from x's min and max). It computes the same
/// values; only the Scalar overload checks zero_point against [qmin, qmax],
/// where the original raises (the contract's "where the original raises").
bool takesQParamsAsTensors(const Node *node) {
  static const auto kind =
      c10::Symbol::fromQualString("aten::fake_quantize_per_tensor_affine");
  return node->kind() == kind && node->inputs().size() == 5 &&
         node->input(1)->type()->kind() == c10::TypeKind::FloatType &&
         node->input(2)->type()->kind() == c10::TypeKind::IntType;
}

/// Tensor ops whose scalar argument at \p offset also takes a 0-d tensor.
bool acceptsTensorAt(const Node *node, size_t offset) {
  if (takesQParamsAsTensors(node))
    return offset == 1 || offset == 2;
  // x[i], x.select(d, i): a gather of the one slice at i (liftSink); the
  // region takes it only where no write reaches the view it returns.
  if (node->kind() == c10::aten::select)
    return offset == 2 && node->inputs().size() == 3;
  // x.mul_(s) and its kin: their Tensor overloads write x in place too,
  // casting s to x's dtype as the Scalar ones do (mmseg's accuracy,
  // `correct_k.mul_(100.0 / total)`).
  static const std::array<c10::Symbol, 4> inPlace = {
      c10::Symbol::aten("mul_"), c10::Symbol::aten("div_"),
      c10::Symbol::aten("add_"), c10::Symbol::aten("sub_")};
  if (std::find(inPlace.begin(), inPlace.end(), node->kind()) != inPlace.end())
    return offset == 1 && node->inputs().size() <= 3 && isTensor(node->input(0));
  const OpInfo *op = opInfo(node);
  if (!op || node->outputs().size() != 1 || !isTensor(node->output(0)))
    return false;
  if (op->has(kScalarOperandTakesTensor)) // add/sub's alpha stays a scalar
    return offset == 1 && node->inputs().size() <= 3 &&
           isTensor(node->input(0));
  if (op->has(kConditionFirst)) // where(c, a, b)
    return offset == 1 || offset == 2;
  if (op->has(kFillValueTakesTensor)) // masked_fill(x, m, value)
    return offset == 2;
  return false;
}

//===----------------------------------------------------------------------===//
// Range stores
//===----------------------------------------------------------------------===//
//
// `v[..., a:b] = value` (TorchScript: slices of v and a fill_ or copy_ of
// the innermost one) with a bound read from data (a SpecAugment mask's
// start, a sequence's length, a CutMix box's corners) needs no host read:
// the store is a masked one, by the positions the slices span. Slices
// along several dims (`img[:, :, y1:y2, x1:x2] = ...`) mask by the
// product of their positions. The value is a number, a 0-d tensor, or the
// same region of a tensor of v's shape (`x[:, a:b] = y[:, a:b]`): then
// each position of the region takes y's element at that position. Any
// other value (of the region's data-dependent shape) is refused.

/// `slice(t, dim, start, end, 1)` of a tensor along a constant dim.
bool isRangeSlice(const Node *node) {
  return node->kind() == c10::aten::slice && node->inputs().size() == 5 &&
         isTensor(node->input(0)) && constantInt(node->input(1)) &&
         constantInt(node->input(4)) == 1;
}

/// The one use of \p v but for reads of its dtype and device (which a
/// slice shares with the tensor it slices); nullopt where there is none or
/// more than one.
/// x[a:b] along dim 0 (step 1) read, not stored into: with a bound from
/// data it is the selection of the rows between the bounds,
/// `x[(p >= a) & (p < b)]` for positions p (liftRangeRead), which later
/// passes reduce, count and pad (speechbrain's `x[i, :int(n)].mean(0)`).
bool isRangeRead(const Node *node) {
  return isRangeSlice(node) && constantInt(node->input(1)) == 0 &&
         isTensor(node->output());
}

std::optional<torch::jit::Use> onlyUse(const Value *v) {
  std::optional<torch::jit::Use> only;
  for (const torch::jit::Use &use : v->uses()) {
    if (use.user->kind() == c10::prim::dtype ||
        use.user->kind() == c10::prim::device)
      continue;
    if (only)
      return std::nullopt;
    only = use;
  }
  return only;
}

/// The range slices that \p v is the innermost of, outermost first: each
/// used only by the next (and by reads of its dtype and device).
std::vector<Node *> sliceChain(Value *v) {
  std::vector<Node *> chain;
  for (Node *n = v->node(); isRangeSlice(n); n = n->input(0)->node()) {
    if (!chain.empty() && !onlyUse(n->output()))
      break;
    chain.insert(chain.begin(), n);
  }
  return chain;
}

/// Whether two bounds of slices are one: one value, both missing, or equal
/// constants.
bool sameBound(const Value *a, const Value *b) {
  if (a == b || (a->mustBeNone() && b->mustBeNone()))
    return true;
  auto ca = constantInt(a), cb = constantInt(b);
  return ca && ca == cb;
}

struct RangeStore {
  Node *write = nullptr;            // the fill_ or copy_ of the region
  std::vector<Node *> slices;       // v's, outermost first
  std::vector<Node *> valueSlices;  // the value's, the same; or none
};

/// The range store \p write makes, where it is one.
std::optional<RangeStore> rangeStoreAt(Node *write) {
  bool fills = write->kind() == c10::aten::fill_ &&
               write->inputs().size() == 2 && !isTensor(write->input(1));
  bool copies = write->kind() == c10::aten::copy_;
  if (!(fills || copies) || write->output()->hasUses())
    return std::nullopt;
  // Each chain's innermost slice is read by the write alone: its other
  // reads would need its shape, and the slices go.
  auto endsAtWrite = [&](const std::vector<Node *> &chain) {
    std::optional<torch::jit::Use> last =
        chain.empty() ? std::nullopt : onlyUse(chain.back()->output());
    return last && last->user == write;
  };
  RangeStore store{write, sliceChain(write->input(0)), {}};
  if (!endsAtWrite(store.slices))
    return std::nullopt;
  // The dims, distinct: of one sign (or all counted from a known rank),
  // distinct numbers are distinct dims.
  Value *v = store.slices.front()->input(0);
  std::optional<int64_t> rank = knownRank(v);
  std::vector<int64_t> dims;
  for (const Node *s : store.slices) {
    int64_t d = *constantInt(s->input(1));
    if (d < 0 && rank)
      d += *rank;
    if (std::find(dims.begin(), dims.end(), d) != dims.end())
      return std::nullopt;
    dims.push_back(d);
  }
  if (!rank && std::any_of(dims.begin(), dims.end(), [&](int64_t d) {
        return (d < 0) != (dims.front() < 0);
      }))
    return std::nullopt;
  if (!copies || provablyZeroDim(write->input(1)))
    return store;
  // A tensor value: the same region of a tensor of v's shape.
  store.valueSlices = sliceChain(write->input(1));
  if (!endsAtWrite(store.valueSlices) ||
      store.valueSlices.size() != store.slices.size() ||
      !provablySameShape(store.valueSlices.front()->input(0), v))
    return std::nullopt;
  for (size_t i = 0; i < store.slices.size(); ++i)
    for (size_t k : {1, 2, 3})
      if (!sameBound(store.slices[i]->input(k), store.valueSlices[i]->input(k)))
        return std::nullopt;
  return store;
}

/// The write of the range store \p slice is one of the slices of (of the
/// region written, or of the value's); nullptr where it is in none.
Node *rangeStoreWrite(const Node *slice) {
  if (!isRangeSlice(slice))
    return nullptr;
  const Node *n = slice;
  std::optional<torch::jit::Use> use;
  while ((use = onlyUse(n->output())) && use->offset == 0 &&
         isRangeSlice(use->user))
    n = use->user;
  if (!use || (use->user->kind() != c10::aten::fill_ &&
               use->user->kind() != c10::aten::copy_))
    return nullptr;
  std::optional<RangeStore> store = rangeStoreAt(use->user);
  if (!store)
    return nullptr;
  for (const auto *chain : {&store->slices, &store->valueSlices})
    if (std::find(chain->begin(), chain->end(), slice) != chain->end())
      return store->write;
  return nullptr;
}

struct Region {
  std::vector<Node *> sources;                  // the sync reads it grows from
  std::unordered_set<Node *> touched;           // every user seen, for grouping
  std::unordered_set<Node *> ops;               // scalar ops
  std::unordered_set<Node *> ifs;               // converted ifs
  std::vector<std::pair<Node *, size_t>> sinks; // tensor ops taking a scalar
  std::unordered_set<Node *> returnsTo; // ifs that a region value leaves by
  std::vector<Node *> loops; // loops whose exit a region value decides
  /// Uses in a guard's fallback (not its results): they read the lifted
  /// value on the host there, counted apart as the fallback's reads are.
  std::vector<std::pair<Node *, size_t>> fallbackReads;
  std::string whyNot;
  const Node *blocker = nullptr;
};

//===----------------------------------------------------------------------===//
// Loops whose exit depends on data
//===----------------------------------------------------------------------===//
//
// `for _ in range(n): ...; if done.all(): break` reads the device once per
// iteration to decide whether to go on. Converted, the loop runs on to its
// bound and carries `active`, a 0-d bool tensor: true while the original
// would still be running. Each carried tensor x becomes
// `where(active, x', x)` (x' the body's new value), so iterations past the
// exit leave it as the exit left it, and `active' = active & go_on`.
//
// Why that is exact (and raises no more than the original):
// - The body is pure: no write, no side effect, no raise, no inner loop;
//   an op that may raise on values is shielded by `active` (shieldBlock):
//   in an iteration the original never ran it sees safe operands.
// - The body reads no iteration number, and a host value it carries and
//   changes is only the count that bounds the loop (TorchScript's own form
//   of a for-loop with a break: `i' = i + 1; go_on = i' < n and ...`),
//   unread after it: every iteration computes the same thing from the
//   carried values.
// - No shape in the body depends on data, so the body's result shapes are
//   a function of the carried shapes: when x' has x's shape (dtype, device)
//   in one iteration, it has in every later one, and an iteration past the
//   exit sees the shapes of one the original ran. That is checked on the
//   host (metadata) in each iteration; where it fails (a carried tensor
//   that grows), that iteration goes the original's way: x' is carried and
//   the host reads whether to go on, as the original did. It can fail only
//   while the original is still running (it failed in every earlier
//   iteration too), so such a loop reads the device no more often than the
//   original.

bool regionNode(Node *n, const Region &r) {
  return r.ops.count(n) || r.ifs.count(n) ||
         std::find(r.sources.begin(), r.sources.end(), n) != r.sources.end();
}

bool regionValue(const Value *v, const Region &r) {
  return regionNode(const_cast<Node *>(v->node()), r);
}

/// The terms of the conjunction \p v that decides whether a loop goes on,
/// host (`i' < n` of `i' < n and bool(t)`: they stay on the host) and
/// data (lifted).
void conjunctionTerms(Value *v, const Region &r, std::vector<Value *> &host,
                      std::vector<Value *> &data) {
  Node *n = v->node();
  if (n->kind() == c10::aten::__and__ && r.ops.count(n) &&
      n->inputs().size() == 2) {
    conjunctionTerms(n->input(0), r, host, data);
    conjunctionTerms(n->input(1), r, host, data);
  } else {
    (regionValue(v, r) ? data : host).push_back(v);
  }
}

/// The carried index of the count that bounds \p loop: a host int i the
/// body carries as `i + 1`, read by nothing but that add, whose result the
/// loop's condition compares with a bound set before the loop
/// (`i + 1 < n`), and unread after the loop.
std::optional<size_t> boundingCount(const Node *loop, const Region &r) {
  torch::jit::Block *body = const_cast<Node *>(loop)->blocks()[0];
  std::vector<Value *> terms, data;
  conjunctionTerms(body->outputs()[0], r, terms, data);
  for (Value *term : terms) {
    const Node *lt = term->node();
    if (lt->kind() != c10::aten::lt || lt->inputs().size() != 2 ||
        lt->input(1)->type()->kind() != c10::TypeKind::IntType ||
        insideOf(lt->input(1)->node(), loop))
      continue;
    Value *next = lt->input(0);
    const Node *add = next->node();
    if (add->kind() != c10::aten::add || add->inputs().size() != 2 ||
        constantInt(add->input(1)) != 1 ||
        add->input(0)->node()->kind() != c10::prim::Param ||
        add->input(0)->node()->owningBlock() != body ||
        add->input(0)->uses().size() != 1)
      continue;
    size_t j = add->input(0)->offset();
    if (j == 0 || body->outputs()[j] != next || loop->output(j - 1)->hasUses())
      continue;
    bool onlyCounted = true;
    for (const torch::jit::Use &use : next->uses())
      onlyCounted &= use.user == lt || (use.user == body->return_node() &&
                                        use.offset == j);
    if (onlyCounted)
      return j - 1;
  }
  return std::nullopt;
}

/// Table ops that raise on shapes and host arguments only, never on values:
/// a reduction (of an empty tensor), and an op whose only tensor operand is
/// its first, a tensor or a list of them, moved or checked by host
/// arguments (view, select, permute, cat, topk...). An iteration past a
/// loop's exit sees the shapes of one the original ran (see above), so they
/// raise there only if they raised in the original.
bool raisesOnShapesOnly(const Node *node) {
  const OpInfo *info = opInfo(node);
  if (!info || info->has(kRaisesOnZeroDivisor) || info->has(kRandom) ||
      info->has(kBuildsOnHost) || info->role == OpRole::DynamicShapeRoot ||
      info->role == OpRole::SyncRead || node->inputs().empty())
    return false;
  if (info->role == OpRole::Reduction)
    return true;
  return std::none_of(node->inputs().begin() + 1, node->inputs().end(),
                      [](const Value *in) {
                        return carriesTensor(in->type());
                      });
}

/// Why a body's ops could not also run in iterations the original never ran
/// (see above), or "". Region nodes are lifted; converted ifs were checked
/// as such, and their ops are shielded by the loop's `active` as well.
std::string loopBodyReason(const torch::jit::Block *block, const Region &r,
                           const AnalysisResult &facts) {
  for (const Node *node : block->nodes()) {
    if (regionNode(const_cast<Node *>(node), r))
      continue;
    const std::string op = node->kind().toQualString();
    if (std::string why = unconditionalReason(node, "the body"); !why.empty())
      return why;
    if (node->kind() == c10::prim::If) {
      for (const torch::jit::Block *b : node->blocks()) {
        std::string why = loopBodyReason(b, r, facts);
        if (!why.empty())
          return why;
      }
    } else if (!node->blocks().empty()) {
      return "the body contains '" + op + "'";
    } else if (raisesUnshielded(node, &facts) && !raisesOnShapesOnly(node)) {
      return "the body computes '" + op +
             "', which may raise on the values of an iteration the original "
             "never ran";
    }
    // The analysis calls every carried shape data-dependent (the trip
    // count is); what matters is that no op makes one of its own.
    if (opRole(node) == OpRole::DynamicShapeRoot)
      return "'" + op + "' in the body makes a tensor whose shape depends "
             "on data";
    if (isSource(node))
      return "the body reads the device elsewhere ('" + op + "')";
  }
  return "";
}

/// Why \p loop, whose exit region \p r decides, cannot run on to its bound
/// with an active mask (see above), or "".
std::string loopExitReason(const Node *loop, const Region &r,
                           const Aliases &aliases,
                           const AnalysisResult &facts) {
  const torch::jit::Block *body = loop->blocks()[0];
  if (body->inputs()[0]->hasUses())
    return "the body reads the iteration number";
  std::string why = loopBodyReason(body, r, facts);
  if (!why.empty())
    return why;
  std::optional<size_t> count = boundingCount(loop, r);
  bool carriesTensor = false;
  for (size_t j = 0; j < loop->outputs().size(); ++j) {
    const Value *param = body->inputs()[j + 1], *next = body->outputs()[j + 1];
    if (next == param || j == count)
      continue;
    if (!isTensor(next))
      return "it carries a host value ('" + next->type()->str() +
             "') that the body changes";
    if (aliases.hasWriters(loop->output(j)))
      return "a result of the loop is written to in place";
    carriesTensor = true;
  }
  if (!carriesTensor)
    return "it carries no tensor";
  if (constantInt(loop->input(0)) == std::numeric_limits<int64_t>::max() &&
      !count)
    return "no count bounds it (a while loop)";
  return "";
}

/// Grows the region of \p sources to completion (so that `touched` is the
/// whole reach), recording the first reason it cannot be lifted.
Region growRegion(const std::vector<Node *> &sources,
                  const Aliases &aliases, const AnalysisResult &facts,
                  bool staticLoops) {
  Region r;
  r.sources = sources;
  std::vector<Value *> work;
  std::unordered_set<Value *> seen;
  auto push = [&](Value *v) {
    if (seen.insert(v).second)
      work.push_back(v);
  };
  for (Node *s : sources)
    push(s->output());
  auto fail = [&](std::string why, const Node *blocker) {
    if (r.whyNot.empty()) {
      r.whyNot = std::move(why);
      r.blocker = blocker;
    }
  };
  while (!work.empty()) {
    Value *v = work.back();
    work.pop_back();
    for (const torch::jit::Use &use : v->uses()) {
      Node *user = use.user;
      r.touched.insert(user);
      if (user->kind() != c10::prim::Return && inGuardFallback(user)) {
        r.fallbackReads.emplace_back(user, use.offset);
        continue;
      }
      if (user->kind() == c10::prim::Return) {
        Node *owner = user->owningBlock()->owningNode();
        if (owner && owner->kind() == c10::prim::Loop && use.offset == 0) {
          // Whether the loop goes on: it runs on to its bound instead.
          r.touched.insert(owner);
          if (std::find(r.loops.begin(), r.loops.end(), owner) ==
              r.loops.end())
            r.loops.push_back(owner);
          continue;
        }
        if (!owner || owner->kind() != c10::prim::If) {
          fail(owner ? "it is carried by a loop"
                     : "it is returned as a host value",
               owner);
          continue;
        }
        r.touched.insert(owner);
        r.returnsTo.insert(owner);
        push(owner->output(use.offset));
        continue;
      }
      if (user->kind() == c10::prim::If) {
        std::string why = unconvertibleReason(user, aliases, &facts);
        if (why.empty() && isDataAssert(user))
          why = "it decides a data assert";
        for (size_t i = 0; why.empty() && i < user->outputs().size(); ++i) {
          if (!isTensor(user->output(i))) {
            if (!liftedDType(user->output(i)->type()))
              why = "the if returns a non-numeric value";
            else
              push(user->output(i));
          }
        }
        if (!why.empty())
          fail("it decides an if that cannot be converted: " + why, user);
        r.ifs.insert(user);
        continue;
      }
      if (isScalarOp(user)) {
        r.ops.insert(user);
        push(user->output());
        continue;
      }
      if (use.offset == 2 || use.offset == 3) {
        if (Node *write = rangeStoreWrite(user)) {
          // The store's sink: after every bound of its slices, and one
          // node that each region reaching one of them touches.
          r.touched.insert(write);
          r.sinks.emplace_back(write, kRangeStore);
          continue;
        }
      }
      if (user->kind() == c10::aten::select &&
          acceptsTensorAt(user, use.offset) &&
          aliases.hasWriters(user->output())) {
        fail("'aten::select' by it returns a view that is written to: a "
             "gather would write a copy",
             user);
        continue;
      }
      if ((use.offset == 2 || use.offset == 3) && isRangeRead(user)) {
        // A selection is a copy where the slice was a view, and has a
        // count of rows where the slice had a size: one sliced again by
        // data or copied into a store (torchvision's paste_mask_in_image,
        // `im_mask[y0:y1, x0:x1] = mask[a:b, c:d]`) would be cut on the
        // host there.
        // Rows put into a list (`cat([k[:n], left, k[n:]])`, torchaudio's
        // Emformer) are concatenated or stacked with others: the compacted
        // rows would make everything after the list bounded too.
        auto resliced = [&](const torch::jit::Use &u) {
          return u.user->kind() == c10::prim::ListConstruct ||
                 (isRangeSlice(u.user) && u.offset == 0 &&
                  std::any_of(u.user->inputs().begin() + 2,
                              u.user->inputs().end(),
                              [&](const Value *b) {
                                return facts.info(b).isDataDependent();
                              })) ||
                 u.user->kind() == c10::aten::copy_;
        };
        if (aliases.hasWriters(user->output()))
          fail("a slice by it is written to", user);
        else if (std::any_of(user->output()->uses().begin(),
                             user->output()->uses().end(), resliced))
          fail("the rows a slice by it reads are sliced by data again, "
               "copied into a store or put into a list",
               user);
        else
          r.sinks.emplace_back(user, kRangeRead);
        continue;
      }
      if (isScalarFactory(user, use.offset) || drawsBelow(user, use.offset) ||
          (!inputAffectsShape(user, use.offset) &&
           acceptsTensorAt(user, use.offset))) {
        r.sinks.emplace_back(user, use.offset);
        continue;
      }
      fail(returnedByConstructs(user)
               ? std::string("it is returned as a host value")
               : "'" + std::string(user->kind().toQualString()) +
                     "' needs it as a host value",
           user);
    }
  }
  for (Node *loop : r.loops) {
    std::string why = loopExitReason(loop, r, aliases, facts);
    if (!why.empty())
      fail("it decides when a loop stops, and the loop cannot run on to its "
           "bound: " + why,
           loop);
    else if (!staticLoops)
      // Every iteration's work for no read: slower where the loop usually
      // stops early, so only when asked (docs/benchmarks.md measures it).
      fail("it decides when a loop stops; --static-loops runs the loop on to "
           "its bound with no read of the device",
           loop);
  }
  // A value leaving an if's branch is only lifted if that if is converted.
  for (Node *owner : r.returnsTo)
    if (!r.ifs.count(owner))
      fail("a branch of an if on a host value returns it", owner);
  return r;
}

/// Where a node comes in program order once converted ifs are hoisted.
using Rank = std::pair<size_t, size_t>;

class Lifter {
public:
  /// \p conditions: for each converted if, the stand-in for its lifted
  /// condition that its branches' shields read (shieldBranches).
  /// \p active: for each loop a region ends, its `active` block parameter
  /// (prepareLoop).
  Lifter(Graph &graph, const std::unordered_map<Node *, Value *> &conditions,
         const std::unordered_map<Node *, Value *> &active)
      : graph(graph), conditions(conditions), active(active) {}

  /// Lifts \p region, whose converted ifs' branches are hoisted already;
  /// \p rank orders its nodes in program order as it is now (other
  /// regions' rewrites insert nodes but never move this one's).
  void run(const Region &region,
           const std::unordered_map<const Node *, Rank> &rank,
           PassContext &ctx) {
    // Lift the sources, then every region node in program order.
    std::vector<Node *> dead;
    for (Node *source : region.sources) {
      torch::jit::WithInsertPoint guard(source->next());
      if (CountedMask counted = countedMask(source)) {
        // The count of nonzero elements, read on the device (int64).
        Value *mask = counted.mask;
        Value *count =
            emit(graph, "aten::sum",
                 {emit(graph, "aten::ne", {mask, 0}, source)}, source);
        if (counted.timesRank)
          count = emit(graph, "aten::mul",
                       {count, emit(graph, "aten::dim", {mask}, source)},
                       source);
        if (!device)
          device = emit(graph, "prim::device", {count}, source);
        lifted[source->output()] = count;
        dead.push_back(source);
        continue;
      }
      // A host number carries no gradient: the tensor standing for it is
      // detached, or a loss scaled by `t.item()` would differentiate t.
      Value *t = emit(
          graph, "aten::detach",
          {emit(graph, "aten::reshape",
                {source->input(0), std::vector<int64_t>{}}, source)},
          source);
      if (!device)
        device = emit(graph, "prim::device", {t}, source);
      auto dtype = liftedDType(source->output()->type());
      lifted[source->output()] =
          dtype ? castTo(t, *dtype, source) : pythonNumber(t, source);
      dead.push_back(source);
    }
    std::unordered_map<Node *, size_t> sinks(region.sinks.begin(),
                                             region.sinks.end());
    // The region's nodes in program order: walking only them keeps a graph
    // of many small regions linear, not regions times nodes.
    std::vector<std::pair<Rank, Node *>> order;
    for (const auto *set : {&region.ops, &region.ifs})
      for (Node *node : *set)
        order.emplace_back(rank.at(node), node);
    for (const auto &[node, offset] : sinks)
      order.emplace_back(rank.at(node), node);
    std::sort(order.begin(), order.end());
    for (const auto &[at, node] : order) {
      if (region.ops.count(node)) {
        liftOp(node);
        dead.push_back(node);
      } else if (region.ifs.count(node)) {
        liftIf(node);
        dead.push_back(node);
      } else if (auto it = sinks.find(node); it != sinks.end()) {
        liftSink(node, it->second, ctx);
      }
    }
    for (Node *loop : region.loops) {
      runToBound(loop, region);
      ctx.rewrote(loop, kRule);
    }
    for (auto [user, offset] : region.fallbackReads) {
      Value *host = user->input(offset);
      torch::jit::WithInsertPoint guard(user);
      const char *read = host->type()->kind() == c10::TypeKind::BoolType
                             ? "aten::Bool"
                         : host->type()->kind() == c10::TypeKind::IntType
                             ? "aten::Int"
                         : host->type()->kind() == c10::TypeKind::FloatType
                             ? "aten::Float"
                             : "aten::item";
      user->replaceInput(offset, emit(graph, read, {lifted.at(host)}, user));
    }
    for (Node *node : dead)
      for (Value *out : node->outputs())
        if (auto it = lifted.find(out); it != lifted.end())
          out->replaceAllUsesWith(it->second);
    // Consumers before producers.
    for (auto it = dead.rbegin(); it != dead.rend(); ++it) {
      ctx.rewrote(*it, (*it)->kind() == c10::prim::If ? "if-convert" : kRule);
      (*it)->destroy();
    }
  }

private:
  Graph &graph;
  const std::unordered_map<Node *, Value *> &conditions;
  const std::unordered_map<Node *, Value *> &active;
  Value *device = nullptr; // where host operands go: the first source's
  std::unordered_map<Value *, Value *> lifted;
  std::map<std::pair<Value *, const torch::jit::Block *>, Value *> hostTensors;
  /// Range stores made (liftRangeStore): their slices are gone.
  std::unordered_set<const Node *> stored;

  /// `t.item()` as a Python number would be: int64 for integral dtypes,
  /// float64 for floating ones, bool for bool; chosen by branches on t's
  /// dtype, known on the host.
  Value *pythonNumber(Value *t, const Node *anchor) {
    Value *floating = emit(graph, "aten::is_floating_point", {t}, anchor);
    Value *isBool = emit(graph, "aten::eq",
                         {emit(graph, "prim::dtype", {t}, anchor),
                          static_cast<int64_t>(c10::ScalarType::Bool)},
                         anchor);
    return emitIf(
        graph, floating, anchor,
        [&] { return castTo(t, c10::ScalarType::Double, anchor); },
        [&] {
          return emitIf(
              graph, isBool, anchor, [&] { return t; },
              [&] { return castTo(t, c10::ScalarType::Long, anchor); });
        });
  }

  Value *castTo(Value *t, c10::ScalarType dtype, const Node *anchor) {
    return staticify::castTo(graph, t, dtype, anchor);
  }

  /// The tensor for \p v: its lifted value, or a host scalar made a 0-d
  /// tensor of its TorchScript type's dtype on the data's device.
  Value *operand(Value *v, const Node *anchor) {
    if (auto it = lifted.find(v); it != lifted.end())
      return it->second;
    // A host value becomes a tensor once per block, at its first use there:
    // nodes are lifted in program order, so later uses are dominated.
    auto key = std::make_pair(v, anchor->owningBlock());
    if (auto it = hostTensors.find(key); it != hostTensors.end())
      return it->second;
    auto dtype = liftedDType(v->type());
    // scalar_tensor takes a number: a bool goes in as an int.
    Value *number = v->type()->kind() == c10::TypeKind::BoolType
                        ? emit(graph, "aten::Int", {v}, anchor)
                        : v;
    Value *t =
        emit(graph, "aten::scalar_tensor", {number}, anchor,
             {torch::jit::NamedValue("dtype", static_cast<int64_t>(*dtype)),
              torch::jit::NamedValue("device", device)});
    hostTensors.emplace(key, t);
    return t;
  }

  void liftOp(Node *node) {
    torch::jit::WithInsertPoint guard(node);
    std::vector<Value *> args;
    for (Value *in : node->inputs())
      args.push_back(operand(in, node));
    lifted[node->output()] = emitScalarOpOnTensors(graph, node, args);
  }

  /// The body of \p loop (prepared by prepareLoop) ends as the comment
  /// on loops above says: each changed carried tensor selected by `active`
  /// when the carried shapes, dtypes and devices agree (a guard on host
  /// metadata), the original's way otherwise; the loop goes on while its
  /// host terms hold.
  void runToBound(Node *loop, const Region &region) {
    torch::jit::Block *body = loop->blocks()[0];
    Node *ret = body->return_node();
    Value *act = active.at(loop);
    std::vector<Value *> terms, data;
    conjunctionTerms(ret->input(0), region, terms, data);
    torch::jit::WithInsertPoint guard(ret);
    Value *host = nullptr, *goOn = nullptr;
    for (Value *term : terms)
      host = host ? emit(graph, "aten::__and__", {host, term}, loop) : term;
    if (!host)
      host = graph.insertConstant(true);
    for (Value *term : data)
      goOn = goOn ? emit(graph, "aten::logical_and", {goOn, lifted.at(term)},
                         loop)
                  : lifted.at(term);
    std::vector<size_t> changed;
    for (size_t j = 1; j < ret->inputs().size(); ++j)
      if (isTensor(ret->input(j)) && ret->input(j) != body->inputs()[j])
        changed.push_back(j);
    Value *agree = nullptr;
    auto both = [&](Value *a, Value *b, const char *meta) {
      return emit(graph, "aten::eq",
                  {emit(graph, meta, {a}, loop), emit(graph, meta, {b}, loop)},
                  loop);
    };
    for (size_t j : changed) {
      Value *next = ret->input(j), *prev = body->inputs()[j];
      std::vector<Value *> checks = {both(next, prev, "prim::dtype"),
                                     both(next, prev, "prim::device"),
                                     both(prev, act, "prim::device")};
      if (!provablySameShape(next, prev)) // `steps + 1` is
        checks.push_back(both(next, prev, "aten::size"));
      for (Value *ok : checks)
        agree = agree ? emit(graph, "aten::__and__", {agree, ok}, loop) : ok;
    }
    std::vector<Value *> outs = emitIf(
        graph, agree, loop, changed.size() + 1,
        [&] {
          std::vector<Value *> v;
          for (size_t j : changed)
            v.push_back(emit(graph, "aten::where",
                             {act, ret->input(j), body->inputs()[j]}, loop));
          v.push_back(host);
          return v;
        },
        [&] {
          // Only reached while the original runs (see above): its way.
          std::vector<Value *> v;
          for (size_t j : changed)
            v.push_back(ret->input(j));
          v.push_back(emit(graph, "aten::__and__",
                           {emit(graph, "aten::Bool", {goOn}, loop), host},
                           loop));
          return v;
        });
    outs[0]->node()->i_(guardAttr(), 1);
    outs.back()->setType(c10::BoolType::get());
    // On act's device: a condition computed elsewhere must not move it
    // (the guard above compares carried devices with act's).
    Value *nextAct = emit(
        graph, "aten::logical_and",
        {act, emit(graph, "aten::to",
                   {goOn, emit(graph, "prim::device", {act}, loop)}, loop)},
        loop);
    ret->replaceInput(0, outs.back());
    for (size_t k = 0; k < changed.size(); ++k)
      ret->replaceInput(changed[k], outs[k]);
    ret->addInput(nextAct);
    loop->addOutput()->setType(c10::TensorType::get());
  }

  void liftIf(Node *node) {
    torch::jit::WithInsertPoint guard(node);
    Value *c = lifted.at(node->input(0));
    if (auto it = conditions.find(node); it != conditions.end()) {
      Node *standIn = it->second->node();
      standIn->output()->replaceAllUsesWith(c);
      standIn->destroy();
    }
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      Value *a = node->blocks()[0]->outputs()[i];
      Value *b = node->blocks()[1]->outputs()[i];
      Value *out = node->output(i);
      if (isTensor(out)) {
        out->replaceAllUsesWith(selectBranch(graph, c, a, b, node));
        continue;
      }
      // Undefined in one branch (an early return's): read only where the
      // other ran (selectBranch).
      if (isUndefined(a) || isUndefined(b)) {
        lifted[out] = operand(isUndefined(a) ? b : a, node);
        continue;
      }
      lifted[out] = emit(graph, "aten::where",
                         {c, operand(a, node), operand(b, node)}, node);
    }
  }

  /// \p store as `v.masked_fill_(positions in the region, value)`, or
  /// `v.copy_(where(positions in the region, value, v))`: bounds, lifted
  /// or host numbers, made non-negative and clamped to the dim as slicing
  /// does; a tensor value (not a host number made one) goes in by where.
  void liftRangeStore(const RangeStore &store, PassContext &ctx) {
    Node *write = store.write;
    torch::jit::WithInsertPoint guard(write);
    Value *v = store.slices.front()->input(0);
    // A missing bound: 0, or past any size (the form clamps it to the dim's).
    auto bound = [&](Value *b, int64_t missing) {
      return operand(b->mustBeNone() ? graph.insertConstant(missing) : b, write);
    };
    Value *mask = nullptr;
    for (Node *slice : store.slices) {
      if (slice->input(2)->mustBeNone() && slice->input(3)->mustBeNone())
        continue; // every position
      Value *inside = insertForm(
          graph, "slice_positions",
          {v, slice->input(1), bound(slice->input(2), 0),
           bound(slice->input(3), std::numeric_limits<int64_t>::max())},
          write)[0];
      mask = mask ? emit(graph, "aten::__and__", {mask, inside}, write) : inside;
    }
    Value *value = write->input(1);
    if (!store.valueSlices.empty()) {
      // Each position of the region takes the element of the value's
      // tensor there, on v's device, in v's dtype (as copy_ casts).
      value = store.valueSlices.front()->input(0);
      value = emit(graph, "aten::to",
                   {value, emit(graph, "prim::device", {v}, write),
                    emit(graph, "prim::dtype", {v}, write)},
                   write);
    } else if (write->kind() == c10::aten::copy_ &&
               value->node()->kind() == c10::aten::tensor &&
               !isTensor(value->node()->input(0)) &&
               value->node()->input(0)->type()->kind() !=
                   c10::TypeKind::BoolType) {
      // A host number made a tensor (`x[a:b] = 0.0`): masked_fill's number
      // (not a bool, which its Scalar does not take: that one goes in by
      // where, as a tensor).
      value = value->node()->input(0);
    } else if (isTensor(value)) {
      value = emit(graph, "aten::to",
                   {value, emit(graph, "prim::dtype", {v}, write)}, write);
    }
    if (isTensor(value))
      emit(graph, "aten::copy_",
           {v, emit(graph, "aten::where", {mask, value, v}, write)}, write);
    else
      emit(graph, "aten::masked_fill_", {v, mask, value}, write);
    ctx.rewrote(write, kRule);
    write->destroy();
    // Innermost first; a slice's dtype and device are its tensor's.
    for (const auto *chain : {&store.slices, &store.valueSlices}) {
      for (auto it = chain->rbegin(); it != chain->rend(); ++it) {
        Node *slice = *it;
        slice->output()->replaceAllUsesWith(slice->input(0));
        ctx.rewrote(slice, kRule);
        slice->destroy();
      }
    }
  }

  /// x[a:b] (dim 0, step 1) with a bound lifted: the rows whose position p
  /// has p >= a and p < b, each bound wrapped from the end as slicing
  /// wraps it (a bound past either end selects as the clamped one does).
  void liftRangeRead(Node *slice, PassContext &ctx) {
    torch::jit::WithInsertPoint guard(slice);
    Value *x = slice->input(0);
    Value *rows = emit(graph, "aten::size", {x, 0}, slice);
    Value *device = emit(graph, "prim::device", {x}, slice);
    Value *p = emit(graph, "aten::arange", {rows}, slice,
                    {torch::jit::NamedValue(
                         "dtype", static_cast<int64_t>(c10::ScalarType::Long)),
                     torch::jit::NamedValue("device", device)});
    Value *mask = nullptr;
    for (size_t i : {size_t(2), size_t(3)}) {
      Value *b = slice->input(i);
      if (b->mustBeNone() || (i == 2 && constantInt(b) == 0))
        continue;
      Value *t = emit(graph, "aten::to", {operand(b, slice), device}, slice);
      Value *wrapped = emit(
          graph, "aten::where",
          {emit(graph, "aten::lt", {t, 0}, slice),
           emit(graph, "aten::add", {t, rows}, slice), t},
          slice);
      Value *side = emit(graph, i == 2 ? "aten::ge" : "aten::lt", {p, wrapped},
                         slice);
      mask = mask ? emit(graph, "aten::__and__", {mask, side}, slice) : side;
    }
    Value *list = graph
                      .insertNode(graph.createList(c10::OptionalType::ofTensor(),
                                                   {mask}))
                      ->output();
    slice->output()->replaceAllUsesWith(
        emit(graph, "aten::index", {x, list}, slice));
    ctx.rewrote(slice, kRule);
    slice->destroy();
  }

  void liftSink(Node *user, size_t offset, PassContext &ctx) {
    if (offset == kRangeStore) {
      if (stored.insert(user).second) // else made at another bound
        liftRangeStore(*rangeStoreAt(user), ctx);
      return;
    }
    if (offset == kRangeRead) {
      liftRangeRead(user, ctx);
      return;
    }
    torch::jit::WithInsertPoint guard(user);
    Value *t = lifted.at(user->input(offset));
    if (isScalarFactory(user, offset)) {
      // TorchScript makes a float in the default dtype first (0.1 with
      // dtype=float64 is 0.10000000149011612), an int in int64, a bool in
      // bool: the lifted tensor's dtype but for floats.
      if (user->input(offset)->type()->kind() == c10::TypeKind::FloatType)
        t = emit(graph, "aten::to", {t, emitDefaultDType(graph, user)}, user);
      Value *made = emit(graph, "aten::to",
                         {t, namedInput(user, "device"),
                          namedInput(user, "dtype")},
                         user);
      user->output()->replaceAllUsesWith(made);
      ctx.rewrote(user, kRule);
      user->destroy();
      return;
    }
    if (drawsBelow(user, offset)) {
      IntDraw draw = *intDraw(user);
      Value *drawn = insertRandomBelow(graph, draw.low, t, draw.size,
                                       draw.dtype, draw.device, user);
      user->output()->replaceAllUsesWith(drawn);
      ctx.rewrote(user, kRule);
      user->destroy();
      return;
    }
    if (takesQParamsAsTensors(user)) {
      // Both qparams as tensors (the one not lifted made one on the host's
      // side), on x's device, in the dtypes the CUDA kernel reads.
      Value *x = user->input(0);
      Value *dev = emit(graph, "prim::device", {x}, user);
      auto qparam = [&](size_t i, c10::ScalarType dtype) {
        return emit(graph, "aten::to",
                    {operand(user->input(i), user), dev,
                     static_cast<int64_t>(dtype)},
                    user);
      };
      Value *replacement =
          emit(graph, user->kind().toQualString(),
               {x, qparam(1, c10::ScalarType::Float),
                qparam(2, c10::ScalarType::Int), user->input(3),
                user->input(4)},
               user);
      user->output()->replaceAllUsesWith(replacement);
      ctx.rewrote(user, kRule);
      user->destroy();
      return;
    }
    Value *scalar = user->input(offset);
    // The tensor the scalar meets: for where(c, a, b), the other value, not
    // the condition.
    Value *ref = nullptr;
    if (user->kind() == c10::aten::where)
      ref = user->input(offset == 1 ? 2 : 1);
    else
      for (Value *in : user->inputs())
        if (isTensor(in) && in != scalar) {
          ref = in;
          break;
        }
    if (scalar->type()->kind() == c10::TypeKind::FloatType ||
        isNumber(scalar)) {
      // A Python float takes the tensor operand's result type (an item() is
      // a float only if t is floating: a branch on a dtype known on the
      // host).
      auto asPythonFloat = [&] {
        Value *rt = emit(graph, "aten::result_type", {ref, 0.0}, user);
        return emit(graph, "aten::to", {t, rt}, user);
      };
      if (!isNumber(scalar))
        t = asPythonFloat();
      else
        t = emitIf(graph, emit(graph, "aten::is_floating_point", {t}, user),
                   user, asPythonFloat, [&] { return t; });
    }
    // The original had a host number, fine next to a tensor on any device;
    // a 0-d tensor must be on the other operand's device. Same device (the
    // usual case): nothing to do; otherwise the copy the original made.
    Value *refDevice = emit(graph, "prim::device", {ref}, user);
    Value *sameDevice =
        emit(graph, "aten::eq",
             {emit(graph, "prim::device", {t}, user), refDevice}, user);
    Value *onDevice = t;
    t = emitIf(
        graph, sameDevice, user, [&] { return onDevice; },
        [&] {
          return emit(graph, "aten::to", {onDevice, refDevice}, user);
        });
    if (user->kind() == c10::aten::select) {
      // x.select(d, i) reads i on the host: index_select by i (wrapped from
      // the end as select does; one out of range raises either way) reads
      // it on the device, a copy of the view, which nothing writes.
      Value *x = user->input(0), *dim = user->input(1);
      Value *size = emit(graph, "aten::size", {x, dim}, user);
      Value *fromEnd = emit(graph, "aten::lt", {t, 0}, user);
      Value *wrapped = emit(graph, "aten::where",
                            {fromEnd, emit(graph, "aten::add", {t, size}, user), t},
                            user);
      Value *one = emit(graph, "aten::reshape",
                        {wrapped, std::vector<int64_t>{1}}, user);
      Value *replacement = emit(
          graph, "aten::squeeze",
          {emit(graph, "aten::index_select", {x, dim, one}, user), dim}, user);
      user->output()->replaceAllUsesWith(replacement);
      ctx.rewrote(user, kRule);
      user->destroy();
      return;
    }
    if (opInfo(user) && opInfo(user)->has(kFillValueTakesTensor)) {
      // masked_fill(x, m, t) with a 0-d tensor t reads t on the host (its
      // CUDA kernel takes t.item()): where(m, t, x) reads nothing. t is
      // cast to x's dtype, as masked_fill casts its value; the two differ
      // only where masked_fill raises (a value that overflows x's dtype),
      // as the cast to the result type above already does.
      Value *x = user->input(0);
      Value *value = emit(graph, "aten::to",
                          {t, emit(graph, "prim::dtype", {x}, user)}, user);
      Value *replacement =
          emit(graph, "aten::where", {user->input(1), value, x}, user);
      user->output()->replaceAllUsesWith(replacement);
      ctx.rewrote(user, kRule);
      user->destroy();
      return;
    }
    // Everything after the first operand goes by name: keyword-only
    // arguments of the Tensor overload (alpha, rounding_mode) are positional
    // in the Scalar one, and matched positionally schema matching would pick
    // the Scalar overload again and read the tensor back.
    std::vector<torch::jit::NamedValue> args = {user->input(0)}, kwargs;
    const auto &schemaArgs = user->schema().arguments();
    for (size_t i = 1; i < user->inputs().size(); ++i)
      kwargs.emplace_back(schemaArgs.at(i).name(),
                          i == offset ? t : user->input(i));
    Value *replacement =
        emit(graph, user->kind().toQualString(), args, user, kwargs);
    user->output()->replaceAllUsesWith(replacement);
    ctx.rewrote(user, kRule);
    user->destroy();
  }
};

/// Adds `active` to \p loop's carried values, true on entry, on the device
/// of the first tensor whose value the body changes; shields the body's ops
/// by it. Returns the body's parameter.
Value *prepareLoop(Graph &graph, Node *loop, const AnalysisResult &facts) {
  torch::jit::Block *body = loop->blocks()[0];
  Value *first = nullptr;
  for (size_t j = 0; j < loop->outputs().size() && !first; ++j)
    if (isTensor(body->outputs()[j + 1]) &&
        body->outputs()[j + 1] != body->inputs()[j + 1])
      first = loop->input(j + 2);
  Value *entry;
  {
    torch::jit::WithInsertPoint guard(loop);
    entry = emit(
        graph, "aten::scalar_tensor", {1}, loop,
        {torch::jit::NamedValue("dtype",
                                static_cast<int64_t>(c10::ScalarType::Bool)),
         torch::jit::NamedValue("device",
                                emit(graph, "prim::device", {first}, loop))});
  }
  loop->addInput(entry);
  Value *act = body->addInput()->setType(c10::TensorType::get());
  torch::jit::WithInsertPoint guard(*body->nodes().begin());
  Value *notAct = emit(graph, "aten::logical_not", {act}, loop);
  shieldBlock(graph, body, act, notAct, &facts);
  return act;
}

} // namespace

bool liftScalars(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  const AnalysisResult &analysis = ctx.facts.analysis(graph);
  std::vector<Node *> sources;
  for (Node *node : analysis.nodesWhere([](c10::Symbol op) {
         return anyOpInfo(op, [](const OpInfo &e) {
           return e.role == OpRole::SyncRead || e.role == OpRole::ShapeRead ||
                  e.has(kHostConversion);
         });
       }))
    if (isSource(node))
      sources.push_back(node);
  if (sources.empty())
    return false;
  const Aliases &aliases = ctx.facts.aliases(graph);
  // Sources whose regions meet (the sampler's two counts meet in the ifs
  // that balance them) are lifted together or not at all.
  std::vector<size_t> group(sources.size());
  std::unordered_map<Node *, size_t> firstToucher;
  std::function<size_t(size_t)> find = [&](size_t i) {
    return group[i] == i ? i : group[i] = find(group[i]);
  };
  for (size_t i = 0; i < sources.size(); ++i) {
    group[i] = i;
    for (Node *n : growRegion({sources[i]}, aliases, analysis,
                              ctx.options.staticLoops)
                       .touched) {
      auto [it, inserted] = firstToucher.emplace(n, i);
      if (!inserted)
        group[find(i)] = find(it->second);
    }
  }
  std::unordered_map<size_t, std::vector<Node *>> components;
  std::vector<size_t> roots;
  for (size_t i = 0; i < sources.size(); ++i) {
    auto &members = components[find(i)];
    if (members.empty())
      roots.push_back(find(i));
    members.push_back(sources[i]);
  }
  std::vector<Region> regions;
  std::unordered_set<Node *> convertedIfs;
  for (size_t root : roots) {
    Region region = growRegion(components[root], aliases, analysis,
                               ctx.options.staticLoops);
    if (!region.whyNot.empty()) {
      for (Node *source : region.sources)
        ctx.declined(source, kRule, region.whyNot);
      if (region.blocker)
        ctx.declined(region.blocker, kRule, region.whyNot);
      continue;
    }
    convertedIfs.insert(region.ifs.begin(), region.ifs.end());
    regions.push_back(std::move(region));
  }
  if (regions.empty())
    return false;
  // The regions' nodes ranked in program order once the branches of every
  // converted if are hoisted before it: from the analysis's node order, in
  // which an if comes before its branches' nodes, a converted if ranks
  // after the last of them instead, and an if that ends where the one
  // around it ends (its last branch node is that one's) before that one.
  std::unordered_map<const Node *, Rank> rank;
  for (const Region &region : regions) {
    for (const auto *set : {&region.ops, &region.ifs})
      for (const Node *n : *set)
        rank.emplace(n, Rank());
    for (const auto &[n, offset] : region.sinks)
      rank.emplace(n, Rank());
  }
  std::vector<std::pair<size_t, Node *>> ifsByPosition;
  const std::vector<Node *> &nodes = analysis.nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto it = rank.find(nodes[i]);
    if (it == rank.end())
      continue;
    if (convertedIfs.count(nodes[i])) {
      size_t last = i + countNodes(nodes[i]) - 1;
      it->second = {2 * last + 1, nodes.size() - i};
      ifsByPosition.emplace_back(i, nodes[i]);
    } else {
      it->second = {2 * i, 0};
    }
  }
  // The ops of their branches that may raise on values get shields, on a
  // stand-in for the lifted condition (liftIf puts the condition in), while
  // the analysis's dtype facts still name the graph's values.
  std::unordered_map<Node *, Value *> conditions;
  for (const auto &[at, ifNode] : ifsByPosition) {
    torch::jit::WithInsertPoint guard(ifNode);
    Value *standIn =
        graph->insertNode(graph->createUninitialized(c10::TensorType::get()))
            ->output();
    shieldBranches(*graph, ifNode, standIn, &analysis);
    conditions.emplace(ifNode, standIn);
  }
  // Loops a region ends carry `active` from now on, and their body's ops
  // that may raise on values are shielded by it.
  std::unordered_map<Node *, Value *> active;
  for (const Region &region : regions)
    for (Node *loop : region.loops)
      active.emplace(loop, prepareLoop(*graph, loop, analysis));
  // Hoist innermost first, so that program order has each value before
  // its use.
  for (auto it = ifsByPosition.rbegin(); it != ifsByPosition.rend(); ++it)
    hoistBranches(it->second);
  for (const Region &region : regions)
    Lifter(*graph, conditions, active).run(region, rank, ctx);
  return true;
}

} // namespace staticify
