//===- EmptyShapes.cpp - When two empty tensors cannot be told apart ------===//
//
// torchvision's BoxCoder.decode ends with
//
//     if box_sum > 0:
//         pred_boxes = pred_boxes.reshape(box_sum, -1, 4)
//
// so its result is [n, classes, 4] where there are boxes and [0, 4 * classes]
// where there are none: the branches' results have different ranks, and no
// device pick chooses between ranks. But the else branch runs only where n
// is 0, so the two differ only in the shape of a tensor with no rows. Where
// the program after the if cannot tell those two empty tensors apart, the
// then branch's rows may stand for both, and both branches run on the
// device (DriverIfs.cpp, selectBothBranches).
//
// "Cannot tell apart" is shown by evaluating the program on shapes: each
// value that depends on the if's result gets two abstract values, one per
// branch, in which sizes are a*T + b of one unknown size T >= 0 (the row
// size the branches reshape). A value whose two abstract values are equal
// (an empty tensor of one shape, a size or rank that agrees) is the same
// whichever branch ran and is followed no further. Every other use must be
// an op with a shape function below that raises for neither (a slice on a
// dimension both have, a stack of equal shapes, a reshape whose -1 is
// unambiguous), and no such value may reach a block's results, a
// condition, a loop or an op without one. Postprocess's
// `clip_boxes_to_image` (a rank read and slices along the last dimension,
// stacked), `boxes[:, 1:]` and `reshape(-1, 4)` meet again there: [0, 4]
// either way.
//
// The rows both branches start from are [0, f*T], f the factor of their
// row size the ops that made them show (rowSizeFactor: 4 for decode's
// `stack(..., dim=2).flatten(1)`). The then branch is evaluated as the
// rules compute it, hoisted: its `reshape(n, -1, s...)` takes the row size
// over prod(s) for -1 (reshapeByCount), which f must show is whole.
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Rules.h"

#include "passes/GraphUtils.h"
#include "passes/OpInfo.h"
#include "passes/Selection.h"

#include <array>

namespace staticify::bound {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// A size a*T + b of the one unknown size T >= 0, or unknown.
struct Dim {
  bool known = false;
  int64_t a = 0, b = 0;
  static Dim of(int64_t c) { return {true, 0, c}; }
  bool isZero() const { return known && a == 0 && b == 0; }
  /// Nonzero whatever T is.
  bool nonZero() const { return known && a >= 0 && b > 0; }
  bool operator==(const Dim &o) const {
    return known && o.known && a == o.a && b == o.b;
  }
};

using Dims = std::vector<Dim>;

bool equal(const Dims &x, const Dims &y) {
  return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin());
}

/// Whether a size is 0 whatever T is: the tensor has no elements.
bool empty(const Dims &dims) {
  return std::any_of(dims.begin(), dims.end(),
                     [](const Dim &d) { return d.isZero(); });
}

int64_t floorDiv(int64_t x, int64_t k) {
  return x / k - ((x % k != 0) && ((x < 0) != (k < 0)));
}

/// The product of \p dims where at most one is not a constant.
Dim product(const Dims &dims) {
  Dim p = Dim::of(1);
  for (const Dim &d : dims) {
    if (!d.known || (p.a != 0 && d.a != 0))
      return {};
    p = {true, p.a * d.b + d.a * p.b, p.b * d.b};
  }
  return p;
}

/// What a value is in one branch's world.
struct Abs {
  enum class Kind {
    Same,    // equal in both: not followed (a list's length, a device)
    Tensor,  // `dims`; always empty: a dimension is 0
    Int,     // `value`
    Ints,    // `dims`: a list of ints
    Tensors, // `elements`: a list of tensors; `uniform`: elements[0] is
             // every element's (a split's), the length the same in both
  } kind = Kind::Same;
  Dims dims;
  Dim value;
  std::vector<Dims> elements;
  bool uniform = false;

  static Abs tensor(Dims d) {
    Abs r;
    r.kind = Kind::Tensor;
    r.dims = std::move(d);
    return r;
  }
  static Abs integer(Dim d) {
    Abs r;
    r.kind = Kind::Int;
    r.value = d;
    return r;
  }
  static Abs ints(Dims d) {
    Abs r;
    r.kind = Kind::Ints;
    r.dims = std::move(d);
    return r;
  }
  static Abs tensors(std::vector<Dims> e, bool uniform) {
    Abs r;
    r.kind = Kind::Tensors;
    r.elements = std::move(e);
    r.uniform = uniform;
    return r;
  }
};

bool equal(const Abs &x, const Abs &y) {
  if (x.kind != y.kind)
    return false;
  switch (x.kind) {
  case Abs::Kind::Same:
    return true;
  case Abs::Kind::Tensor:
  case Abs::Kind::Ints:
    return equal(x.dims, y.dims);
  case Abs::Kind::Int:
    return x.value == y.value;
  case Abs::Kind::Tensors:
    if (x.uniform != y.uniform || x.elements.size() != y.elements.size())
      return false;
    for (size_t i = 0; i < x.elements.size(); ++i)
      if (!equal(x.elements[i], y.elements[i]))
        return false;
    return true;
  }
  return false;
}

/// \p d made non-negative against \p rank, or nullopt where it raises.
std::optional<int64_t> normDim(const Dim &d, int64_t rank) {
  if (!d.known || d.a != 0 || d.b < -rank || d.b >= rank)
    return std::nullopt;
  return d.b < 0 ? d.b + rank : d.b;
}

bool isNone(const Value *v) {
  return v->type()->kind() == c10::TypeKind::NoneType;
}

class EmptyShapes {
public:
  EmptyShapes(RuleContext &rc, Value *n) : rc(rc), n(n) {}

  std::string why(Node *ifNode, size_t i);

private:
  RuleContext &rc;
  Value *n; // the tested count: 0 wherever the else branch runs
  /// Values that depend on the if's result: their abstract value in the
  /// then branch's world [0] and the else branch's [1].
  std::unordered_map<const Value *, std::array<Abs, 2>> env;
  /// While the branches are evaluated: the rows they start from, as both
  /// worlds see them.
  std::unordered_map<const Value *, Abs> seeds;
  std::string failure;

  std::nullopt_t fail(const Node *node, const std::string &what) {
    failure = std::string("'") + node->kind().toQualString() + "' " + what;
    return std::nullopt;
  }

  const Abs *tracked(const Value *v, int w) const {
    if (auto it = seeds.find(v); it != seeds.end())
      return &it->second;
    if (auto it = env.find(v); it != env.end())
      return &it->second[w];
    return nullptr;
  }
  bool touches(const Node *node) const {
    return std::any_of(node->inputs().begin(), node->inputs().end(),
                       [&](const Value *v) { return tracked(v, 0); });
  }
  const Dims *tensorArg(const Value *v, int w) const {
    const Abs *a = tracked(v, w);
    return a && a->kind == Abs::Kind::Tensor ? &a->dims : nullptr;
  }
  Dim intArg(const Value *v, int w) const {
    if (const Abs *a = tracked(v, w))
      return a->kind == Abs::Kind::Int ? a->value : Dim{};
    if (v == n)
      return Dim::of(0);
    if (std::optional<int64_t> c = constantInt(v))
      return Dim::of(*c);
    return {};
  }
  std::optional<Dims> intsArg(const Value *v, int w) const {
    if (const Abs *a = tracked(v, w))
      return a->kind == Abs::Kind::Ints ? std::optional<Dims>(a->dims)
                                        : std::nullopt;
    if (std::optional<std::vector<int64_t>> c = constantIntList(v)) {
      Dims out;
      for (int64_t x : *c)
        out.push_back(Dim::of(x));
      return out;
    }
    const Node *list = v->node();
    if (list->kind() != c10::prim::ListConstruct)
      return std::nullopt;
    Dims out;
    for (const Value *x : list->inputs())
      out.push_back(intArg(x, w));
    return out;
  }

  std::optional<std::vector<Abs>> transfer(Node *node, int w, bool hoisted);
  std::optional<std::vector<Abs>> slice(Node *node, const Dims &t, int w);
  std::optional<std::vector<Abs>> reshape(Node *node, const Dims &t, int w,
                                          bool hoisted);
  std::optional<std::vector<Abs>> combine(Node *node, int w);
  std::optional<std::vector<Abs>> sameShape(Node *node, const Dims &t, int w);

  /// Evaluates \p block's nodes in world \p w (a branch of the if).
  bool evalBranch(Block *block, int w, bool hoisted);
  /// Follows the values that depend on the result through the rest of
  /// \p block from \p from, both worlds at once.
  bool walk(Block *block, Node *from);
};

std::optional<std::vector<Abs>> EmptyShapes::slice(Node *node, const Dims &t,
                                                   int w) {
  std::optional<int64_t> dim =
      normDim(intArg(node->input(1), w), static_cast<int64_t>(t.size()));
  std::optional<int64_t> step = constantInt(node->input(4));
  if (!dim)
    return fail(node, "is on a dimension one of the shapes lacks");
  if (!step || *step <= 0)
    return fail(node, "has a step not known to be positive");
  Dims out = t;
  Dim size = t[*dim];
  std::optional<int64_t> start =
      isNone(node->input(2)) ? std::optional<int64_t>(0)
                             : constantInt(node->input(2));
  std::optional<int64_t> end =
      isNone(node->input(3))
          ? std::optional<int64_t>(std::numeric_limits<int64_t>::max())
          : constantInt(node->input(3));
  Dim length;
  if (size.known && start && *start >= 0 && end && *end >= 0) {
    bool open = *end >= std::numeric_limits<int64_t>::max() / 2;
    if (size.a == 0) {
      int64_t s = std::min(*start, size.b), e = std::min(*end, size.b);
      length = Dim::of(e > s ? (e - s + *step - 1) / *step : 0);
    } else if (open && size.a > 0 && size.a % *step == 0) {
      // ceil((a*T + b - s) / k) = (a/k)*T + ceil((b - s) / k), which is
      // the length wherever it is not negative for every T.
      int64_t c = -floorDiv(*start - size.b, *step);
      if (c >= 0)
        length = {true, size.a / *step, c};
    }
  }
  out[*dim] = length;
  if (!empty(out))
    return fail(node, "may make a tensor that is not empty");
  return std::vector<Abs>{Abs::tensor(out)};
}

std::optional<std::vector<Abs>> EmptyShapes::reshape(Node *node, const Dims &t,
                                                     int w, bool hoisted) {
  std::optional<Dims> sizes = intsArg(node->input(1), w);
  if (!sizes || sizes->empty())
    return fail(node, "takes sizes the shapes do not follow");
  std::optional<size_t> free;
  for (size_t i = 0; i < sizes->size(); ++i) {
    const Dim &s = (*sizes)[i];
    if (s == Dim::of(-1) && !free) {
      free = i;
      continue;
    }
    if (!s.known || s.a < 0 || s.b < 0)
      return fail(node, "takes a size not known to be valid");
  }
  Dims out = *sizes;
  const Node *list = node->input(1)->node();
  const bool byCount = hoisted && list->kind() == c10::prim::ListConstruct &&
                       list->input(0) == n;
  const Dim row = product(Dims(t.begin() + 1, t.end()));
  if (byCount && !free) {
    // reshapeByCount reshapes the padded rows to [rows, s...], which
    // raises where a row's size is not prod(s), with no rows valid too.
    Dim known = product(Dims(out.begin() + 1, out.end()));
    if (!(row == known))
      return fail(node, "reshapes rows of a size not provably the one asked");
  }
  if (free) {
    Dims others;
    for (size_t i = 0; i < out.size(); ++i)
      if (i != *free)
        others.push_back(out[i]);
    if (byCount && *free != 0) {
      // reshapeByCount, hoisted: -1 is the row size over the other
      // sizes but n, where its guard finds it a multiple.
      Dims rest(others.begin() + 1, others.end());
      Dim known = product(rest);
      if (!known.known || known.a != 0 || known.b <= 0 || !row.known)
        return fail(node, "has a -1 the shapes cannot resolve");
      int64_t k = known.b;
      if (row.a % k != 0 || row.b % k != 0)
        return fail(node, "has a -1 over a row size not provably a multiple "
                          "of the other sizes");
      out[*free] = {true, row.a / k, row.b / k};
      out[0] = Dim::of(0);
      return std::vector<Abs>{Abs::tensor(out)};
    }
    // Of an empty tensor, -1 is 0 where the other sizes' product is not
    // (the original raises where it is: the -1 could be anything).
    for (const Dim &d : others)
      if (!d.nonZero())
        return fail(node, "has a -1 that may be ambiguous");
    out[*free] = Dim::of(0);
  } else if (!empty(out)) {
    return fail(node, "may ask an empty tensor for elements");
  }
  return std::vector<Abs>{Abs::tensor(out)};
}

std::optional<std::vector<Abs>> EmptyShapes::combine(Node *node, int w) {
  const Abs *list = tracked(node->input(0), w);
  if (!list || list->kind != Abs::Kind::Tensors)
    return fail(node, "combines tensors of unknown shapes");
  const bool stacks = node->kind() == c10::aten::stack;
  if (list->uniform) {
    // A split's pieces: cat along the rows is as empty, of their shape.
    std::optional<int64_t> dim = normDim(
        intArg(node->input(1), w), static_cast<int64_t>(list->elements[0].size()));
    if (stacks || dim != 0)
      return fail(node, "combines a list of unknown length");
    return std::vector<Abs>{Abs::tensor(list->elements[0])};
  }
  if (list->elements.empty())
    return fail(node, "combines no tensors");
  const Dims &first = list->elements[0];
  const int64_t rank = static_cast<int64_t>(first.size());
  std::optional<int64_t> dim =
      normDim(intArg(node->input(1), w), stacks ? rank + 1 : rank);
  if (!dim)
    return fail(node, "is along a dimension one of the shapes lacks");
  Dims out = first;
  for (size_t e = 1; e < list->elements.size(); ++e) {
    const Dims &other = list->elements[e];
    if (other.size() != first.size())
      return fail(node, "combines tensors of different ranks");
    for (int64_t d = 0; d < rank; ++d) {
      if (!stacks && d == *dim) {
        Dim &sum = out[d];
        sum = sum.known && other[d].known
                  ? Dim{true, sum.a + other[d].a, sum.b + other[d].b}
                  : Dim{};
        continue;
      }
      if (!(other[d] == first[d]))
        return fail(node, "combines tensors whose shapes may differ");
    }
  }
  if (stacks)
    out.insert(out.begin() + *dim,
               Dim::of(static_cast<int64_t>(list->elements.size())));
  if (!empty(out))
    return fail(node, "may make a tensor that is not empty");
  return std::vector<Abs>{Abs::tensor(out)};
}

std::optional<std::vector<Abs>> EmptyShapes::sameShape(Node *node,
                                                       const Dims &t, int w) {
  const OpInfo *info = opInfo(node);
  bool second = info && info->has(kTypeOfSecond);
  for (size_t i = 1; i < node->inputs().size(); ++i) {
    const Value *in = node->input(i);
    if (!isTensor(in) || (second && i == 1))
      continue;
    if (const Dims *other = tensorArg(in, w)) {
      if (!equal(*other, t))
        return fail(node, "broadcasts shapes that may differ");
    } else if (!provablyZeroDim(in)) {
      return fail(node, "broadcasts against a tensor of unknown shape");
    }
  }
  const int64_t rank = static_cast<int64_t>(t.size());
  if (Value *dim = namedInput(node, "dim"))
    if (!isNone(dim) && !normDim(intArg(dim, w), rank))
      return fail(node, "is along a dimension one of the shapes lacks");
  if (Value *dims = namedInput(node, "dims")) {
    std::optional<Dims> each = intsArg(dims, w);
    if (!each || std::any_of(each->begin(), each->end(), [&](const Dim &d) {
          return !normDim(d, rank);
        }))
      return fail(node, "is along a dimension one of the shapes lacks");
  }
  // A memory format other than contiguous or preserve asks for a rank.
  if (Value *format = namedInput(node, "memory_format"))
    if (!isNone(format) && constantInt(format) != 0 && constantInt(format) != 1)
      return fail(node, "asks for a memory format of some rank");
  std::vector<Abs> out;
  for (const Value *o : node->outputs()) {
    if (!isTensor(o))
      return fail(node, "returns more than a tensor");
    out.push_back(Abs::tensor(t));
  }
  return out;
}

std::optional<std::vector<Abs>> EmptyShapes::transfer(Node *node, int w,
                                                      bool hoisted) {
  const std::string op = node->kind().toQualString();
  const Value *in0 = node->inputs().empty() ? nullptr : node->input(0);
  const Dims *t = in0 ? tensorArg(in0, w) : nullptr;
  const Abs *first = in0 ? tracked(in0, w) : nullptr;
  const int64_t rank = t ? static_cast<int64_t>(t->size()) : 0;
  if (op == "prim::device" || op == "prim::dtype" || op == "prim::layout")
    return std::vector<Abs>{Abs{}};
  if (op == "prim::ListConstruct") {
    if (node->output()->type()->isSubtypeOf(*c10::ListType::ofInts())) {
      Dims out;
      for (const Value *v : node->inputs())
        out.push_back(intArg(v, w));
      return std::vector<Abs>{Abs::ints(out)};
    }
    std::vector<Dims> elements;
    for (const Value *v : node->inputs()) {
      const Dims *e = tensorArg(v, w);
      if (!e)
        return fail(node, "lists a tensor of unknown shape beside them");
      elements.push_back(*e);
    }
    return std::vector<Abs>{Abs::tensors(elements, false)};
  }
  if (op == "aten::__getitem__" && first) {
    if (first->kind == Abs::Kind::Tensors) {
      if (first->uniform) {
        if (tracked(node->input(1), w))
          return fail(node, "reads an element the shapes cannot name");
        return std::vector<Abs>{Abs::tensor(first->elements[0])};
      }
      std::optional<int64_t> k = normDim(
          intArg(node->input(1), w), static_cast<int64_t>(first->elements.size()));
      if (!k)
        return fail(node, "reads an element the shapes cannot name");
      return std::vector<Abs>{Abs::tensor(first->elements[*k])};
    }
    if (first->kind == Abs::Kind::Ints) {
      std::optional<int64_t> k = normDim(
          intArg(node->input(1), w), static_cast<int64_t>(first->dims.size()));
      if (!k)
        return fail(node, "reads an element the shapes cannot name");
      return std::vector<Abs>{Abs::integer(first->dims[*k])};
    }
  }
  if (op == "aten::len" && first && first->kind == Abs::Kind::Tensors)
    return std::vector<Abs>{
        first->uniform
            ? Abs{}
            : Abs::integer(Dim::of(static_cast<int64_t>(first->elements.size())))};
  if (op == "prim::ListUnpack" && first && first->kind == Abs::Kind::Tensors) {
    std::vector<Abs> out;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      if (!first->uniform && first->elements.size() != node->outputs().size())
        return fail(node, "unpacks a list of another length");
      out.push_back(Abs::tensor(first->elements[first->uniform ? 0 : i]));
    }
    return out;
  }
  if (op == "aten::stack" || op == "aten::cat")
    return combine(node, w);
  if (!t)
    return fail(node, "reads them in a way the shapes do not follow");
  if (op == "aten::split" || op == "aten::split_with_sizes") {
    // Of no rows, by sizes both worlds share: as many pieces in both (one
    // piece per size, or one), each of no rows.
    if (normDim(intArg(node->input(2), w), rank) != 0 || !(*t)[0].isZero() ||
        tracked(node->input(1), w))
      return fail(node, "splits other than empty rows by sizes both share");
    return std::vector<Abs>{Abs::tensors({*t}, true)};
  }
  if (op == "aten::dim")
    return std::vector<Abs>{Abs::integer(Dim::of(rank))};
  if (op == "aten::numel")
    return std::vector<Abs>{Abs::integer(Dim::of(0))};
  if (op == "aten::len") {
    if (rank == 0)
      return fail(node, "takes the length of a 0-d tensor");
    return std::vector<Abs>{Abs::integer((*t)[0])};
  }
  if (op == "aten::size") {
    if (node->inputs().size() == 1)
      return std::vector<Abs>{Abs::ints(*t)};
    std::optional<int64_t> d = normDim(intArg(node->input(1), w), rank);
    if (!d)
      return fail(node, "reads a dimension one of the shapes lacks");
    return std::vector<Abs>{Abs::integer((*t)[*d])};
  }
  if (op == "aten::slice")
    return slice(node, *t, w);
  if (op == "aten::select") {
    std::optional<int64_t> d = normDim(intArg(node->input(1), w), rank);
    Dim index = intArg(node->input(2), w);
    if (!d || !index.known || index.a != 0)
      return fail(node, "selects where one of the shapes may not have it");
    const Dim &size = (*t)[*d];
    bool inRange = size.known && size.a >= 0 &&
                   (index.b >= 0 ? size.b > index.b : size.b >= -index.b);
    if (!inRange)
      return fail(node, "selects where one of the shapes may not have it");
    Dims out = *t;
    out.erase(out.begin() + *d);
    if (!empty(out))
      return fail(node, "may make a tensor that is not empty");
    return std::vector<Abs>{Abs::tensor(out)};
  }
  if (op == "aten::unsqueeze") {
    std::optional<int64_t> d = normDim(intArg(node->input(1), w), rank + 1);
    if (!d)
      return fail(node, "is on a dimension one of the shapes lacks");
    Dims out = *t;
    out.insert(out.begin() + *d, Dim::of(1));
    return std::vector<Abs>{Abs::tensor(out)};
  }
  if (op == "aten::flatten") {
    std::optional<int64_t> s = normDim(intArg(node->input(1), w), rank);
    std::optional<int64_t> e = normDim(intArg(node->input(2), w), rank);
    if (!s || !e || *s > *e)
      return fail(node, "is on dimensions one of the shapes lacks");
    Dims out(t->begin(), t->begin() + *s);
    Dims merged(t->begin() + *s, t->begin() + *e + 1);
    out.push_back(empty(merged) ? Dim::of(0) : product(merged));
    out.insert(out.end(), t->begin() + *e + 1, t->end());
    return std::vector<Abs>{Abs::tensor(out)};
  }
  if (op == "aten::reshape" || op == "aten::view")
    return reshape(node, *t, w, hoisted);
  const OpInfo *info = opInfo(node);
  if (info && (info->has(kElementwise) || info->has(kKeepsShape)))
    return sameShape(node, *t, w);
  return fail(node, "reads them in a way the shapes do not follow");
}

bool EmptyShapes::evalBranch(Block *block, int w, bool hoisted) {
  // Views and reshapes of the one tensor both start from: the results have
  // its dtype and device, so that equal shapes later are equal values.
  static const std::unordered_set<std::string> shapeOnly = {
      "aten::reshape", "aten::view",   "aten::flatten", "aten::unsqueeze",
      "aten::slice",   "aten::select", "aten::contiguous", "aten::clone",
      "aten::detach",  "aten::size",   "aten::dim",     "aten::numel",
      "aten::len",     "prim::ListConstruct"};
  for (Node *node : block->nodes()) {
    if (!touches(node))
      continue;
    if (!node->blocks().empty() ||
        !shapeOnly.count(node->kind().toQualString())) {
      fail(node, "in a branch computes more than a view of the rows");
      return false;
    }
    if (node->kind() == c10::prim::ListConstruct &&
        !node->output()->type()->isSubtypeOf(*c10::ListType::ofInts())) {
      fail(node, "in a branch lists the rows");
      return false;
    }
    std::optional<std::vector<Abs>> out = transfer(node, w, hoisted);
    if (!out)
      return false;
    for (size_t k = 0; k < out->size(); ++k)
      env[node->output(k)][w] = (*out)[k];
  }
  return true;
}

bool EmptyShapes::walk(Block *block, Node *from) {
  for (Node *node = from; node != block->return_node(); node = node->next()) {
    if (!touches(node)) {
      for (Block *b : node->blocks())
        if (!walk(b, b->nodes().front()))
          return false;
      continue;
    }
    if (!node->blocks().empty()) {
      fail(node, "takes them into a branch or a loop");
      return false;
    }
    std::optional<std::vector<Abs>> a = transfer(node, 0, false);
    std::optional<std::vector<Abs>> b = a ? transfer(node, 1, false)
                                          : std::nullopt;
    if (!b)
      return false;
    for (size_t k = 0; k < b->size(); ++k)
      if (!equal((*a)[k], (*b)[k]))
        env[node->output(k)] = {(*a)[k], (*b)[k]};
  }
  for (const Value *v : block->return_node()->inputs())
    if (tracked(v, 0)) {
      failure = "a value whose shape differs reaches the results of a block";
      return false;
    }
  return true;
}

std::string EmptyShapes::why(Node *ifNode, size_t i) {
  // The rows both branches start from: bounded, counted by n (0 where the
  // else branch runs). One row size is the unknown T.
  Rep *count = rc.lifted(n);
  for (Block *b : ifNode->blocks()) {
    std::vector<Value *> used(b->outputs().begin(), b->outputs().end());
    for (Node *node : collectNodes(b))
      used.insert(used.end(), node->inputs().begin(), node->inputs().end());
    for (Value *in : used) {
      Rep *r = rc.bounded(in);
      if (!r || seeds.count(in) || encloses(b, in->node()) ||
          !rc.sameCount(r->count, count->value))
        continue;
      std::optional<int64_t> rank = knownRank(in, &rc.analysis);
      if (!rank || *rank < 1)
        continue;
      Dims dims(static_cast<size_t>(*rank));
      dims[0] = Dim::of(0);
      if (*rank == 2)
        dims[1] = {true, rowSizeFactor(in), 0};
      seeds.emplace(in, Abs::tensor(dims));
    }
  }
  // One such tensor (its row size, where its rank is 2, is T).
  if (seeds.size() != 1)
    return "the branches do not start from one tensor of rows the test counts";
  // The else branch's result is the rows or a view of them: writing their
  // contents changes nothing (there are none), but an op that reshapes them
  // in place (`x.unsqueeze_(0)`) would change it, which no shape here
  // follows. (The alias database's writers are too many to ask: a list
  // holding the rows may be written by any op that takes one.)
  const Value *rows = seeds.begin()->first;
  for (Node *node : collectNodes(rc.graph.block())) {
    const OpInfo *info = opInfo(node);
    if (info && info->has(kReshapesInPlace) && !node->inputs().empty() &&
        rc.aliases.mayAlias(node->input(0), rows))
      return "the rows both branches start from are reshaped in place";
  }
  if (!evalBranch(ifNode->blocks()[0], 0, true) ||
      !evalBranch(ifNode->blocks()[1], 1, false))
    return failure;
  const Abs *a = tracked(ifNode->blocks()[0]->outputs()[i], 0);
  const Abs *b = tracked(ifNode->blocks()[1]->outputs()[i], 1);
  if (!a || !b || a->kind != Abs::Kind::Tensor || b->kind != Abs::Kind::Tensor)
    return "a branch's result is not rows the test counts";
  std::array<Abs, 2> result = {*a, *b};
  seeds.clear();
  env.clear();
  env[ifNode->output(i)] = result;
  if (!walk(ifNode->owningBlock(), ifNode->next()))
    return failure;
  return "";
}

} // namespace

std::string whyEmptyShapesDiffer(Node *ifNode, size_t i, RuleContext &rc) {
  Node *test = ifNode->input(0)->node();
  if (!is(test, "aten::gt") || constantInt(test->input(1)) != 0)
    return "the test is not a count > 0";
  Value *n = test->input(0);
  std::optional<int64_t> lo = rc.rangeOf(n).lo;
  if (!rc.lifted(n) || !lo || *lo < 0)
    return "the test is not a count > 0";
  return EmptyShapes(rc, n).why(ifNode, i);
}

} // namespace staticify::bound
