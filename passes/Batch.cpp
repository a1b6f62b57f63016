//===- Batch.cpp - A static method as a batched one -----------------------===//
#include "passes/Batch.h"

#include "passes/Analysis.h"
#include "passes/GraphUtils.h"
#include "passes/OpInfo.h"
#include "passes/Selection.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// Why the method has no batched form (thrown by a rule, caught once).
struct Refused {
  std::string reason;
};

std::string opName(const Node *n) { return n->kind().toQualString(); }

/// The values of \p block and its nested blocks in one fixed order: block
/// inputs, then each node's outputs and its blocks'.
void valuesInOrder(Block *block, std::vector<Value *> &out) {
  for (Value *v : block->inputs())
    out.push_back(v);
  for (Node *n : block->nodes()) {
    for (Value *v : n->outputs())
      out.push_back(v);
    for (Block *b : n->blocks())
      valuesInOrder(b, out);
  }
}

/// Each tensor's rank in one run of \p graph (a method of \p module) on
/// inputs of \p signature, for the tensors that run reached: a copy of the
/// graph appends (value number, dim) to a list it returns. Each `?` is 8,
/// 1024 (a sampler of 1,000 rows raises at 8) and 0 (an empty input's
/// branches), each run that does not raise adding what it reached.
std::unordered_map<const Value *, int64_t>
recordRanks(torch::jit::Module &module, Graph &graph,
            const std::vector<TensorSignature> &signature) {
  std::shared_ptr<Graph> copy = graph.copy();
  std::vector<Value *> original, copied;
  valuesInOrder(graph.block(), original);
  valuesInOrder(copy->block(), copied);
  const Node *anchor = copy->block()->param_node();
  Value *ranks;
  {
    torch::jit::WithInsertPoint at(copy->block()->nodes().front());
    ranks = copy->insertNode(copy->createList(c10::IntType::get(), {}))
                ->output();
  }
  for (size_t id = 0; id < copied.size(); ++id) {
    Value *v = copied[id];
    if (v->type()->kind() != c10::TypeKind::TensorType)
      continue;
    // Right after its definition: after the list for the method's
    // arguments, first in its block for a block's.
    Node *def = v->node();
    Node *before = def->next();
    if (def == copy->block()->param_node())
      before = ranks->node()->next();
    else if (def->kind() == c10::prim::Param)
      before = *def->owningBlock()->nodes().begin(); // the return node
                                                     // when empty
    torch::jit::WithInsertPoint at(before);
    emit(*copy, "aten::append", {ranks, static_cast<int64_t>(id)}, anchor);
    emit(*copy, "aten::append",
         {ranks, emit(*copy, "aten::dim", {v}, anchor)}, anchor);
  }
  {
    // One result (a method's rule): the method's and the list, as a pair.
    torch::jit::WithInsertPoint at(copy->block());
    Value *both =
        copy->insertNode(copy->createTuple({copy->outputs()[0], ranks}))
            ->output();
    copy->eraseOutput(0);
    copy->registerOutput(both);
  }
  torch::jit::GraphFunction fn("batch_ranks", copy, nullptr);
  // Runs at several sizes reach different branches (`if x.size(0) == 0`);
  // a value two runs give different ranks has none.
  std::unordered_map<const Value *, int64_t> out;
  std::unordered_set<const Value *> conflicting;
  std::string error;
  bool ran = false;
  for (int64_t dynamic : {8, 1024, 0}) {
    torch::jit::Stack stack;
    stack.emplace_back(module._ivalue());
    for (c10::IValue &in : exampleInputs(signature, dynamic))
      stack.push_back(std::move(in));
    try {
      fn.run(stack);
    } catch (const std::exception &e) {
      // The interpreter's message ends with the error itself.
      std::string what = e.what();
      while (!what.empty() && what.back() == '\n')
        what.pop_back();
      if (error.empty())
        error = what.substr(what.rfind('\n') + 1);
      continue;
    }
    ran = true;
    c10::List<int64_t> list =
        stack.back().toTupleRef().elements().back().toIntList();
    for (size_t i = 0; i + 1 < list.size(); i += 2) {
      const Value *v = original[list.get(i)];
      auto [at, fresh] = out.emplace(v, list.get(i + 1));
      if (!fresh && at->second != list.get(i + 1))
        conflicting.insert(v);
    }
  }
  if (!ran)
    throw Refused{"the example run on the input types raised: " + error +
                  " (give --input-types sizes the method takes)"};
  for (const Value *v : conflicting)
    out.erase(v);
  return out;
}

bool isRandom(const Node *n) {
  const OpInfo *op = opInfo(n);
  return op && op->has(kRandom);
}

/// The index of \p n's schema argument named \p name, if any.
std::optional<size_t> argumentIndex(const Node *n, const std::string &name) {
  const c10::FunctionSchema *schema = n->maybeSchema();
  if (!schema)
    return std::nullopt;
  for (size_t i = 0; i < schema->arguments().size(); ++i)
    if (schema->arguments()[i].name() == name && i < n->inputs().size())
      return i;
  return std::nullopt;
}

class Batcher {
public:
  Batcher(Graph &src, std::vector<std::string> argumentNames,
          std::unordered_map<const Value *, int64_t> ranks)
      : src(src), argumentNames(std::move(argumentNames)),
        ranks(std::move(ranks)), dst(std::make_shared<Graph>()) {}

  std::shared_ptr<Graph> run() {
    flagValues();
    Value *first = nullptr;
    for (size_t i = 0; i < src.inputs().size(); ++i) {
      Value *in = src.inputs()[i];
      Value *out = dst->addInput(argumentNames.at(i))->setType(in->type());
      env[in] = out;
      if (i > 0 && in->type()->kind() == c10::TypeKind::TensorType) {
        batchedDst.insert(out);
        first = first ? first : out;
      }
    }
    if (!first)
      throw Refused{"the method takes no tensor argument to batch"};
    anchor = dst->block()->param_node();
    B = emit(*dst, "aten::size", {first, int64_t{0}}, anchor);
    checkBatchSizes(first);
    emitBlock(src.block(), dst->block());
    for (Value *out : src.outputs())
      dst->registerOutput(batchedResult(env.at(out)));
    torch::jit::EliminateDeadCode(dst);
    return dst;
  }

private:
  /// Every batched argument has B rows, or the method raises (rows would
  /// otherwise broadcast against each other).
  void checkBatchSizes(Value *first) {
    for (Value *in : dst->inputs()) {
      if (!isB(in) || in == first)
        continue;
      Value *differs =
          op("aten::ne", {op("aten::size", {in, int64_t{0}}), B});
      Node *check = dst->insertNode(dst->create(c10::prim::If, {differs}, 0));
      torch::jit::Block *raise = check->addBlock();
      check->addBlock();
      torch::jit::WithInsertPoint inRaise(raise);
      Value *message = dst->insertConstant(
          "the tensor arguments of a batched method take one batch size "
          "(their first dimension)");
      Value *cls = dst->insertConstant(std::string("builtins.ValueError"));
      dst->insertNode(
          dst->create(c10::prim::RaiseException, {message, cls}, 0));
    }
  }

  Graph &src;
  std::vector<std::string> argumentNames;
  std::unordered_map<const Value *, int64_t> ranks;
  std::shared_ptr<Graph> dst;
  /// Source values that are batched (the flags' fixpoint).
  std::unordered_set<const Value *> batched;
  /// Values of dst that carry the batch dimension.
  std::unordered_set<Value *> batchedDst;
  std::unordered_map<Value *, Value *> env;
  Value *B = nullptr;
  const Node *anchor = nullptr;

  //===--------------------------------------------------------------------===//
  // Which values are batched
  //===--------------------------------------------------------------------===//

  bool mark(const Value *v) {
    if (!carriesTensor(v->type()))
      return false;
    return batched.insert(v).second;
  }

  bool flagBlock(Block *block) {
    bool changed = false;
    for (Node *n : block->nodes()) {
      if (n->kind() == c10::prim::Loop) {
        Block *body = n->blocks()[0];
        for (size_t i = 0; i < n->outputs().size(); ++i) {
          bool b = batched.count(n->input(i + 2)) ||
                   batched.count(body->outputs()[i + 1]);
          if (b) {
            changed |= mark(body->inputs()[i + 1]);
            changed |= mark(n->output(i));
          }
        }
        changed |= flagBlock(body);
      } else if (n->kind() == c10::prim::If) {
        changed |= flagBlock(n->blocks()[0]);
        changed |= flagBlock(n->blocks()[1]);
        for (size_t i = 0; i < n->outputs().size(); ++i)
          if (batched.count(n->blocks()[0]->outputs()[i]) ||
              batched.count(n->blocks()[1]->outputs()[i]))
            changed |= mark(n->output(i));
      } else {
        bool any = isRandom(n);
        for (const Value *in : n->inputs())
          any = any || batched.count(in);
        // new_zeros(x, size): of x only its dtype and device.
        bool sized = opInfo(n) && opInfo(n)->has(kMakesSized);
        if (any && !sized)
          for (const Value *out : n->outputs())
            changed |= mark(out);
        // A list or tensor written with batched values is batched from
        // where it is made.
        if (any && !n->inputs().empty() &&
            (n->kind() == c10::aten::append || mutatesInput0(n)))
          changed |= mark(n->input(0));
        // So is the tensor an out= variant writes (`torch.gt(x, 0,
        // out=m)`), which alignAndClone then refuses (it is made shared).
        if (any)
          for (size_t i : writtenOutArguments(n))
            changed |= mark(n->input(i));
      }
    }
    return changed;
  }

  /// Whether a result of \p n may alias an operand (a view, `x[0:2]`, or
  /// a read of a container or attribute): schemas say so, and nodes without
  /// one other than a list built here are taken to.
  static bool aliasesAnInput(const Node *n) {
    if (n->kind() == c10::prim::ListConstruct)
      return false;
    const c10::FunctionSchema *schema = n->maybeSchema();
    if (!schema)
      return true;
    for (const c10::Argument &r : schema->returns())
      if (r.alias_info())
        return true;
    return false;
  }

  /// The arguments after the first that \p n writes: an out= variant's.
  static std::vector<size_t> writtenOutArguments(const Node *n) {
    std::vector<size_t> out;
    const c10::FunctionSchema *schema = n->maybeSchema();
    if (!schema)
      return out;
    for (size_t i = 1; i < schema->arguments().size() && i < n->inputs().size();
         ++i)
      if (schema->arguments()[i].alias_info() &&
          schema->arguments()[i].alias_info()->isWrite())
        out.push_back(i);
    return out;
  }

  static bool mutatesInput0(const Node *n) {
    const c10::FunctionSchema *schema = n->maybeSchema();
    return schema && !schema->arguments().empty() &&
           schema->arguments()[0].alias_info() &&
           schema->arguments()[0].alias_info()->isWrite();
  }

  void flagValues() {
    for (size_t i = 1; i < src.inputs().size(); ++i)
      if (src.inputs()[i]->type()->kind() == c10::TypeKind::TensorType)
        batched.insert(src.inputs()[i]);
    while (flagBlock(src.block())) {
    }
  }

  //===--------------------------------------------------------------------===//
  // Helpers on dst
  //===--------------------------------------------------------------------===//

  Value *op(const char *name, std::vector<torch::jit::NamedValue> args) {
    return emit(*dst, name, std::move(args), anchor);
  }

  bool isB(Value *v) const { return batchedDst.count(v); }

  Value *asBatched(Value *v) {
    batchedDst.insert(v);
    return v;
  }

  /// The per-row rank of source value \p v.
  int64_t rowRank(const Value *v) {
    auto it = ranks.find(v);
    // Where the runs did not go: the rank the ops that made it fix
    // (arange's is 1).
    if (it == ranks.end())
      if (std::optional<int64_t> r = knownRank(v))
        it = ranks.emplace(v, *r).first;
    // An if's result: as a branch's, where a run reached one.
    if (it == ranks.end() && v->node()->kind() == c10::prim::If)
      for (const Block *b : v->node()->blocks()) {
        auto at = ranks.find(b->outputs()[v->offset()]);
        if (at != ranks.end()) {
          it = ranks.emplace(v, at->second).first;
          break;
        }
      }
    if (it == ranks.end())
      throw Refused{"the rank of '%" + v->debugName() + "' (" +
                    (v->node()->kind() == c10::prim::Param
                         ? std::string("a block's argument")
                         : "of '" + opName(v->node()) + "'") +
                    ") is unknown (the example runs did not reach it)"};
    return it->second;
  }

  /// The elements of each row of batched \p x (B may be 0).
  Value *rowNumel(Value *x) {
    return op("aten::floordiv",
              {op("aten::numel", {x}), op("prim::max", {B, int64_t{1}})});
  }

  /// [B] + sizes (a host list).
  Value *withBatch(Value *sizes) {
    Value *head =
        dst->insertNode(dst->createList(c10::IntType::get(), {B}))->output();
    return op("aten::add", {head, sizes});
  }

  /// \p v (a dst value) with the batch dimension: shared by every row,
  /// expanded (a copy with \p own, for a value written in place).
  Value *materialize(Value *v, bool own = false) {
    if (isB(v))
      return v;
    if (v->type()->kind() == c10::TypeKind::TensorType) {
      Value *e = op("aten::expand", {v, withBatch(op("aten::size", {v}))});
      return asBatched(own ? op("aten::clone", {e}) : e);
    }
    throw Refused{"a value of type " + v->type()->annotation_str() +
                  " shared by every row is used where rows differ"};
  }

  /// Dim argument \p d of a per-row op, for the batched tensor: a
  /// non-negative constant moves one on; negative ones count from the end,
  /// the same there.
  Value *shiftDim(Value *d) {
    if (d->mustBeNone())
      return d;
    std::optional<c10::IValue> iv = torch::jit::toIValue(d);
    if (iv && iv->isInt())
      return iv->toInt() < 0 ? d : dst->insertConstant(iv->toInt() + 1);
    if (iv && iv->isIntList()) {
      std::vector<int64_t> dims = iv->toIntVector();
      for (int64_t &x : dims)
        x += x >= 0;
      return dst->insertConstant(dims);
    }
    throw Refused{"a dimension computed at run time"};
  }

  /// A clone of source node \p n reading \p inputs, its outputs mapped
  /// and batched as the flags say.
  Node *cloneWith(Node *n, const std::vector<Value *> &inputs,
                  bool outputsBatched) {
    Node *c = dst->insertNode(dst->create(n->kind(), inputs, 0));
    c->copyAttributes(*n);
    for (Value *o : n->outputs()) {
      Value *out = c->addOutput()->setType(o->type());
      env[o] = out;
      if (outputsBatched && carriesTensor(o->type()))
        batchedDst.insert(out);
    }
    c->setSourceRange(n->sourceRange());
    return c;
  }

  std::vector<Value *> mapped(Node *n) {
    std::vector<Value *> in;
    for (Value *v : n->inputs())
      in.push_back(env.at(v));
    return in;
  }

  //===--------------------------------------------------------------------===//
  // Blocks and control flow
  //===--------------------------------------------------------------------===//

  void emitBlock(Block *from, Block *to) {
    torch::jit::WithInsertPoint at(to);
    for (Node *n : from->nodes()) {
      if (n->kind() == c10::prim::Loop)
        emitLoop(n);
      else if (n->kind() == c10::prim::If)
        emitIf(n);
      else
        emitNode(n);
      // A value batched where it is made only because it is written with
      // batched values later (a list appended to, a buffer filled in place):
      // each row gets its own copy, so it must be made here, not a view of
      // another tensor (the writes would no longer reach that one).
      for (Value *o : n->outputs())
        if (batched.count(o) && !isB(env.at(o))) {
          if (aliasesAnInput(n))
            throw Refused{"'" + opName(n) +
                          "' makes a view that is later written with values "
                          "that differ by row"};
          env[o] = o->type()->kind() == c10::TypeKind::TensorType
                       ? materialize(env.at(o), /*own=*/true)
                       : env.at(o);
        }
    }
  }

  /// A loop over the B rows: \p body emits row i's work (i its argument)
  /// in the loop's body.
  void forEachRow(const std::function<void(Value *)> &body) {
    Node *loop = dst->insertNode(
        dst->create(c10::prim::Loop, {B, dst->insertConstant(true)}, 0));
    Block *block = loop->addBlock();
    Value *row = block->addInput()->setType(c10::IntType::get());
    torch::jit::WithInsertPoint at(block);
    body(row);
    block->registerOutput(dst->insertConstant(true));
  }

  /// \p v (dst) where source value \p as is: batched if it is.
  Value *carried(const Value *as, Value *v) {
    return batched.count(as) ? materialize(v) : v;
  }

  void emitLoop(Node *n) {
    // Carried values are batched as the loop's results are.
    std::vector<Value *> in = {env.at(n->input(0)), env.at(n->input(1))};
    for (size_t i = 2; i < n->inputs().size(); ++i)
      in.push_back(carried(n->output(i - 2), env.at(n->input(i))));
    Node *loop = dst->insertNode(dst->create(c10::prim::Loop, in, 0));
    Block *body = n->blocks()[0];
    Block *nb = loop->addBlock();
    for (size_t i = 0; i < body->inputs().size(); ++i) {
      Value *p = nb->addInput()->setType(body->inputs()[i]->type());
      env[body->inputs()[i]] = p;
      if (batched.count(body->inputs()[i]))
        batchedDst.insert(p);
    }
    emitBlock(body, nb);
    {
      torch::jit::WithInsertPoint at(nb);
      nb->registerOutput(env.at(body->outputs()[0]));
      for (size_t i = 1; i < body->outputs().size(); ++i)
        nb->registerOutput(
            carried(n->output(i - 1), env.at(body->outputs()[i])));
    }
    for (Value *o : n->outputs()) {
      Value *out = loop->addOutput()->setType(o->type());
      env[o] = out;
      if (batched.count(o))
        batchedDst.insert(out);
    }
  }

  void emitIf(Node *n) {
    Node *branch =
        dst->insertNode(dst->create(c10::prim::If, {env.at(n->input(0))}, 0));
    branch->copyAttributes(*n);
    for (Block *b : n->blocks()) {
      Block *nb = branch->addBlock();
      // A guard's fallback (the original code, where the guard's host facts
      // fail) and a branch that only raises (its message may read sizes and
      // values) read the host: they run row by row.
      if (n->hasAttribute(guardAttr()) && n->i(guardAttr()) == kShapeGuard &&
          b == n->blocks()[1])
        throw Refused{"a guard's fallback may return a shape from data (rows "
                      "of several shapes do not stack)"};
      if ((n->hasAttribute(guardAttr()) && b == n->blocks()[1]) ||
          onlyRaises(b)) {
        rowByRow(b, nb);
        continue;
      }
      emitBlock(b, nb);
      torch::jit::WithInsertPoint at(nb);
      for (size_t i = 0; i < b->outputs().size(); ++i) {
        Value *o = b->outputs()[i];
        Value *m = env.at(o);
        bool rows = n->hasAttribute(guardAttr()) &&
                    o->type()->kind() == c10::TypeKind::TensorType;
        nb->registerOutput(rows ? materialize(m) : carried(n->output(i), m));
      }
    }
    for (Value *o : n->outputs()) {
      Value *out = branch->addOutput()->setType(o->type());
      env[o] = out;
      if (batched.count(o) || (n->hasAttribute(guardAttr()) &&
                               o->type()->kind() == c10::TypeKind::TensorType))
        batchedDst.insert(out);
    }
  }

  /// Source values \p block reads from outside it (its nested blocks'
  /// too), in first-use order.
  static void freeValues(Block *block, std::vector<Value *> &out,
                         std::unordered_set<Value *> &seen,
                         std::unordered_set<const Value *> &inside) {
    for (Value *v : block->inputs())
      inside.insert(v);
    for (Node *n : block->nodes()) {
      for (Value *v : n->inputs())
        if (!inside.count(v) && seen.insert(v).second)
          out.push_back(v);
      for (Block *b : n->blocks())
        freeValues(b, out, seen, inside);
      for (Value *v : n->outputs())
        inside.insert(v);
    }
    for (Value *v : block->outputs())
      if (!inside.count(v) && seen.insert(v).second)
        out.push_back(v);
  }

  /// \p from as it is, once per row, into \p to: its batched inputs are
  /// row b's, and each result (a tensor of each row) is stacked.
  void rowByRow(Block *from, Block *to) {
    torch::jit::WithInsertPoint at(to);
    std::vector<Value *> free;
    std::unordered_set<Value *> seen;
    std::unordered_set<const Value *> inside;
    freeValues(from, free, seen, inside);
    std::vector<Value *> lists;
    for (Value *o : from->outputs()) {
      if (o->type()->kind() != c10::TypeKind::TensorType)
        throw Refused{"a guard's fallback with a result of type " +
                      o->type()->annotation_str() + " (row by row, only tensors stack)"};
      lists.push_back(dst->insertNode(dst->createList(c10::TensorType::get(), {}))
                          ->output());
    }
    forEachRow([&](Value *row) {
      std::unordered_map<Value *, Value *> rowEnv;
      for (Value *v : free) {
        Value *m = env.at(v);
        if (!isB(m))
          rowEnv[v] = m;
        else if (m->type()->kind() == c10::TypeKind::TensorType)
          rowEnv[v] = op("aten::select", {m, int64_t{0}, row});
        else
          throw Refused{"a guard's fallback reads a batched " +
                        m->type()->annotation_str()};
      }
      for (Node *n : from->nodes()) {
        Node *c = dst->insertNode(
            dst->createClone(n, [&](Value *v) { return rowEnv.at(v); }));
        for (size_t i = 0; i < n->outputs().size(); ++i)
          rowEnv[n->output(i)] = c->output(i);
      }
      for (size_t i = 0; i < lists.size(); ++i)
        op("aten::append", {lists[i], rowEnv.at(from->outputs()[i])});
    });
    for (Value *list : lists)
      to->registerOutput(asBatched(op("aten::stack", {list, int64_t{0}})));
  }

  /// A result of the batched method: tensors with the batch dimension, in
  /// a tuple too.
  Value *batchedResult(Value *v) {
    torch::jit::WithInsertPoint at(dst->block());
    if (v->type()->kind() == c10::TypeKind::TensorType)
      return isB(v) ? v : op("aten::contiguous", {materialize(v)});
    if (v->node()->kind() == c10::prim::TupleConstruct) {
      std::vector<Value *> parts;
      for (Value *p : v->node()->inputs())
        parts.push_back(batchedResult(p));
      return dst->insertNode(dst->createTuple(parts))->output();
    }
    if (carriesTensor(v->type()))
      throw Refused{"a result of type " + v->type()->annotation_str() +
                    " (tensors and tuples of them are batched)"};
    return v;
  }

  //===--------------------------------------------------------------------===//
  // Ops
  //===--------------------------------------------------------------------===//

  void emitNode(Node *n) {
    std::vector<Value *> in = mapped(n);
    bool any = isRandom(n);
    for (Value *v : in)
      any = any || isB(v);
    // A list is batched from where it is made when batched tensors are
    // added to it later (an empty list appended to in a loop).
    if (!any && !(n->kind() == c10::prim::ListConstruct &&
                  batched.count(n->output()))) {
      cloneWith(n, in, /*outputsBatched=*/false);
      return;
    }
    if (batchShapeRead(n, in) || batchContainer(n, in) || batchRandom(n, in) ||
        batchIndexing(n, in) || batchShaping(n, in) ||
        batchReduction(n, in) || batchAlongDims(n, in) ||
        batchSampled(n, in) || batchLoss(n, in) || batchElementwise(n, in))
      return;
    throw Refused{"'" + opName(n) + "' has no batched form"};
  }

  /// Lists and tuples: a list of batched tensors holds each with the
  /// batch dimension.
  bool batchContainer(Node *n, std::vector<Value *> &in) {
    switch (n->kind()) {
    case c10::prim::ListConstruct:
      if (batched.count(n->output()))
        for (Value *&v : in)
          v = materialize(v);
      cloneWith(n, in, batched.count(n->output()));
      return true;
    case c10::aten::append:
      if (batched.count(n->input(0)))
        in[1] = materialize(in[1]);
      cloneWith(n, in, true);
      return true;
    case c10::prim::TupleConstruct:
    case c10::prim::TupleUnpack:
    case c10::prim::ListUnpack:
    case c10::prim::TupleIndex:
    case c10::aten::__getitem__:
    case c10::aten::len:
      if (n->kind() == c10::aten::len &&
          n->input(0)->type()->kind() == c10::TypeKind::TensorType)
        return false;
      cloneWith(n, in, true);
      for (Value *o : n->outputs())
        if (!batched.count(o))
          batchedDst.erase(env.at(o));
      return true;
    default:
      // dtype, device, `is None`...: the same for every row.
      if (opInfo(n) && opInfo(n)->role == OpRole::MetadataRead) {
        cloneWith(n, in, false);
        return true;
      }
      // unchecked_cast and the like: as their operand.
      if (opInfo(n) && opInfo(n)->role == OpRole::Plumbing &&
          n->inputs().size() == 1) {
        cloneWith(n, in, isB(in[0]));
        return true;
      }
      return false;
    }
  }

  /// Reads of a batched tensor's shape: the rows' shape, without the batch
  /// dimension.
  bool batchShapeRead(Node *n, std::vector<Value *> &in) {
    const std::string name = opName(n);
    Value *x = in.empty() ? nullptr : in[0];
    if (!x || !isB(x) || x->type()->kind() != c10::TypeKind::TensorType)
      return false;
    Value *out = nullptr;
    if (name == "aten::size" && in.size() == 1)
      out = op("aten::slice", {op("aten::size", {x}), int64_t{1},
                               c10::IValue(), int64_t{1}});
    else if (name == "aten::size" && in.size() == 2)
      out = op("aten::size", {x, shiftDim(in[1])});
    else if (name == "aten::numel")
      out = rowNumel(x);
    else if (name == "aten::dim")
      out = op("aten::sub", {op("aten::dim", {x}), int64_t{1}});
    else if (name == "aten::len")
      out = op("aten::size", {x, int64_t{1}});
    if (!out)
      return false;
    env[n->output()] = out;
    return true;
  }

  /// Random ops draw per row.
  bool batchRandom(Node *n, std::vector<Value *> &in) {
    if (!isRandom(n))
      return false;
    const std::string name = opName(n);
    Value *out = nullptr;
    if (name == "aten::randperm") {
      out = randpermRows(n, in);
    } else if (name == "aten::rand" || name == "aten::randn") {
      std::vector<Value *> args = in;
      args[0] = withBatch(in[0]);
      cloneWith(n, args, true);
      return true;
    } else if (name == "aten::randint") {
      std::optional<size_t> size = argumentIndex(n, "size");
      if (!size)
        return false;
      std::vector<Value *> args = in;
      args[*size] = withBatch(in[*size]);
      cloneWith(n, args, true);
      return true;
    } else if (name == "aten::rand_like" || name == "aten::randn_like" ||
               name == "aten::bernoulli" || name == "aten::uniform_" ||
               name == "aten::normal_") {
      if ((name == "aten::uniform_" || name == "aten::normal_") && !isB(in[0]))
        throw Refused{"'" + name + "' fills a tensor every row shares"};
      in[0] = materialize(in[0]);
      cloneWith(n, in, true);
      return true;
    }
    if (!out)
      return false;
    env[n->output()] = asBatched(out);
    return true;
  }

  /// A uniform random order of 0..n-1 per row: on the CPU one randperm per
  /// row (a loop of B; sorting B x n keys there takes ten times as long),
  /// elsewhere the order of B x n uniform keys (one sort, no loop).
  Value *randpermRows(Node *n, std::vector<Value *> &in) {
    std::optional<size_t> d = argumentIndex(n, "device"),
                          t = argumentIndex(n, "dtype");
    if (!d || !t)
      throw Refused{"'aten::randperm' without its device and dtype"};
    Value *device = in[*d];
    Value *rows = dst->insertNode(dst->createList(c10::IntType::get(),
                                                  {B, in[0]}))
                      ->output();
    Value *dtype = in[*t]->mustBeNone() ? dst->insertConstant(c10::ScalarType::Long)
                                        : in[*t];
    auto perRow = [&] {
      Value *out = emit(*dst, "aten::empty", {rows}, anchor,
                        {{"dtype", dtype}, {"device", device}});
      forEachRow([&](Value *i) {
        Node *draw = dst->insertNode(dst->create(n->kind(), in, 0));
        draw->copyAttributes(*n);
        draw->addOutput()->setType(n->output()->type());
        op("aten::copy_", {op("aten::select", {out, int64_t{0}, i}),
                           draw->output()});
      });
      return out;
    };
    if (device->mustBeNone()) // the default device: the CPU
      return perRow();
    Value *onCpu =
        op("aten::eq", {op("prim::type", {device}), std::string("cpu")});
    return staticify::emitIf(*dst, onCpu, anchor, perRow, [&] {
      Value *keys = emit(*dst, "aten::rand", {rows}, anchor,
                         {{"device", device}});
      return op("aten::to", {op("aten::argsort", {keys, int64_t{1}}), dtype});
    });
  }

  /// x[idx] and the ops that pick or write rows by index.
  bool batchIndexing(Node *n, std::vector<Value *> &in) {
    const std::string name = opName(n);
    if (name == "aten::one_hot") {
      // A class dimension after each element's: row-wise, given the
      // number of classes (without it, each row's largest class decides).
      std::optional<c10::IValue> classes = torch::jit::toIValue(n->input(1));
      if (!classes || classes->toInt() < 0)
        throw Refused{"'aten::one_hot' without num_classes (each row's "
                      "largest class would size it)"};
      cloneWith(n, in, true);
      return true;
    }
    if (name == "aten::index_add_" || name == "aten::index_add")
      return indexAdd(n, in);
    if (name == "aten::index") {
      // One index tensor, on the first dimension.
      Node *list = n->input(1)->node();
      if (list->kind() != c10::prim::ListConstruct || list->inputs().size() != 1)
        throw Refused{"'aten::index' with more than one index"};
      Value *x = in[0];
      Value *idx = env.at(list->input(0));
      env[n->output()] =
          asBatched(isB(idx) ? pickRows(n->input(0), materialize(x),
                                        list->input(0), idx, true)
                             : indexWith(x, {nullptr, idx}));
      return true;
    }
    if (name == "aten::index_select") {
      Value *x = materialize(in[0]);
      std::optional<c10::IValue> dim = torch::jit::toIValue(n->input(1));
      if (!isB(in[2])) {
        env[n->output()] =
            asBatched(op("aten::index_select", {x, shiftDim(in[1]), in[2]}));
        return true;
      }
      if (!dim || !dim->isInt())
        throw Refused{"'aten::index_select' along a dimension not known "
                      "before the program runs"};
      int64_t r = rowRank(n->input(0));
      int64_t d = dim->toInt() < 0 ? dim->toInt() + r : dim->toInt();
      if (d == 0) {
        env[n->output()] = asBatched(pickRows(n->input(0), x, n->input(2), in[2], false));
        return true;
      }
      // Along dim d > 0 of each row (columns picked by each row's own
      // indices): a gather along d + 1 by the indices, put at d + 1 and
      // expanded over the other dims.
      Value *at = in[2];
      for (int64_t j = 0; j < d; ++j)
        at = op("aten::unsqueeze", {at, int64_t{1}});
      for (int64_t j = d + 1; j < r; ++j)
        at = op("aten::unsqueeze", {at, int64_t{-1}});
      std::vector<Value *> sizes;
      for (int64_t j = 0; j <= r; ++j)
        sizes.push_back(j == 0 || j == d + 1
                            ? dst->insertConstant(int64_t{-1})
                            : op("aten::size", {x, j}));
      Value *shape = dst->insertNode(dst->createList(c10::IntType::get(), sizes))
                         ->output();
      env[n->output()] = asBatched(
          op("aten::gather", {x, d + 1, op("aten::expand", {at, shape})}));
      return true;
    }
    if (name == "aten::gather" || name == "aten::scatter" ||
        name == "aten::scatter_add" || name == "aten::scatter_reduce" ||
        name == "aten::scatter_" || name == "aten::scatter_add_") {
      bool inPlace = name.back() == '_';
      if (inPlace && !isB(in[0]))
        throw Refused{"'" + name + "' writes a tensor every row shares"};
      for (Value *&v : in)
        if (v->type()->kind() == c10::TypeKind::TensorType)
          v = materialize(v);
      in[1] = shiftDim(in[1]);
      cloneWith(n, in, true);
      return true;
    }
    if (name == "aten::index_put_" || name == "aten::index_put") {
      Node *list = n->input(1)->node();
      if (list->kind() != c10::prim::ListConstruct || list->inputs().size() != 1)
        throw Refused{"'" + name + "' with more than one index"};
      if (name == "aten::index_put_" && !isB(in[0]))
        throw Refused{"'aten::index_put_' writes a tensor every row shares"};
      Value *x = materialize(in[0]);
      Value *idx = env.at(list->input(0));
      std::vector<Value *> indices =
          isB(idx) ? std::vector<Value *>{rowIds(rowRank(list->input(0)), idx), idx}
                   : std::vector<Value *>{nullptr, idx};
      // Values of each row (or shared) meet x[rows, idx] or x[:, idx]
      // with the batch dimension first, as they broadcast.
      env[n->output()] = asBatched(
          op(name.c_str(), {x, optionalList(indices), in[2], in[3]}));
      return true;
    }
    return false;
  }

  /// Row b of batched \p x (source \p xs) at row b's indices \p idx
  /// (batched, source \p idxs) along x's first per-row dimension: a gather
  /// for vectors (a fraction of advanced indexing's time), else x[rows, idx].
  /// \p fromEnd: negative indices count from the end (x[idx]; gather and
  /// index_select raise on them).
  Value *pickRows(const Value *xs, Value *x, const Value *idxs, Value *idx,
                  bool fromEnd) {
    if (rowRank(xs) == 1 && rowRank(idxs) == 1) {
      if (fromEnd) {
        Value *n = op("aten::size", {x, int64_t{1}});
        idx = op("aten::where", {op("aten::lt", {idx, int64_t{0}}),
                                 op("aten::add", {idx, n}), idx});
      }
      return op("aten::gather", {x, int64_t{1}, idx});
    }
    return indexWith(x, {rowIds(rowRank(idxs), idx), idx});
  }

  /// x.index_add_(0, idx, src) of each row: along the rows' first
  /// dimension, at shared indices the same op one dimension further, at
  /// each row's own a scatter_add along it (which raises on an index out of
  /// range, as index_add_ does).
  bool indexAdd(Node *n, std::vector<Value *> &in) {
    std::optional<c10::IValue> dim = torch::jit::toIValue(n->input(1));
    int64_t r = rowRank(n->input(0));
    if (!dim || !dim->isInt() || (dim->toInt() < 0 ? dim->toInt() + r : dim->toInt()) != 0)
      throw Refused{"'" + opName(n) + "' along a dimension other than the rows' first"};
    bool inPlace = n->kind() == c10::Symbol::aten("index_add_");
    if (inPlace && !isB(in[0]))
      throw Refused{"'aten::index_add_' writes a tensor every row shares"};
    Value *x = materialize(in[0]), *src = materialize(in[3]);
    std::optional<size_t> alpha = argumentIndex(n, "alpha");
    Value *out;
    if (!isB(in[2])) {
      out = emit(*dst, opName(n).c_str(), {x, int64_t{1}, in[2], src}, anchor,
                 {{"alpha", in[*alpha]}});
    } else {
      std::optional<c10::IValue> a = torch::jit::toIValue(in[*alpha]);
      if (!a || !a->isScalar() || a->toScalar().toDouble() != 1.0)
        src = op("aten::mul", {src, in[*alpha]});
      Value *at = in[2];
      for (int64_t d = 1; d < r; ++d)
        at = op("aten::unsqueeze", {at, int64_t{-1}});
      at = op("aten::expand_as", {at, src});
      out = op(inPlace ? "aten::scatter_add_" : "aten::scatter_add",
               {x, int64_t{1}, at, src});
    }
    env[n->output()] = asBatched(out);
    return true;
  }

  /// arange(B) on \p like's device, shaped [B, 1, ...] against an index of
  /// per-row rank \p rank.
  Value *rowIds(int64_t rank, Value *like) {
    Value *ids = emit(*dst, "aten::arange", {B}, anchor,
                      {{"device", op("prim::device", {like})}});
    std::vector<int64_t> shape = {-1};
    for (int64_t i = 0; i < rank; ++i)
      shape.push_back(1);
    return op("aten::view", {ids, shape});
  }

  Value *optionalList(const std::vector<Value *> &parts) {
    std::vector<Value *> values;
    for (Value *p : parts)
      values.push_back(p ? p : dst->insertConstant(c10::IValue()));
    return dst
        ->insertNode(dst->createList(
            c10::OptionalType::create(c10::TensorType::get()), values))
        ->output();
  }

  Value *indexWith(Value *x, const std::vector<Value *> &indices) {
    return op("aten::index", {x, optionalList(indices)});
  }

  /// Ops given a shape: the rows' shape gains the batch dimension.
  bool batchShaping(Node *n, std::vector<Value *> &in) {
    const std::string name = opName(n);
    Value *out = nullptr;
    if ((name == "aten::reshape" || name == "aten::view") && isB(in[0]) &&
        !isB(in[1]))
      out = op(name.c_str(), {in[0], withBatch(in[1])});
    else if (name == "aten::expand" && isB(in[0])) {
      Value *x = unsqueezedTo(in[0], n->input(0), rowRank(n->output()));
      out = op("aten::expand", {x, withBatch(in[1])});
    } else if (name == "aten::expand_as") {
      Value *x = isB(in[0]) ? unsqueezedTo(in[0], n->input(0), rowRank(n->input(1)))
                            : in[0];
      out = op("aten::expand_as", {x, materialize(in[1])});
    } else if (name == "aten::flatten" && isB(in[0])) {
      Value *x = in[0];
      if (rowRank(n->input(0)) == 0)
        x = op("aten::unsqueeze", {x, int64_t{1}});
      out = op("aten::flatten", {x, shiftDim(in[1]), shiftDim(in[2])});
    } else if (opInfo(n) && opInfo(n)->has(kMakesSized)) {
      // new_zeros(x, size): a tensor of that size every row shares.
      cloneWith(n, in, false);
      return true;
    } else if ((name == "aten::permute") && isB(in[0])) {
      std::optional<c10::IValue> iv = torch::jit::toIValue(n->input(1));
      if (!iv || !iv->isIntList())
        throw Refused{"'aten::permute' of dimensions computed at run time"};
      int64_t r = rowRank(n->input(0));
      std::vector<int64_t> dims = {0};
      for (int64_t d : iv->toIntVector())
        dims.push_back((d < 0 ? d + r : d) + 1);
      out = op("aten::permute", {in[0], dims});
    } else if ((name == "aten::transpose" || name == "aten::movedim") &&
               isB(in[0]) && n->input(1)->type()->kind() == c10::TypeKind::IntType) {
      // movedim(x, a, b) of ints, as leading-selections makes it.
      out = op(name.c_str(), {in[0], shiftDim(in[1]), shiftDim(in[2])});
    } else if (name == "aten::t" && isB(in[0])) {
      out = rowRank(n->input(0)) < 2
                ? in[0]
                : op("aten::transpose", {in[0], int64_t{1}, int64_t{2}});
    }
    if (!out)
      return false;
    env[n->output()] = asBatched(out);
    return true;
  }

  /// Reductions: along their dims one further; over every element, over
  /// each row's.
  bool batchReduction(Node *n, std::vector<Value *> &in) {
    const OpInfo *info = opInfo(n);
    if (!info || info->role != OpRole::Reduction)
      return false;
    if (n->maybeSchema() && n->schema().overload_name() == "other")
      return alignAndClone(n, in); // max(x, y): elementwise
    Value *x = materialize(in[0]);
    std::optional<size_t> dim = argumentIndex(n, "dim");
    bool all = !dim || n->input(*dim)->mustBeNone();
    if (!all) {
      std::optional<c10::IValue> iv = torch::jit::toIValue(n->input(*dim));
      all = iv && iv->isIntList() && iv->toIntVector().empty();
    }
    if (!all) {
      in[0] = x;
      in[*dim] = shiftDim(in[*dim]);
      cloneWith(n, in, true);
      return true;
    }
    // Each row's elements as one dimension.
    Value *rows = op(
        "aten::reshape",
        {x, dst->insertNode(dst->createList(c10::IntType::get(), {B, rowNumel(x)}))
                ->output()});
    const std::string name = opName(n);
    std::vector<int64_t> one = {1};
    Value *out = nullptr;
    if (name == "aten::sum" || name == "aten::mean" || name == "aten::nansum") {
      std::optional<size_t> dtype = argumentIndex(n, "dtype");
      out = emit(*dst, name.c_str(), {rows, one, false}, anchor,
                 {{"dtype", dtype ? in[*dtype] : dst->insertConstant(c10::IValue())}});
    }
    else if (name == "aten::amax" || name == "aten::max")
      out = op("aten::amax", {rows, one});
    else if (name == "aten::amin" || name == "aten::min")
      out = op("aten::amin", {rows, one});
    else if (name == "aten::count_nonzero")
      out = op("aten::count_nonzero", {rows, int64_t{1}});
    else if (name == "aten::any" || name == "aten::all")
      out = op(name.c_str(), {rows, int64_t{1}});
    else if (name == "aten::prod" || name == "aten::argmax" ||
             name == "aten::argmin")
      out = op(name.c_str(), {rows, int64_t{1}});
    if (!out || n->outputs().size() != 1)
      throw Refused{"'" + name + "' over every element has no batched form"};
    env[n->output()] = asBatched(out);
    return true;
  }

  /// Ops row-wise along dimension arguments >= 1 (OpInfo::rowDims): the
  /// same op one dimension further, on batched operands.
  bool batchAlongDims(Node *n, std::vector<Value *> &in) {
    const OpInfo *info = opInfo(n);
    if (!info || info->rowDims.empty())
      return false;
    bool shifted = false;
    for (const char *d : info->rowDims)
      if (std::optional<size_t> i = argumentIndex(n, d)) {
        in[*i] = shiftDim(in[*i]);
        shifted = true;
      }
    if (!shifted)
      throw Refused{"'" + opName(n) + "' without its dimension argument"};
    for (Value *&v : in)
      if (v->type()->kind() == c10::TypeKind::TensorType)
        v = materialize(v);
      else if (v->type()->isSubtypeOf(*c10::ListType::ofTensors()) && !isB(v))
        throw Refused{"'" + opName(n) + "' of a list every row shares"};
    cloneWith(n, in, true);
    return true;
  }

  /// Ops batched on their first operand (linear, convolutions...): the
  /// rows are the op's batch.
  bool batchSampled(Node *n, std::vector<Value *> &in) {
    const OpInfo *info = opInfo(n);
    const std::string name = opName(n);
    bool matmul = name == "aten::matmul";
    if (!matmul && (!info || info->sampleRank == 0))
      return false;
    for (size_t i = 1; i < in.size(); ++i)
      if (isB(in[i]))
        throw Refused{"'" + name + "' with weights that differ by row"};
    int64_t r = rowRank(n->input(0));
    if (matmul || name == "aten::linear" || r + 1 == info->sampleRank) {
      cloneWith(n, in, true);
      return true;
    }
    // Rows already batched: the batch dimension and theirs as one.
    Value *x = in[0];
    Value *lead = op("aten::slice",
                     {op("aten::size", {x}), int64_t{0}, int64_t{2}, int64_t{1}});
    in[0] = op("aten::flatten", {x, int64_t{0}, int64_t{1}});
    Node *c = cloneWith(n, in, false);
    Value *y = c->output();
    env[n->output()] = asBatched(op("aten::unflatten", {y, int64_t{0}, lead}));
    return true;
  }

  /// cross_entropy of rows of logits ([N, C] or [C]) against class
  /// targets: the loss of each element unreduced, the batch dimension
  /// first and the classes second as the op takes them, then each row's
  /// own sum or weighted mean.
  bool batchLoss(Node *n, std::vector<Value *> &in) {
    const std::string name = opName(n);
    bool crossEntropy = name == "aten::cross_entropy_loss";
    if (!crossEntropy && name != "aten::nll_loss_nd")
      return false;
    std::optional<c10::IValue> reduction = torch::jit::toIValue(n->input(3));
    std::optional<c10::IValue> smoothing =
        crossEntropy ? torch::jit::toIValue(n->input(5))
                     : std::optional<c10::IValue>(c10::IValue(0.0));
    int64_t r = rowRank(n->input(0));
    if (!reduction || !smoothing || smoothing->toDouble() != 0.0 || isB(in[2]) ||
        (r != 1 && r != 2) || rowRank(n->input(1)) != r - 1)
      throw Refused{"'" + name + "' other than of [N, C] or [C] rows against "
                    "class targets, without label smoothing"};
    Value *logits = materialize(in[0]), *target = materialize(in[1]);
    if (r == 2)
      logits = op("aten::transpose", {logits, int64_t{1}, int64_t{2}});
    std::vector<torch::jit::NamedValue> args = {logits, target, in[2],
                                                int64_t{0}, in[4]};
    if (crossEntropy)
      args.emplace_back(in[5]);
    Value *each = op(name.c_str(), args);
    int64_t how = reduction->toInt();
    Value *out = each;
    if (r == 2 && how == 2)
      out = op("aten::sum", {each, std::vector<int64_t>{1}});
    if (how == 1) {
      // mean: over the rows' weights of the targets not ignored.
      Value *kept = op("aten::ne", {target, in[4]});
      Value *w = in[2]->mustBeNone()
                     ? op("aten::to", {kept, op("prim::dtype", {each})})
                     : op("aten::mul",
                          {op("aten::index", {in[2], optionalList({op(
                                                      "aten::where",
                                                      {kept, target, int64_t{0}})})}),
                           kept});
      Value *num = r == 2 ? op("aten::sum", {each, std::vector<int64_t>{1}}) : each;
      Value *den = r == 2 ? op("aten::sum", {w, std::vector<int64_t>{1}}) : w;
      out = op("aten::div", {num, den});
    }
    env[n->output()] = asBatched(out);
    return true;
  }

  /// \p x (batched, rows of rank \p of's) with size-1 dimensions after the
  /// batch one up to rows of rank \p rank: broadcasting then aligns rows.
  Value *unsqueezedTo(Value *x, const Value *of, int64_t rank) {
    for (int64_t r = rowRank(of); r < rank; ++r)
      x = op("aten::unsqueeze", {x, int64_t{1}});
    return x;
  }

  /// Elementwise ops: batched operands aligned to the result's rank.
  bool batchElementwise(Node *n, std::vector<Value *> &in) {
    const OpInfo *info = opInfo(n);
    bool likeInput = info && info->has(kLikeInput);
    // copy_ broadcasts its source into self, elementwise; `op_` is op in
    // place (ATen's naming), elementwise where op is.
    bool copy = n->kind() == c10::aten::copy_;
    const std::string name = opName(n);
    bool inPlace = !info && name.back() == '_' &&
                   anyOpInfo(c10::Symbol::fromQualString(
                                 name.substr(0, name.size() - 1)),
                             [](const OpInfo &o) { return o.has(kElementwise); });
    if (!copy && !inPlace &&
        (!info || !(info->has(kElementwise) || likeInput) ||
         n->outputs().size() != 1))
      return false;
    return alignAndClone(n, in);
  }

  /// The per-row rank of elementwise \p n's result: the run's, or where
  /// the run did not reach it, its operands' largest.
  int64_t broadcastRank(Node *n) {
    if (ranks.count(n->output()))
      return ranks.at(n->output());
    int64_t rank = 0;
    for (const Value *v : n->inputs())
      if (v->type()->kind() == c10::TypeKind::TensorType)
        rank = std::max(rank, rowRank(v));
    return ranks[n->output()] = rank;
  }

  /// \p n on batched operands aligned to its result's rank.
  bool alignAndClone(Node *n, std::vector<Value *> &in) {
    int64_t rank = broadcastRank(n);
    for (size_t i = 0; i < in.size(); ++i)
      if (isB(in[i]) && in[i]->type()->kind() == c10::TypeKind::TensorType)
        in[i] = unsqueezedTo(in[i], n->input(i), rank);
    if (mutatesInput0(n) && !isB(in[0]))
      throw Refused{"'" + opName(n) + "' writes a tensor every row shares"};
    if (!writtenOutArguments(n).empty())
      throw Refused{"'" + opName(n) + "' with out= has no batched form"};
    cloneWith(n, in, true);
    return true;
  }
};

} // namespace

BatchOutcome addBatchedMethod(torch::jit::Module &module,
                              const std::string &method,
                              const std::vector<TensorSignature> &signature) {
  BatchOutcome out;
  auto fn = module.find_method(method);
  if (!fn)
    return {"", "the module has no method '" + method + "'"};
  Graph &graph = *torch::jit::toGraphFunction(fn->function()).graph();
  AnalysisResult analysis = analyzeGraph(graph);
  if (!analysis.findings.empty())
    return {"", "the method is not static (" +
                    std::to_string(analysis.findings.size()) +
                    " findings): only a static method is batched"};
  for (const TensorSignature &s : signature)
    if (s.list)
      return {"", "a list argument (list[...]): lists are not batched"};
  std::string name = method + "_batched";
  if (module.find_method(name))
    return {"", "the module already has a method '" + name + "'"};
  try {
    std::vector<std::string> names;
    for (const c10::Argument &a : fn->function().getSchema().arguments())
      names.push_back(a.name());
    auto ranks = recordRanks(module, graph, signature);
    std::shared_ptr<Graph> batched =
        Batcher(graph, std::move(names), std::move(ranks)).run();
    auto type = module.type();
    c10::QualifiedName qualname(*type->name(), name);
    torch::jit::Function *f =
        type->compilation_unit()->create_function(qualname, batched);
    type->addMethod(f);
    out.method = name;
  } catch (const Refused &r) {
    out.reason = r.reason;
  } catch (const std::exception &e) {
    // A rule that emitted what libtorch rejects: the method stays
    // unbatched, and the report says where.
    std::string what = e.what();
    size_t start = what.find_first_not_of(" \n");
    what = start == std::string::npos ? what : what.substr(start);
    out.reason = "staticify could not batch it (please report): " +
                 what.substr(0, what.find('\n'));
  }
  return out;
}

} // namespace staticify
