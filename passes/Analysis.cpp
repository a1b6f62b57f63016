//===- Analysis.cpp - The dynamism analysis --------------------------------===//

#include "passes/Analysis.h"
#include "passes/AnalysisShapes.h"

#include "passes/Compat.h"
#include "passes/Containers.h"
#include "passes/DTypes.h"
#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"

#include <algorithm>
#include <sstream>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

//===----------------------------------------------------------------------===//
// ValueInfo lattice
//===----------------------------------------------------------------------===//

void ValueInfo::addRoot(uint32_t id) {
  for (size_t i = 0; i < numRoots; ++i)
    if (roots[i] == id)
      return;
  if (numRoots < kMaxRoots)
    roots[numRoots++] = id;
}

void ValueInfo::addRootsOf(const ValueInfo &other) {
  for (size_t i = 0; i < other.numRoots; ++i)
    addRoot(other.roots[i]);
}

bool ValueInfo::join(const ValueInfo &other) {
  ValueInfo before = *this;
  cls = std::max(cls, other.cls);
  shape = std::max(shape, other.shape);
  if (dtype != other.dtype)
    dtype = DTypeKind::Unknown;
  onHost = onHost && other.onHost;
  dataLength = dataLength || other.dataLength;
  addRootsOf(other);
  return !(before == *this);
}

bool ValueInfo::operator==(const ValueInfo &o) const {
  return cls == o.cls && shape == o.shape && dtype == o.dtype &&
         onHost == o.onHost && dataLength == o.dataLength &&
         numRoots == o.numRoots &&
         std::equal(roots.begin(), roots.begin() + numRoots, o.roots.begin());
}

const ValueInfo &AnalysisResult::info(const Value *v) const {
  static const ValueInfo kHostStatic;
  auto it = values.find(v);
  return it == values.end() ? kHostStatic : it->second;
}

namespace {

/// `x.is_cpu` (not among libtorch's interned symbols).
const c10::Symbol kIsCpu = c10::Symbol::prim("is_cpu");

std::string nodeText(const Node *node) {
  std::ostringstream os;
  os << *node;
  std::string text = os.str();
  // One line: drop nested blocks and the trailing source comment.
  text = text.substr(0, text.find('\n'));
  size_t comment = text.find(" # ");
  if (comment != std::string::npos)
    text.resize(comment);
  size_t first = text.find_first_not_of(' ');
  return first == std::string::npos ? text : text.substr(first);
}

std::string valueName(const Node *node) {
  if (node->outputs().empty())
    return "";
  return "%" + node->output(0)->debugName();
}

void addReportFields(Finding &f, const Node *node) {
  f.value = valueName(node);
  f.location = locationOf(node);
  f.nodeText = nodeText(node);
}

bool isTensorType(const c10::TypePtr &type) {
  return type->kind() == c10::TypeKind::TensorType;
}

/// Whether \p device is the constant `torch.device("cpu")`.
bool isHostDevice(const Value *device) {
  auto iv = torch::jit::toIValue(device);
  return iv && iv->isDevice() && iv->toDevice().is_cpu();
}

/// Whether every tensor \p value holds (itself, or inside a tuple, list or
/// dict) lives on the host.
bool tensorsOnHost(const c10::IValue &value) {
  if (value.isTensor())
    return value.toTensor().device().is_cpu();
  if (value.isTuple()) {
    for (const c10::IValue &element : value.toTupleRef().elements())
      if (!tensorsOnHost(element))
        return false;
    return true;
  }
  if (value.isList()) {
    for (const c10::IValue &element : value.toListRef())
      if (!tensorsOnHost(element))
        return false;
    return true;
  }
  if (value.isGenericDict()) {
    for (const auto &entry : value.toGenericDict())
      if (!tensorsOnHost(entry.key()) || !tensorsOnHost(entry.value()))
        return false;
    return true;
  }
  return !value.isObject() && !value.isCapsule() && !value.isFuture();
}

class Analyzer {
public:
  explicit Analyzer(AnalysisResult &result) : result(result) {}

  void run(const Graph &graph) {
    for (const Value *in : graph.inputs())
      seedInput(in);
    analyzeBlock(graph.block());
    for (const Value *out : graph.outputs())
      if (isDataDependent(out))
        result.outputsStatic = false;
  }

private:
  AnalysisResult &result;
  /// While a loop body iterates to its fixpoint, findings are not recorded.
  int silentDepth = 0;
  /// Whether a tensor read out of a container takes the dtype of the held
  /// tensors reached so far only (inferDType); off once a loop's dtypes
  /// failed to settle in kMaxDTypePasses passes.
  bool readsReachedOnly = true;
  static constexpr int kMaxDTypePasses = 8;
  /// Inside a guard's fallback branch: root findings are counted in
  /// fallbackSyncPoints, none recorded.
  int fallbackDepth = 0;
  /// Inside a branch that only raises: root findings are counted in
  /// errorPathSyncPoints, none recorded.
  int errorPathDepth = 0;
  /// The data a branch or loop being analysed is conditioned on: what it
  /// writes to a list, a dict or an attribute depends on that data too.
  std::vector<ValueInfo> control;
  /// What has been stored to each attribute (prim::SetAttr), by name.
  std::unordered_map<std::string, ValueInfo> attributes;

  /// The data-dependence of values written under the current control.
  ValueInfo controlInfo() const {
    ValueInfo all;
    for (const ValueInfo &c : control)
      all.join(c);
    return all;
  }

  /// A write of \p written into container or attribute state \p target.
  void recordWrite(ValueInfo &target, ValueInfo written) {
    written.join(controlInfo());
    if (written.isDataDependent()) {
      target.cls = ValueClass::DataDependent;
      target.addRootsOf(written);
    }
  }

  ValueInfo &info(const Value *v) { return result.values[v]; }
  bool isDataDependent(const Value *v) {
    auto it = result.values.find(v);
    return it != result.values.end() && it->second.isDataDependent();
  }

  void seedInput(const Value *v) {
    ValueInfo vi;
    if (carriesTensor(v->type()))
      vi.cls = ValueClass::DeviceData;
    if (auto tt = v->type()->cast<c10::TensorType>())
      if (auto st = tt->scalarType())
        vi.dtype = dtypeKindOf(*st);
    info(v) = vi;
  }

  void analyzeBlock(const Block *block) {
    for (const Node *node : block->nodes()) {
      size_t at = result.nodes.size();
      if (!silentDepth) {
        ++result.numNodes;
        result.positionsOfOp[node->kind()].push_back(static_cast<uint32_t>(at));
        result.nodes.push_back(const_cast<Node *>(node));
        if (block == block->owningGraph()->block())
          result.topLevel.push_back(static_cast<uint32_t>(at));
      }
      if (node->kind() == c10::prim::If)
        analyzeIf(node);
      else if (node->kind() == c10::prim::Loop)
        analyzeLoop(node);
      else
        analyzeNode(node);
    }
  }

  /// Records a finding unless a loop body is iterating silently.
  std::optional<uint32_t> record(const Node *node, Category category, Role role,
                                 std::string message, const ValueInfo &causes) {
    if (silentDepth)
      return std::nullopt;
    if (errorPathDepth) {
      result.errorPathSyncPoints += role == Role::Root;
      return std::nullopt;
    }
    if (fallbackDepth) {
      result.fallbackSyncPoints += role == Role::Root;
      return std::nullopt;
    }
    Finding f;
    f.id = result.findings.size();
    f.category = category;
    f.role = role;
    f.op = node->kind().toQualString();
    f.message = std::move(message);
    if (result.detail == Detail::Report)
      // Source locations and node text are what a report shows, and most
      // of the analysis's time on a large model: facts for passes skip them.
      addReportFields(f, node);
    for (size_t i = 0; i < causes.numRoots; ++i)
      f.causes.push_back(causes.roots[i]);
    result.findings.push_back(std::move(f));
    result.findingNodes.push_back(node);
    return static_cast<uint32_t>(result.findings.size() - 1);
  }

  /// Joins the data-dependence of every input into one ValueInfo (its roots).
  ValueInfo joinedInputs(const Node *node) {
    ValueInfo all;
    for (const Value *in : node->inputs())
      if (isDataDependent(in))
        all.join(info(in));
    return all;
  }

  //===--------------------------------------------------------------------===//
  // Control flow
  //===--------------------------------------------------------------------===//

  void analyzeIf(const Node *node) {
    if (node->hasAttribute(guardAttr())) {
      if (node->i(guardAttr()) == kBoundGuard)
        record(node, Category::HostSync, Role::Root,
               "reads the host where the bound of a data-dependent size is "
               "too large to decide the test (a guard: below it, no read)",
               ValueInfo());
      analyzeBlock(node->blocks()[0]);
      ++fallbackDepth;
      analyzeBlock(node->blocks()[1]);
      --fallbackDepth;
      for (size_t i = 0; i < node->outputs().size(); ++i)
        info(node->output(i)) = info(node->blocks()[0]->outputs()[i]);
      return;
    }
    const ValueInfo cond = info(node->input(0));
    bool dataCond = cond.isDataDependent();
    if (dataCond)
      record(node, Category::ControlFlow, Role::Derived,
             "branch on a condition computed from tensor data", cond);
    if (dataCond)
      control.push_back(cond);
    // `if x.is_cpu:` — in its then-branch x lives on the host, and so does
    // what the branch computes from it and host numbers: its reads are no
    // device syncs (the forms' host paths, nms_on_host).
    const Node *test = node->input(0)->node();
    const Value *onCpu =
        test->kind() == kIsCpu && carriesTensor(test->input(0)->type())
            ? test->input(0)
            : nullptr;
    for (const Block *b : node->blocks()) {
      // Branches that only raise, or only warn: run only on the way to
      // their message.
      bool errorPath = onlyRaises(b) || onlyWarns(b);
      bool refined = onCpu && b == node->blocks()[0] && !info(onCpu).onHost;
      if (refined)
        info(onCpu).onHost = true;
      errorPathDepth += errorPath;
      analyzeBlock(b);
      errorPathDepth -= errorPath;
      if (refined)
        info(onCpu).onHost = false;
    }
    if (dataCond)
      control.pop_back();
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      // Start from the first branch: a default ValueInfo's Unknown dtype
      // would act as top and lose a dtype both branches agree on.
      ValueInfo out = info(node->blocks()[0]->outputs()[i]);
      out.join(info(node->blocks()[1]->outputs()[i]));
      if (dataCond) {
        // Which branch ran is data: every result depends on it, a tensor's
        // shape included (the branches may disagree on it).
        out.cls = ValueClass::DataDependent;
        if (carriesTensor(node->output(i)->type()))
          out.shape = ShapeDep::Dynamic;
        out.dataLength = true;
        out.addRootsOf(cond);
      }
      // A dtype the result's type states holds whichever branch ran (a
      // form whose branches' ops do not show it: bound's row_at).
      if (auto tt = node->output(i)->type()->cast<c10::TensorType>())
        if (auto st = tt->scalarType())
          out.dtype = dtypeKindOf(*st);
      info(node->output(i)) = out;
    }
  }

  void analyzeLoop(const Node *node) {
    // Inputs: max trip count, initial condition, carried values.
    // Body: (iteration, carried...) -> (condition, carried...).
    const Block *body = node->blocks()[0];
    size_t numCarried = node->inputs().size() - 2;
    std::vector<ValueInfo> carried(numCarried);
    for (size_t i = 0; i < numCarried; ++i)
      carried[i] = info(node->input(i + 2));
    ValueInfo tripInfo = info(node->input(0));
    tripInfo.join(info(node->input(1)));
    info(body->inputs()[0]) = ValueInfo{}; // the iteration counter

    // Iterate the body silently to a fixpoint over the carried values; the
    // lattice has height 3 per component, so this terminates quickly.
    // What the body writes to lists is under the trip count's control as
    // far as it is known (a list appended to in a loop of data-dependent
    // trip count has a data-dependent length, for the body's own reads of
    // it too).
    // The body's dtypes change too where a list it reads gets what the body
    // appends (inferDType's `reached`: a pass reads only what the passes
    // before reached); a change moves a dtype from known to Unknown only,
    // so this ends too.
    ++silentDepth;
    std::vector<DTypeKind> dtypes;
    int dtypePasses = 0;
    for (bool changed = true; changed;) {
      for (size_t i = 0; i < numCarried; ++i)
        info(body->inputs()[i + 1]) = carried[i];
      bool dataTripSoFar = tripInfo.isDataDependent();
      if (dataTripSoFar)
        control.push_back(tripInfo);
      analyzeBlock(body);
      if (dataTripSoFar)
        control.pop_back();
      changed = tripInfo.join(info(body->outputs()[0]));
      for (size_t i = 0; i < numCarried; ++i)
        changed |= carried[i].join(info(body->outputs()[i + 1]));
      std::vector<DTypeKind> now;
      dtypesIn(body, now);
      if (now != dtypes && ++dtypePasses > kMaxDTypePasses &&
          readsReachedOnly) {
        // Not settled: every held tensor from now on, as an Unknown until
        // reached again (what the passes before found is forgotten).
        readsReachedOnly = false;
        forgetDTypes(body);
        now.clear();
      }
      changed |= now != dtypes;
      dtypes = std::move(now);
    }
    --silentDepth;

    bool dataTrip = tripInfo.isDataDependent();
    if (dataTrip)
      record(node, Category::ControlFlow, Role::Derived,
             "loop whose trip count or condition is computed from tensor "
             "data",
             tripInfo);
    for (size_t i = 0; i < numCarried; ++i)
      info(body->inputs()[i + 1]) = carried[i];
    if (dataTrip)
      control.push_back(tripInfo);
    analyzeBlock(body); // once more, recording findings
    if (dataTrip)
      control.pop_back();
    // Roots first recorded in that pass reach the loop's results too.
    for (size_t i = 0; i < numCarried; ++i)
      carried[i].join(info(body->outputs()[i + 1]));
    for (size_t i = 0; i < numCarried; ++i) {
      ValueInfo out = carried[i];
      if (dataTrip) {
        out.cls = ValueClass::DataDependent;
        if (carriesTensor(node->output(i)->type()))
          out.shape = ShapeDep::Dynamic;
        out.dataLength = true;
        out.addRootsOf(tripInfo);
      }
      info(node->output(i)) = out;
    }
  }

  //===--------------------------------------------------------------------===//
  // Straight-line nodes
  //===--------------------------------------------------------------------===//

  void analyzeNode(const Node *node) {
    for (const Block *b : node->blocks())
      analyzeBlock(b);
    if (node->kind() == c10::prim::Constant) {
      ValueInfo vi;
      if (carriesTensor(node->output()->type())) {
        auto iv = torch::jit::toIValue(node->output());
        // A constant stays where it was made (moving a module moves its
        // parameters, not its graph's constants); a folded tuple or list
        // (`(torch.tensor(0.0), False)`) lives where all its tensors do.
        vi.onHost = iv && tensorsOnHost(*iv);
        if (isTensorType(node->output()->type())) {
          vi.cls = ValueClass::DeviceData;
          if (iv && iv->isTensor())
            vi.dtype = dtypeKindOf(iv->toTensor().scalar_type());
        }
      }
      info(node->output()) = vi;
      return;
    }

    if (node->kind() == c10::prim::CallMethod ||
        node->kind() == c10::prim::CallFunction)
      return analyzeCall(node);
    if (node->kind() == c10::prim::SetAttr) {
      recordWrite(attributes[node->s(c10::attr::name)], joinedInputs(node));
      return;
    }
    if (node->kind() == c10::prim::GetAttr) {
      ValueInfo vi;
      if (carriesTensor(node->output()->type()))
        vi.cls = ValueClass::DeviceData;
      // A buffer's dtype where normalize wrote it on the value's type.
      if (auto tt = node->output()->type()->cast<c10::TensorType>())
        if (auto st = tt->scalarType())
          vi.dtype = dtypeKindOf(*st);
      auto it = attributes.find(node->s(c10::attr::name));
      if (it != attributes.end() && it->second.isDataDependent()) {
        vi.cls = ValueClass::DataDependent;
        vi.shape = ShapeDep::Dynamic;
        vi.addRootsOf(it->second);
      }
      info(node->output()) = vi;
      return;
    }

    if (node->inputs().size() == 1 &&
        node->input(0)->type()->kind() == c10::TypeKind::ListType &&
        opInfo(node) && opInfo(node)->role == OpRole::ShapeRead)
      return analyzeListLength(node);
    if (const OpInfo *op = opInfo(node); op && op->has(kCopiesToHost))
      return analyzeHostCopy(node);
    switch (opRole(node)) {
    case OpRole::DynamicShapeRoot:
      if (analyzeDynamicShapeRoot(node))
        return;
      break; // an `index` without a mask is an ordinary gather
    case OpRole::SyncRead:
      return analyzeSyncRead(node);
    case OpRole::ShapeRead:
      return analyzeShapeRead(node);
    case OpRole::MetadataRead:
      return setOutputs(node, ValueInfo{});
    default:
      break;
    }
    if (const OpInfo *op = opInfo(node); op && op->has(kReadsValueOnHost))
      recordHiddenRead(node);
    analyzeGeneric(node);
  }

  /// An op that reads its 0-d tensor value on the host (kReadsValueOnHost):
  /// a sync point unless the value is on the host. Its results are
  /// analysed as the op's otherwise are.
  void recordHiddenRead(const Node *node) {
    const Value *value = node->inputs().back();
    if (!carriesTensor(value->type()) || info(value).onHost)
      return;
    ValueInfo causes;
    causes.addRootsOf(info(value));
    record(node, Category::HostSync, Role::Root,
           "'" + std::string(node->kind().toQualString()) +
               "' with a tensor value reads it on the host (value.item()): "
               "a host-device sync",
           causes);
  }

  /// A call that was not inlined (--no-inline): its body is not analysed,
  /// so its results are assumed data-dependent, and the report says so.
  void analyzeCall(const Node *node) {
    ValueInfo causes = joinedInputs(node);
    auto id = record(node, Category::DynamicShape, Role::Root,
                     "'" + std::string(node->kind().toQualString()) +
                         "' is not inlined: its body is not analysed and its "
                         "results are assumed data-dependent",
                     causes);
    ValueInfo out = causes;
    out.cls = ValueClass::DataDependent;
    out.shape = ShapeDep::Dynamic;
    if (id)
      out.addRoot(*id);
    for (const Value *o : node->outputs())
      info(o) = out;
  }

  void setOutputs(const Node *node, const ValueInfo &vi) {
    for (const Value *out : node->outputs()) {
      ValueInfo o = vi;
      if (!carriesTensor(out->type()) && o.cls == ValueClass::DeviceData)
        o.cls = ValueClass::HostStatic;
      o.dtype = inferDType(node, out);
      info(out) = o;
    }
    if (mutatesFirstInput(node) && !node->inputs().empty())
      joinWritten(node->input(0), vi);
  }

  /// \p target written in place takes in \p written's class and shape; a
  /// tensor's dtype no in-place op changes (`g[m] = N` casts N to g's).
  void joinWritten(const Value *target, const ValueInfo &written) {
    ValueInfo &t = info(target);
    DTypeKind dtype = t.dtype;
    t.join(written);
    if (target->type()->kind() == c10::TypeKind::TensorType)
      t.dtype = dtype;
  }

  enum class IndexKind { Integer, Mask, MaybeMask };

  /// Whether an `index`/`index_put_` node indexes with a boolean mask. An
  /// index tensor whose dtype is unknown (a graph input, say) may be one.
  IndexKind indexKind(const Node *node) {
    if (node->inputs().size() < 2)
      return IndexKind::Integer;
    const Node *list = node->input(1)->node();
    if (list->kind() == c10::prim::Constant) {
      // Constant propagation folds `x[torch.arange(3)]` into a constant list.
      auto iv = torch::jit::toIValue(node->input(1));
      if (!iv || !iv->isList())
        return IndexKind::MaybeMask;
      for (const c10::IValue &item : iv->toListRef()) {
        if (!item.isTensor())
          continue;
        c10::ScalarType st = item.toTensor().scalar_type();
        if (st == c10::ScalarType::Bool || st == c10::ScalarType::Byte)
          return IndexKind::Mask;
      }
      return IndexKind::Integer;
    }
    if (list->kind() != c10::prim::ListConstruct)
      return IndexKind::MaybeMask;
    IndexKind kind = IndexKind::Integer;
    for (const Value *idx : list->inputs()) {
      if (idx->mustBeNone())
        continue;
      DTypeKind k = info(idx).dtype;
      if (k == DTypeKind::Bool || k == DTypeKind::Byte)
        return IndexKind::Mask;
      if (k == DTypeKind::Unknown)
        kind = IndexKind::MaybeMask;
    }
    return kind;
  }

  bool analyzeDynamicShapeRoot(const Node *node) {
    const OpInfo &op = *opInfo(node);
    bool isIndex = op.rootShape == RootShape::MaskIndex;
    bool isStore = op.rootShape == RootShape::MaskStore;
    IndexKind indexing =
        (isIndex || isStore) ? indexKind(node) : IndexKind::Mask;
    if (indexing == IndexKind::Integer)
      return false;

    ValueInfo causes = joinedInputs(node);
    std::string what = isIndex   ? "indexing"
                       : isStore ? "assignment"
                                 : "'" + std::string(op.op) + "'";
    std::string message =
        indexing == IndexKind::MaybeMask
            ? what + " by a tensor of unknown dtype: " +
                  (isStore ? "a host sync" : "its shape depends on data") +
                  " if it is a boolean mask (make it explicit with .long() "
                  "or .to(torch.bool))"
            : what + " " + dynamicShapeReason(node) +
                  (isStore ? "" : ": its shape depends on data");
    auto id = record(node, Category::DynamicShape, Role::Root, message, causes);
    ValueInfo out = causes;
    if (id)
      out.addRoot(*id);
    if (isStore) {
      // The stored-to tensor keeps its shape: its contents stay device data.
      out.cls = ValueClass::DeviceData;
      out.shape = info(node->input(0)).shape;
      setOutputs(node, out);
      return true;
    }
    out.cls = ValueClass::DataDependent;
    out.shape =
        leadingRootShape(node, op) ? ShapeDep::Leading : ShapeDep::Dynamic;
    setOutputs(node, out);
    // `unique`'s inverse indices have the input's shape.
    if (op.has(kInverseIndices) && node->outputs().size() > 1) {
      ValueInfo inverse = info(node->input(0));
      inverse.cls = std::max(inverse.cls, ValueClass::DeviceData);
      info(node->output(1)) = inverse;
    }
    return true;
  }

  /// Whether only dimension 0 of a root's result depends on data.
  bool leadingRootShape(const Node *node, const OpInfo &op) {
    const Value *dim = namedInput(node, "dim");
    switch (op.rootShape) {
    case RootShape::LeadingIfDim0:
      return constantInt(node->input(1)) == 0;
    case RootShape::LeadingIfNoDim:
      return !dim || dim->mustBeNone();
    case RootShape::LeadingIfDimNoneOr0:
      return !dim || dim->mustBeNone() || constantInt(dim) == 0;
    case RootShape::MaskIndex: {
      // x[mask, ...]: the mask must come first for the count to lead.
      const Node *list = node->input(1)->node();
      const Value *first = list->inputs().empty() ? nullptr : list->input(0);
      return first && info(node->input(0)).shape == ShapeDep::Static &&
             (info(first).dtype == DTypeKind::Bool ||
              info(first).dtype == DTypeKind::Byte);
    }
    default:
      return true;
    }
  }

  void analyzeSyncRead(const Node *node) {
    // A tensor on the host read back: never a device sync
    // (`float(torch.tensor(image.shape[-2:]).min())`, tracing's
    // `int(NumToTensor(x.size(0)))`); its value is data-dependent only if
    // what it was computed from is.
    bool readsHostTensor = true;
    ValueInfo causes;
    for (const Value *in : node->inputs()) {
      if (carriesTensor(in->type()) && !info(in).onHost)
        readsHostTensor = false;
      // A host tensor's contents carry the roots they were computed from.
      causes.addRootsOf(info(in));
    }
    if (readsHostTensor) {
      if (causes.numRoots == 0)
        return setOutputs(node, ValueInfo{});
      record(node, Category::DataDerived, Role::Derived,
             "'" + std::string(node->kind().toQualString()) +
                 "' reads a host tensor computed from data-dependent values",
             causes);
      causes.cls = ValueClass::DataDependent;
      return setOutputs(node, causes);
    }
    const ValueInfo &in = info(node->input(0));
    ValueInfo out;
    out.addRootsOf(in);
    auto id = record(node, Category::HostSync, Role::Root,
                     "'" + std::string(node->kind().toQualString()) +
                         "' copies a tensor value to the host: a host-device "
                         "sync",
                     out);
    out.cls = ValueClass::DataDependent;
    if (id)
      out.addRoot(*id);
    setOutputs(node, out);
  }

  /// `t.cpu()`: a sync point unless t is on the host already. The copy
  /// lives on the host, so reading it is none: its class and shape are
  /// t's, its roots t's and its own.
  void analyzeHostCopy(const Node *node) {
    ValueInfo out = info(node->input(0));
    if (!out.onHost) {
      auto id = record(node, Category::HostSync, Role::Root,
                       "'aten::cpu' copies a tensor to the host: a "
                       "host-device sync",
                       out);
      if (id)
        out.addRoot(*id);
      out.onHost = true;
    }
    setOutputs(node, out);
  }

  /// len(list): data-dependent only where the list's length is, whatever
  /// its elements are (`len([boxes[keep]])` is 1).
  void analyzeListLength(const Node *node) {
    const ValueInfo &in = info(node->input(0));
    if (!in.dataLength)
      return setOutputs(node, ValueInfo{});
    readDerived(node, Category::DataDerived,
                "reads the length of a list whose length depends on data", in);
  }

  /// \p node read something of \p in that depends on data: a derived
  /// finding ("'op' \p what"), and results data-dependent with \p in's
  /// roots.
  void readDerived(const Node *node, Category category, const char *what,
                   const ValueInfo &in) {
    record(node, category, Role::Derived,
           "'" + std::string(node->kind().toQualString()) + "' " + what, in);
    ValueInfo out;
    out.cls = ValueClass::DataDependent;
    out.addRootsOf(in);
    setOutputs(node, out);
  }

  void analyzeShapeRead(const Node *node) {
    const ValueInfo &in = info(node->input(0));
    bool staticRead = !in.isDataDependent() || in.shape == ShapeDep::Static;
    // size(x, d) with a constant d > 0 of a leading-dynamic tensor is static.
    if (!staticRead && in.shape == ShapeDep::Leading &&
        node->inputs().size() > 1) {
      auto dim = constantInt(node->input(1));
      staticRead = dim && *dim > 0;
    }
    if (staticRead)
      return setOutputs(node, ValueInfo{});
    readDerived(node, Category::HostSync,
                "reads the size of a tensor whose shape depends on data", in);
  }

  /// Whether \p node's tensor results live on the host: a tensor built from
  /// host numbers with no device (`torch.tensor(image.shape[-2:])`:
  /// TorchScript's default device is the CPU), or an op of the table on such
  /// tensors and host numbers that names no device (`.min()`,
  /// `.to(torch.float32)`, `/`), or an ATen op outside it that keeps its
  /// operands' device (keepsDevice). Whether the values depend on data is
  /// the value class's business, not this.
  bool computesOnHost(const Node *node) {
    const OpInfo *op = opInfo(node);
    if (!op && !keepsDevice(node))
      return false;
    const Value *device = namedInput(node, "device");
    if (device && !device->mustBeNone() && !isHostDevice(device) &&
        !isDeviceOfHostTensor(device))
      return false;
    bool tensorInput = false;
    for (const Value *in : node->inputs()) {
      if (carriesTensor(in->type()) && !(op && op->has(kReadsOnlyShape))) {
        if (!info(in).onHost)
          return false;
        tensorInput = true;
      }
    }
    // A factory outside the table names its device (`torch.as_tensor(l,
    // device=torch.device("cpu"))`).
    return tensorInput || (op ? op->has(kBuildsOnHost) : device != nullptr);
  }

  /// Whether \p device is `x.device` of a tensor x on the host.
  bool isDeviceOfHostTensor(const Value *device) {
    const Node *def = device->node();
    return def->kind() == c10::prim::device && info(def->input(0)).onHost;
  }

  /// Whether an op outside the table (`torch.linalg.lstsq`, `torch.det`,
  /// `torch.as_tensor`) makes its results where its tensor operands live,
  /// or on the device its `device` argument names: an ATen op other than
  /// `.cuda()`. Ops of other namespaces (custom ops) may move data
  /// anywhere.
  static bool keepsDevice(const Node *node) {
    return node->maybeSchema() &&
           node->kind().ns() == c10::namespaces::aten &&
           node->kind() != c10::Symbol::aten("cuda");
  }

  /// Every other op: data-dependence flows from inputs to outputs.
  void analyzeGeneric(const Node *node) {
    ValueInfo causes;
    bool dynamicTensorInput = false;
    bool dataShapeArg = false;
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      const Value *in = node->input(i);
      if (!isDataDependent(in))
        continue;
      causes.join(info(in));
      if (carriesTensor(in->type()))
        dynamicTensorInput = true;
      else if (inputAffectsShape(node, i))
        dataShapeArg = true;
    }
    OpRole role = opRole(node);
    bool onHost = computesOnHost(node);
    // An op written in place on a tensor returns that tensor, whose shape
    // only a reshaping op (resize_, squeeze_...) changes: writing rows at
    // indices of data-dependent length (`keep[idx[keep_i]] = True`,
    // `out.index_add_(0, rows, src)`) changes contents, not the shape.
    const Value *keptShape = nullptr;
    if (mutatesFirstInput(node) && !node->inputs().empty() &&
        node->input(0)->type()->kind() == c10::TypeKind::TensorType &&
        !(opInfo(node) && opInfo(node)->has(kReshapesInPlace)))
      keptShape = node->input(0);

    for (const Value *out : node->outputs()) {
      ValueInfo o;
      o.addRootsOf(causes);
      if (carriesTensor(out->type())) {
        o.cls = ValueClass::DeviceData;
        ShapeDep shape = ShapeDep::Static;
        if (keptShape && out == node->output(0))
          shape = info(keptShape).shape;
        else if (dynamicTensorInput || dataShapeArg)
          shape = resultShape(result, node, role, dataShapeArg);
        o.shape = shape;
        if (shape != ShapeDep::Static)
          o.cls = ValueClass::DataDependent;
      } else if (causes.isDataDependent()) {
        o.cls = ValueClass::DataDependent;
      }
      o.dtype = inferDType(node, out);
      o.onHost = onHost && carriesTensor(out->type());
      o.dataLength = listLengthFromData(result, node, out);
      info(out) = o;
    }
    if (mutatesFirstInput(node) && !node->inputs().empty()) {
      const Value *target = node->input(0);
      if (target->type()->kind() == c10::TypeKind::TensorType) {
        // The tensor written takes in the result's class: its contents
        // derive from the causes, its shape is the result's.
        if (!node->outputs().empty())
          joinWritten(target, info(node->output(0)));
      } else {
        // A list or dict holds what is written to it (append, extend,
        // d[k] = v), and its length depends on any data the write is
        // conditioned on, or on the length of a list it takes in.
        bool dataLength = info(target).dataLength ||
                          controlInfo().isDataDependent() ||
                          listLengthFromData(result, node, target);
        if (carriesTensor(target->type()) && !node->outputs().empty())
          info(target).join(info(node->output(0))); // the elements' shapes
        recordWrite(info(target), causes);
        info(target).dataLength = dataLength;
        for (const Value *out : node->outputs())
          if (out->type()->kind() == c10::TypeKind::ListType)
            info(out).dataLength = dataLength;
      }
    }

    if (role == OpRole::Plumbing || node->outputs().empty())
      return;
    bool anyDataOutput =
        std::any_of(node->outputs().begin(), node->outputs().end(),
                    [&](const Value *v) { return isDataDependent(v); });
    if (!anyDataOutput)
      return;
    const std::string op = node->kind().toQualString();
    if (carriesTensor(node->output(0)->type()))
      record(node, Category::DynamicShape, Role::Derived,
             "'" + op + "' " +
                 (dataShapeArg ? "takes a size computed from tensor data: its "
                                 "shape depends on data"
                               : "inherits a data-dependent shape from its "
                                 "inputs"),
             causes);
    else
      record(node, Category::DataDerived, Role::Derived,
             "'" + op + "' computes a host value from data-dependent inputs",
             causes);
  }

  DTypeKind inferDType(const Node *node, const Value *out) {
    Reached reached = [this](const Value *v) {
      return result.values.count(v) > 0;
    };
    return staticify::inferDType(
        node, out, [this](const Value *v) { return info(v).dtype; },
        readsReachedOnly ? &reached : nullptr);
  }

  /// Forgets the dtypes of the values \p block and the blocks in it
  /// define.
  void forgetDTypes(const torch::jit::Block *block) {
    for (const Node *node : block->nodes()) {
      for (const Block *b : node->blocks())
        forgetDTypes(b);
      for (const Value *v : node->outputs())
        info(v).dtype = DTypeKind::Unknown;
    }
  }

  /// The dtypes of the values \p block and the blocks in it define.
  void dtypesIn(const torch::jit::Block *block, std::vector<DTypeKind> &out) {
    for (const Node *node : block->nodes()) {
      for (const Block *b : node->blocks())
        dtypesIn(b, out);
      for (const Value *v : node->outputs())
        out.push_back(info(v).dtype);
    }
  }
};

} // namespace

size_t countSyncPoints(const AnalysisResult &analysis) {
  return std::count_if(analysis.findings.begin(), analysis.findings.end(),
                       [](const Finding &f) { return f.role == Role::Root; });
}

void addReportDetail(AnalysisResult &analysis) {
  if (analysis.detail == Detail::Report)
    return;
  for (size_t i = 0; i < analysis.findings.size(); ++i)
    addReportFields(analysis.findings[i], analysis.findingNodes[i]);
  analysis.detail = Detail::Report;
}

AnalysisResult analyzeGraph(const Graph &graph, Detail detail) {
  AnalysisResult result;
  result.detail = detail;
  Analyzer(result).run(graph);
  return result;
}

} // namespace staticify
