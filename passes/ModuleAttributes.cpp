//===- ModuleAttributes.cpp - A method's reads of its module, lifted -------===//
#include "passes/ModuleAttributes.h"

#include "passes/GraphUtils.h"

#include <algorithm>

#include <map>
#include <optional>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// The attribute path of \p v from \p self (a chain of prim::GetAttr), or
/// none.
std::optional<std::vector<std::string>> attributePath(Value *v, Value *self) {
  std::vector<std::string> path;
  while (v != self) {
    Node *n = v->node();
    if (n->kind() != c10::prim::GetAttr)
      return std::nullopt;
    path.insert(path.begin(), n->s(c10::attr::name));
    v = n->input(0);
  }
  return path;
}

c10::IValue attributeValue(const torch::jit::Module &module,
                           const std::vector<std::string> &path) {
  c10::IValue v = module._ivalue();
  for (const std::string &name : path)
    v = v.toObject()->getAttr(name);
  return v;
}

} // namespace

bool writesAttributes(torch::jit::Block *block) {
  std::vector<Node *> nodes = collectNodes(block);
  return std::any_of(nodes.begin(), nodes.end(), [](const Node *n) {
    return n->kind() == c10::prim::SetAttr;
  });
}

std::vector<Value *> insertRunnerCall(Graph &g, Value *self,
                                      const std::string &attr,
                                      std::vector<Value *> inputs,
                                      const LiftedAttributes &lifted,
                                      size_t results) {
  for (size_t i = 0; i < lifted.paths.size(); ++i)
    inputs.push_back(readLiftedTensor(g, self, lifted, i));
  Value *runner = g.insertGetAttr(self, attr);
  Value *list =
      g.insertNode(g.createList(c10::TensorType::get(), inputs))->output();
  Node *run = g.insertNode(g.create(c10::prim::CallMethod, {runner, list}, 1));
  run->s_(c10::attr::name, "run");
  run->output()->setType(c10::ListType::ofTensors());
  std::vector<Value *> out;
  for (size_t i = 0; i < results; ++i)
    out.push_back(g.insert(c10::aten::__getitem__,
                           {run->output(), static_cast<int64_t>(i)}));
  return out;
}

std::string attributeName(const std::vector<std::string> &path) {
  std::string out;
  for (const std::string &p : path)
    out += (out.empty() ? "" : ".") + p;
  return out;
}

LiftedAttributes liftAttributes(Graph &graph, const torch::jit::Module &module) {
  LiftedAttributes out;
  Value *self = graph.inputs()[0];
  if (writesAttributes(graph.block())) {
    out.reason = "the method writes an attribute of the module";
    return out;
  }
  std::map<std::vector<std::string>, Value *> inputs;
  std::vector<Node *> reads = collectNodes(graph.block());
  reads.erase(std::remove_if(reads.begin(), reads.end(),
                             [](const Node *n) {
                               return n->kind() != c10::prim::GetAttr;
                             }),
              reads.end());
  for (Node *n : reads) {
    auto path = attributePath(n->output(), self);
    if (!path)
      continue;
    c10::IValue value = attributeValue(module, *path);
    bool none = n->output()->type()->kind() == c10::TypeKind::NoneType;
    if (none || value.isBool() || value.isInt() || value.isDouble()) {
      torch::jit::WithInsertPoint guard(n);
      n->output()->replaceAllUsesWith(
          graph.insertConstant(none ? c10::IValue() : value));
      if (!none)
        out.guards.emplace_back(*path, value);
      continue;
    }
    if (!value.isTensor())
      continue; // a submodule (its reads are handled), or left to the check
    auto [it, fresh] = inputs.emplace(*path, nullptr);
    if (fresh) {
      std::string name = attributeName(*path);
      for (char &c : name)
        c = c == '.' ? '_' : c;
      it->second = graph.addInput(name)->setType(c10::TensorType::get());
      out.paths.push_back(*path);
      out.tensors.push_back(value.toTensor());
      out.optional.push_back(n->output()->type()->kind() ==
                             c10::TypeKind::OptionalType);
    }
    n->output()->replaceAllUsesWith(it->second);
  }
  // The reads now unused, the innermost (latest) first; what still reads
  // the module says why the graph needs it.
  std::vector<Node *> kept;
  for (auto it = reads.rbegin(); it != reads.rend(); ++it) {
    if ((*it)->output()->hasUses())
      kept.push_back(*it);
    else
      (*it)->destroy();
  }
  for (Node *n : kept) {
    auto path = attributePath(n->output(), self);
    if (path && !n->output()->type()->cast<c10::ClassType>()) {
      out.reason = "the method reads attribute '" + attributeName(*path) +
                   "' (" + n->output()->type()->str() +
                   "), which is not a tensor, a bool, an int or a float";
      return out;
    }
  }
  for (Value *module : [&] {
         std::vector<Value *> modules{self};
         for (Node *n : kept)
           modules.push_back(n->output());
         return modules;
       }())
    for (const torch::jit::Use &use : module->uses())
      if (use.user->kind() != c10::prim::GetAttr) {
        out.reason = std::string("the method passes the module to ") +
                     use.user->kind().toQualString();
        return out;
      }
  return out;
}

Value *readAttribute(Graph &g, Value *self,
                     const std::vector<std::string> &path) {
  Value *v = self;
  for (const std::string &name : path)
    v = g.insertGetAttr(v, name);
  return v;
}

Value *readLiftedTensor(Graph &g, Value *self, const LiftedAttributes &lifted,
                        size_t i) {
  Value *v = readAttribute(g, self, lifted.paths[i]);
  if (lifted.optional[i])
    v = g.insertUncheckedCast(v, c10::TensorType::get());
  return v;
}

Value *guardsHold(Graph &g, Value *self, const LiftedAttributes &lifted) {
  Value *all = nullptr;
  auto both = [&](Value *holds) {
    all = all ? g.insert(c10::aten::__and__, {all, holds}) : holds;
  };
  for (const auto &[path, value] : lifted.guards)
    both(g.insert(c10::aten::eq,
                  {readAttribute(g, self, path), g.insertConstant(value)}));
  for (size_t i = 0; i < lifted.paths.size(); ++i)
    if (lifted.optional[i])
      both(g.insert(c10::aten::__isnot__,
                    {readAttribute(g, self, lifted.paths[i]),
                     g.insertConstant(c10::IValue())}));
  return all;
}

} // namespace staticify
