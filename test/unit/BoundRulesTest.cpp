//===- BoundRulesTest.cpp - Each family of bound's rules on its own -------===//
//
// Each test sets up the representations a rule would find (a bounded value,
// a lifted int) by hand, asks one rule about one node, and checks what it
// answered and what it recorded: what it must rewrite, and what it must
// leave alone. The whole pass, with numbers compared against PyTorch, is
// tested by test/lit/passes/bound*.ir and test/e2e/test_bounded.py.
//
//===----------------------------------------------------------------------===//

#include "passes/Bounded.h"
#include "passes/GraphUtils.h"
#include "passes/IRSource.h"
#include "passes/bound/Rules.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>
#include <sstream>

using namespace staticify;
using namespace staticify::bound;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;
using Kind = RuleResult::Kind;

namespace {

const BoundRule &ruleNamed(const std::string &name) {
  for (const BoundRule &rule : boundRules())
    if (rule.name == name)
      return rule;
  throw std::runtime_error("no rule named " + name);
}

/// One graph, its analysis and a rule context over them.
class Fixture {
public:
  explicit Fixture(const std::string &ir)
      : graph(parseIRWithLocations(ir, "t.ir")), analysis(analyzeGraph(*graph)),
        aliases(graph), rc(*graph, ctx, analysis, aliases) {}

  /// The value named %name now (a clone takes its original's name).
  Value *value(const std::string &name) {
    for (Value *in : graph->inputs())
      if (in->debugName() == name)
        return in;
    for (Node *node : collectNodes(graph->block()))
      for (Value *out : node->outputs())
        if (out->debugName() == name)
          return out;
    throw std::runtime_error("no value %" + name);
  }

  /// Marks %name bounded: its padded rows are %padded, its count %count.
  Rep &bounded(const std::string &name, const std::string &padded,
               const std::string &count, bool isIndex = false,
               bool is1D = false) {
    return rc.setBounded(value(name), value(padded), value(count), isIndex,
                         is1D);
  }

  /// Marks host int %name lifted to the 0-d tensor %tensor, in [lo, hi].
  Rep &lifted(const std::string &name, const std::string &tensor, int64_t lo,
              int64_t hi) {
    Rep r(Rep::Kind::Lifted);
    r.value = value(tensor);
    r.range.lo = lo;
    r.range.hiConst = hi;
    rc.setRep(value(name), r);
    return rc.reps.at(value(name));
  }

  /// Asks rule \p rule about the node defining %name.
  RuleResult ask(const std::string &rule, const std::string &name) {
    Node *node = value(name)->node();
    torch::jit::WithInsertPoint guard(node);
    return ruleNamed(rule).fn(node, rc);
  }

  std::string ir() const {
    std::ostringstream os;
    os << *graph;
    return os.str();
  }

  std::shared_ptr<Graph> graph;
  AnalysisResult analysis;
  Aliases aliases;
  PassContext ctx;
  RuleContext rc;
};

const char *kBoundedRows =
    R"IR(graph(%x : Tensor, %p : Tensor, %c : Tensor, %s : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %n : int = aten::numel(%x)
  %d1 : int = aten::size(%x, %one)
  %all : int[] = aten::size(%x)
  %dims : int = aten::dim(%x)
  %r : Tensor = aten::relu(%x)
  %b : Tensor = aten::add(%x, %s, %one)
  %sm : Tensor = aten::softmax(%x, %one, %none)
  %sm0 : Tensor = aten::softmax(%x, %zero, %none)
  %t : Tensor = aten::sum(%x, %none)
  return (%n, %d1, %all, %dims, %r, %b, %sm, %sm0, %t)
)IR";

} // namespace

TEST(BoundRules, EveryRuleHasANameAndAFunction) {
  std::set<std::string> names;
  for (const BoundRule &rule : boundRules()) {
    EXPECT_FALSE(rule.name.empty());
    EXPECT_TRUE(rule.fn) << rule.name;
    EXPECT_TRUE(names.insert(rule.name).second) << "twice: " << rule.name;
  }
  for (const char *family :
       {"nonzero", "size", "prefix", "elementwise", "randperm"})
    EXPECT_TRUE(names.count(family)) << family;
}

//===----------------------------------------------------------------------===//
// Roots
//===----------------------------------------------------------------------===//

TEST(BoundRules, RootsBoundNonzeroAndWhereButNotTheElementwiseWhere) {
  Fixture f(R"IR(graph(%x : Tensor, %a : Tensor):
  %zero : int = prim::Constant[value=0]()
  %m : Tensor = aten::gt(%x, %zero)
  %i : Tensor = aten::nonzero(%m)
  %w : Tensor[] = aten::where(%m)
  %e : Tensor = aten::where(%m, %x, %a)
  return (%i, %w, %e)
)IR");
  ASSERT_EQ(f.ask("nonzero", "i").kind, Kind::Applied);
  Rep *i = f.rc.bounded(f.value("i"));
  ASSERT_TRUE(i);
  EXPECT_TRUE(i->isIndex);
  ASSERT_EQ(f.ask("where-list", "w").kind, Kind::Applied);
  EXPECT_EQ(f.rc.rep(f.value("w"))->kind, Rep::Kind::WhereList);
  // Must not touch: where(c, a, b) is elementwise.
  EXPECT_EQ(f.ask("where-list", "e").kind, Kind::NotApplicable);
  EXPECT_FALSE(f.rc.rep(f.value("e")));
}

TEST(BoundRules, RootsLiftOnlyCountsOrHintedInts) {
  Fixture f(R"IR(graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %none : NoneType = prim::Constant()
  %m : Tensor = aten::gt(%x, %zero)
  %s : Tensor = aten::sum(%m, %none)
  %count : int = aten::Int(%s)
  %v : Tensor = aten::sum(%x, %none)
  %value : int = aten::Int(%v)
  return (%count, %value)
)IR");
  ASSERT_EQ(f.ask("int-of-tensor", "count").kind, Kind::Applied);
  Rep *count = f.rc.lifted(f.value("count"));
  ASSERT_TRUE(count);
  EXPECT_EQ(count->range.lo, 0); // at most numel(m): a range, no hint
  ASSERT_TRUE(count->range.hi);
  EXPECT_EQ(count->range.hi->node()->kind(),
            c10::Symbol::fromQualString("aten::numel"));
  // Must not touch: an int read from data has no range without --bound.
  EXPECT_EQ(f.ask("int-of-tensor", "value").kind, Kind::NotApplicable);
  f.ctx.options.bounds = {{"value", 7}};
  ASSERT_EQ(f.ask("int-of-tensor", "value").kind, Kind::Applied);
  EXPECT_EQ(f.rc.lifted(f.value("value"))->range.hiConst, 7);
}

//===----------------------------------------------------------------------===//
// Scalars
//===----------------------------------------------------------------------===//

TEST(BoundRules, SizesOfBoundedValues) {
  Fixture f(kBoundedRows);
  f.bounded("x", "p", "c", false, /*is1D=*/true);
  ASSERT_EQ(f.ask("size", "n").kind, Kind::Applied);
  EXPECT_EQ(f.rc.lifted(f.value("n"))->value, f.value("c")); // a vector
  // A trailing size is the padded tensor's: static again.
  Value *d1 = f.value("d1");
  Node *user = d1->uses().at(0).user;
  ASSERT_EQ(f.ask("size", "d1").kind, Kind::Applied);
  EXPECT_FALSE(f.rc.rep(d1));
  EXPECT_EQ(user->inputs()[1]->node()->input(0), f.value("p"));
  // Must not touch: the whole size list has no bounded form.
  EXPECT_EQ(f.ask("size", "all").kind, Kind::Declined);
  ASSERT_EQ(f.ask("metadata", "dims").kind, Kind::Applied);
  EXPECT_EQ(f.value("dims")->node()->input(0), f.value("p"));
}

TEST(BoundRules, LiftedArithmeticCarriesRanges) {
  Fixture f(R"IR(graph(%k : int, %kt : Tensor):
  %one : int = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %j : int = aten::add(%k, %one)
  %h : int = aten::add(%one, %one)
  %r : Tensor = aten::arange(%k, %none, %none, %none, %none)
  return (%j, %h, %r)
)IR");
  f.lifted("k", "kt", 0, 10);
  ASSERT_EQ(f.ask("lift-scalar-op", "j").kind, Kind::Applied);
  Rep *j = f.rc.lifted(f.value("j"));
  ASSERT_TRUE(j);
  EXPECT_EQ(j->range.lo, 1);
  EXPECT_EQ(j->range.hiConst, 11);
  // Must not touch: host arithmetic on host ints stays on the host.
  EXPECT_EQ(f.ask("lift-scalar-op", "h").kind, Kind::NotApplicable);
  Value *r = f.value("r"); // the rule's copy takes the name
  ASSERT_EQ(f.ask("arange", "r").kind, Kind::Applied);
  EXPECT_TRUE(f.rc.bounded(r));
}

//===----------------------------------------------------------------------===//
// Rows
//===----------------------------------------------------------------------===//

TEST(BoundRules, RowsGoThroughElementwiseAndPerRowOps) {
  Fixture f(kBoundedRows);
  f.bounded("x", "p", "c");
  Value *relu = f.value("r"); // the rule's copy takes the name
  ASSERT_EQ(f.ask("elementwise", "r").kind, Kind::Applied);
  Rep *r = f.rc.bounded(relu);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->count, f.value("c"));
  EXPECT_EQ(r->value->node()->input(0), f.value("p"));
  // A static operand of unknown rank could broadcast against the padding
  // rows: it goes through behind a guard that its rank is below x's.
  Value *b = f.value("b");
  ASSERT_EQ(f.ask("elementwise", "b").kind, Kind::Applied);
  EXPECT_TRUE(f.rc.bounded(b));
  EXPECT_NE(f.graph->toString().find("aten::lt"), std::string::npos);
  ASSERT_EQ(f.ask("per-row", "sm").kind, Kind::Applied);
  // Must not touch: a softmax over dim 0 mixes live and padding rows.
  EXPECT_EQ(f.ask("per-row", "sm0").kind, Kind::NotApplicable);
  ASSERT_EQ(f.ask("reduce", "t").kind, Kind::Applied);
  EXPECT_FALSE(f.rc.rep(f.value("t"))); // a masked sum: static again
}

TEST(BoundRules, StaticOperandsOfLowerRankBroadcastAlongTheRows) {
  Fixture f(R"IR(graph(%x : Tensor, %p : Tensor, %c : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %two : int = prim::Constant[value=2]()
  %three : int = prim::Constant[value=3]()
  %vec : int[] = prim::ListConstruct(%three)
  %mat : int[] = prim::ListConstruct(%two, %three)
  %w : Tensor = aten::ones(%vec, %none, %none, %none, %none)
  %big : Tensor = aten::ones(%mat, %none, %none, %none, %none)
  %xs : int[] = prim::ListConstruct(%zero, %three)
  %x2 : Tensor = aten::reshape(%x, %xs)
  %lo : Tensor = aten::mul(%x2, %w)
  %hi : Tensor = aten::mul(%x2, %big)
  return (%lo, %hi)
)IR");
  f.bounded("x2", "p", "c");
  // A vector against rows of 2 dims: along their trailing dim, no guard.
  Value *lo = f.value("lo");
  ASSERT_EQ(f.ask("elementwise", "lo").kind, Kind::Applied);
  EXPECT_TRUE(f.rc.bounded(lo));
  EXPECT_EQ(f.graph->toString().find("aten::lt"), std::string::npos);
  // Must not touch: a matrix against rows of 2 dims broadcasts along them.
  EXPECT_EQ(f.ask("elementwise", "hi").kind, Kind::NotApplicable);
}

TEST(BoundRules, TopkByADataDependentKIsLeftAlone) {
  Fixture f(R"IR(graph(%x : Tensor, %p : Tensor, %c : Tensor, %y : Tensor):
  %zero : int = prim::Constant[value=0]()
  %three : int = prim::Constant[value=3]()
  %true : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %v : Tensor, %i : Tensor = aten::topk(%x, %three, %zero, %true, %true)
  %s : Tensor = aten::sum(%y, %none)
  %k : int = aten::Int(%s)
  %v2 : Tensor, %i2 : Tensor = aten::topk(%x, %k, %zero, %true, %true)
  return (%v, %i, %v2, %i2)
)IR");
  f.bounded("x", "p", "c");
  ASSERT_EQ(f.ask("sort", "v").kind, Kind::Applied);
  EXPECT_FALSE(f.rc.rep(f.value("v"))); // 3 rows, known on the host
  EXPECT_EQ(f.ask("sort", "v2").kind, Kind::Declined);
  EXPECT_FALSE(f.rc.rep(f.value("v2")));
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

TEST(BoundRules, PrefixesAndGathers) {
  Fixture f(
      R"IR(graph(%x : Tensor, %p : Tensor, %c : Tensor, %y : Tensor, %f : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %three : int = prim::Constant[value=3]()
  %head : Tensor = aten::slice(%x, %zero, %zero, %three, %one)
  %static : Tensor = aten::slice(%y, %zero, %zero, %three, %one)
  %step : Tensor = aten::slice(%x, %zero, %zero, %three, %three)
  %g : Tensor = aten::index_select(%y, %zero, %x)
  %l : Tensor?[] = prim::ListConstruct(%f)
  %bad : Tensor = aten::index(%y, %l)
  %sel : Tensor = aten::index_select(%y, %zero, %f)
  %none : Tensor = aten::index_select(%y, %zero, %c)
  return (%head, %static, %step, %g, %bad, %sel, %none)
)IR");
  f.bounded("x", "p", "c", /*isIndex=*/true);
  f.bounded("f", "p", "c", /*isIndex=*/false);
  ASSERT_EQ(f.ask("prefix", "head").kind, Kind::Applied);
  EXPECT_EQ(f.rc.bounded(f.value("head"))->value->node()->kind(),
            c10::aten::slice);
  // Must not touch: a static tensor cut by a host int is static. A step
  // of 3 is not a prefix: slice-rows takes it (slice_live), same count
  // source.
  EXPECT_EQ(f.ask("prefix", "static").kind, Kind::Declined);
  EXPECT_EQ(f.ask("prefix", "step").kind, Kind::NotApplicable);
  ASSERT_EQ(f.ask("slice-rows", "step").kind, Kind::Applied);
  EXPECT_NE(f.rc.bounded(f.value("step"))->count, f.value("c"));
  EXPECT_EQ(f.ask("slice-rows", "static").kind, Kind::NotApplicable);
  ASSERT_EQ(f.ask("gather", "g").kind, Kind::Applied);
  EXPECT_EQ(f.rc.bounded(f.value("g"))->count, f.value("c"));
  // Must not touch: an index of unknown dtype may be a mask; nor a gather
  // of nothing bounded. index_select takes integer indices only.
  EXPECT_EQ(f.ask("gather", "bad").kind, Kind::Declined);
  EXPECT_EQ(f.ask("gather", "none").kind, Kind::Declined);
  ASSERT_EQ(f.ask("gather", "sel").kind, Kind::Applied);
  EXPECT_EQ(f.rc.bounded(f.value("sel"))->count, f.value("c"));
}

//===----------------------------------------------------------------------===//
// Random draws
//===----------------------------------------------------------------------===//

TEST(BoundRules, RandpermOfALiftedSizeBecomesADraw) {
  Fixture f(R"IR(graph(%n : int, %nt : Tensor, %m : int):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %four : int = prim::Constant[value=4]()
  %none : NoneType = prim::Constant()
  %perm : Tensor = aten::randperm(%n, %none, %none, %none, %none)
  %head : Tensor = aten::slice(%perm, %zero, %zero, %four, %one)
  %host : Tensor = aten::randperm(%m, %none, %none, %none, %none)
  return (%head, %host)
)IR");
  f.lifted("n", "nt", 0, 100);
  ASSERT_EQ(f.ask("randperm", "perm").kind, Kind::Applied);
  EXPECT_EQ(f.rc.rep(f.value("perm"))->kind, Rep::Kind::RandPerm);
  ASSERT_EQ(f.ask("draw-prefix", "head").kind, Kind::Applied);
  Rep *head = f.rc.bounded(f.value("head"));
  ASSERT_TRUE(head);
  EXPECT_EQ(head->drawOf, f.value("nt"));
  // Must not touch: randperm of a host int is static.
  EXPECT_EQ(f.ask("randperm", "host").kind, Kind::Declined);
  EXPECT_EQ(f.ask("draw-prefix", "host").kind, Kind::NotApplicable);
}

//===----------------------------------------------------------------------===//
// The driver: rules from outside, and no half rewrites
//===----------------------------------------------------------------------===//

TEST(BoundRules, RulesRegisteredFromOutsideAreAskedAndRolledBack) {
  // Two rules for an op no built-in rule knows, registered as a custom op's
  // would be: one asked first that inserts IR and then finds it does not
  // apply (what it inserted is rolled back), and one that applies.
  static int halfRewrites = 0;
  registerBoundRule({"test-half-rewrite", BoundRule::On::Use,
                     ops({"aten::fliplr"}), [](Node *node, RuleContext &rc) {
                       ++halfRewrites;
                       emit(rc.graph, "prim::Print", {node->input(0)}, node);
                       return RuleResult::notApplicable();
                     }});
  registerBoundRule(
      {"test-flatten", BoundRule::On::Use, ops({"aten::fliplr"}),
       [](Node *node, RuleContext &rc) {
         Rep *x = rc.bounded(node->input(0));
         if (!x)
           return RuleResult::notApplicable();
         Node *copy =
             rc.graph.insertNode(rc.graph.createClone(node, [&](Value *v) {
               return v == node->input(0) ? x->value : v;
             }));
         rc.setBounded(node->output(), copy->output(), x->count, false);
         return RuleResult::applied();
       }});
  auto graph = parseIRWithLocations(R"IR(graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %minus : int = prim::Constant[value=-1]()
  %m : Tensor = aten::gt(%x, %zero)
  %i : Tensor = aten::nonzero(%m)
  %flat : Tensor = aten::fliplr(%i)
  %none : NoneType = prim::Constant()
  %s : Tensor = aten::sum(%flat, %none)
  return (%s, %i)
)IR",
                                    "t.ir");
  PassContext ctx;
  ASSERT_TRUE(boundShapes(graph, ctx));
  std::ostringstream os;
  os << *graph;
  std::string ir = os.str();
  // fliplr(i) (each row's columns reversed) stayed bounded into the sum; i is returned and
  // materializes there (one int(count)); the half rewrite left nothing.
  EXPECT_GT(halfRewrites, 0);
  EXPECT_EQ(ir.find("prim::Print"), std::string::npos) << ir;
  size_t reads = 0;
  for (size_t at = ir.find("aten::Int("); at != std::string::npos;
       at = ir.find("aten::Int(", at + 1))
    ++reads;
  EXPECT_EQ(reads, 1u) << ir;
  EXPECT_EQ(ir.find("aten::nonzero("), std::string::npos) << ir;
  EXPECT_NE(ir.find("aten::fliplr("), std::string::npos) << ir;
}

namespace {

const char *kReturnedDict =
    R"IR(graph(%x : Tensor, %p : Tensor, %c : Tensor, %s : Tensor):
  %kb : str = prim::Constant[value="boxes"]()
  %ks : str = prim::Constant[value="scores"]()
  %d : Dict(str, Tensor) = prim::DictConstruct(%kb, %x, %ks, %s)
  %read : Tensor = aten::__getitem__(%d, %kb)
  %r : Tensor = aten::relu(%read)
  %out : (Dict(str, Tensor), Tensor) = prim::TupleConstruct(%d, %r)
  return (%out)
)IR";

} // namespace

TEST(BoundRules, ReturnedDictsKeepBoundedEntriesPaddedWithTheirCounts) {
  Fixture f(kReturnedDict);
  f.bounded("x", "p", "c");
  // Must not touch: without --padded-outputs the dict is cut where built.
  EXPECT_EQ(f.ask("padded-dict", "d").kind, Kind::NotApplicable);
  f.ctx.options.paddedOutputs = true;
  Node *dict = f.value("d")->node();
  Value *read = f.value("read");
  ASSERT_EQ(f.ask("padded-dict", "d").kind, Kind::Applied);
  // boxes -> its padded rows, made neutral past the count (the form
  // neutral_padding of p and c); the static scores as they were; then the
  // count under "boxes_count".
  ASSERT_EQ(dict->inputs().size(), 6u);
  std::function<bool(const Value *, const Value *)> reads =
      [&](const Value *v, const Value *of) {
        if (v == of)
          return true;
        for (const Value *in : v->node()->inputs())
          if (reads(in, of))
            return true;
        return false;
      };
  EXPECT_NE(dict->input(1), f.value("p"));
  EXPECT_TRUE(reads(dict->input(1), f.value("p")));
  EXPECT_TRUE(reads(dict->input(1), f.value("c")));
  EXPECT_EQ(dict->input(3), f.value("s"));
  EXPECT_EQ(constantString(dict->input(4)), std::optional<std::string>("boxes_count"));
  EXPECT_EQ(dict->input(5), f.value("c"));
  // The later read is bounded again: its count read beside it.
  Rep *r = f.rc.bounded(read);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->count->node()->kind(), c10::aten::__getitem__);
  EXPECT_EQ(constantString(r->count->node()->input(1)),
            std::optional<std::string>("boxes_count"));
  EXPECT_EQ(r->value->node()->input(1), f.value("kb"));
}

TEST(BoundRules, DictsSeenWholeOrWithClashingKeysAreCutWhereBuilt) {
  const char *measured =
      R"IR(graph(%x : Tensor, %p : Tensor, %c : Tensor):
  %kb : str = prim::Constant[value="boxes"]()
  %d : Dict(str, Tensor) = prim::DictConstruct(%kb, %x)
  %n : int = aten::len(%d)
  %out : (Dict(str, Tensor), int) = prim::TupleConstruct(%d, %n)
  return (%out)
)IR";
  const char *clashing =
      R"IR(graph(%x : Tensor, %p : Tensor, %c : Tensor, %s : Tensor):
  %kb : str = prim::Constant[value="boxes"]()
  %kc : str = prim::Constant[value="boxes_count"]()
  %d : Dict(str, Tensor) = prim::DictConstruct(%kb, %x, %kc, %s)
  return (%d)
)IR";
  for (const char *ir : {measured, clashing}) {
    Fixture f(ir);
    f.bounded("x", "p", "c");
    f.ctx.options.paddedOutputs = true;
    Node *dict = f.value("d")->node();
    size_t inputs = dict->inputs().size();
    RuleResult result = f.ask("padded-dict", "d");
    EXPECT_EQ(result.kind, Kind::Declined) << ir;
    EXPECT_NE(result.why.find("cut to its counts where it is built"),
              std::string::npos)
        << result.why;
    EXPECT_EQ(dict->inputs().size(), inputs); // nothing changed
  }
}

TEST(BoundRules, UnbindAlongATrailingDimKeepsTheRows) {
  Fixture f(R"IR(graph(%x : Tensor, %p : Tensor, %c : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %parts : Tensor[] = aten::unbind(%x, %one)
  %a : Tensor, %b : Tensor = prim::ListUnpack(%parts)
  %rows : Tensor[] = aten::unbind(%x, %zero)
  %u : Tensor, %v : Tensor = prim::ListUnpack(%rows)
  return (%a, %b, %u, %v)
)IR");
  f.bounded("x", "p", "c");
  Value *a = f.value("a"), *b = f.value("b");
  ASSERT_EQ(f.ask("unbind", "parts").kind, Kind::Applied);
  for (Value *part : {a, b}) {
    Rep *r = f.rc.bounded(part);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->count, f.value("c"));
  }
  // Must not touch: along dim 0 the parts are the rows themselves, as many
  // as the count.
  EXPECT_EQ(f.ask("unbind", "rows").kind, Kind::NotApplicable);
}
