"""Spelling variants of the idioms (idioms.py): each idiom's forward written
again the way other code writes the same thing, for checking that staticify
ends where it ends on the original (test_spellings.py).

A variant is the idiom's forward with one rule, or a few, applied wherever it
applies. A rule rewrites one spelling into an equal one: `a > b` into
`a.gt(b)`, `torch.where(c)[0]` into `torch.nonzero(c).squeeze(1)`, `x[m]`
into `torch.masked_select(x, m)`, `int(t)` into `int(t.item())`, a one-line
conditional into an if statement, ... (RULES below, each with what it needs
to hold). The rewriting is source to source: the forward's AST, rewritten,
unparsed, and written into a module of its own, which TorchScript scripts as
it scripts idioms.py (it reads the source of what it compiles).

What a rule needs to know of an operand (is it a tensor, a bool mask, 1-D,
of the same shape as another) comes from running the idiom's forward as
Python on its own inputs, every expression recorded: a rule applies only
where every run agrees. TorchScript types carry no dtype or rank, and the
idioms' dtypes and ranks are those of their inputs, so this is what decides
them; test_spellings.py checks each variant's output against the original's.

Where an idiom has fewer than MIN_VARIANTS single-rule variants, pairs of its
rules make up the difference.

    /usr/bin/python3 test/e2e/spellings.py [--check] [--compare BIN]

prints each idiom's variants; --check scripts each and compares its output
with the original's on the idiom's inputs (as Python and as TorchScript);
--compare runs the binary on each and prints those whose sync points differ
from the original's, with the reasons the report gives for what it kept."""
import ast
import collections
import copy
import importlib.util
import inspect
import itertools
import pathlib
import sys
import textwrap

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import idioms  # noqa: E402

MIN_VARIANTS = 5

# Inputs the forward is run on to learn its operands: kinds as
# test_rewrites.compare_outputs draws them (nothing kept, everything, some).
PROBE_KINDS = ("none", "all", "random", "random", "random", "random")

Variant = collections.namedtuple("Variant", "idiom rules source")


# --- what the original's operands are ------------------------------------------------

class Facts:
    """What each expression of the forward (by its `_sid`, numbered on the
    parsed forward) evaluated to, in order, over every probe run: (kind,
    dtype, shape) with kind "Tensor", "namedtuple" (torch.return_types) or
    the Python type's name."""

    def __init__(self):
        self.seen = collections.defaultdict(list)

    def record(self, sid, value):
        if isinstance(value, torch.Tensor):
            self.seen[sid].append(("Tensor", value.dtype, tuple(value.shape)))
        elif type(value).__module__ == "torch.return_types":
            self.seen[sid].append(("namedtuple", None, None))
        else:
            self.seen[sid].append((type(value).__name__, None, None))
        return value

    def of(self, node):
        return self.seen.get(getattr(node, "_sid", None), [])

    def tensor(self, node, dtypes=None, ndim=None):
        """Every run evaluated node to a tensor (of one of dtypes, of rank
        ndim, where given); False where it never ran."""
        seen = self.of(node)
        return bool(seen) and all(
            kind == "Tensor" and (dtypes is None or dtype in dtypes)
            and (ndim is None or len(shape) == ndim) for kind, dtype, shape in seen)

    def mask(self, node, ndim=None):
        return self.tensor(node, (torch.bool,), ndim)

    def integral(self, node):
        return self.tensor(node) and all(not d.is_floating_point and not d.is_complex
                                         and d != torch.bool for _, d, _ in self.of(node))

    def floating(self, node):
        return self.tensor(node) and all(d.is_floating_point for _, d, _ in self.of(node))

    def kind(self, node, kind):
        seen = self.of(node)
        return bool(seen) and all(k == kind for k, _, _ in seen)

    def same_shape(self, a, b):
        """a and b evaluated to tensors of one shape on every run (they are
        evaluated together, so their records pair up)."""
        sa, sb = self.of(a), self.of(b)
        return (self.tensor(a) and self.tensor(b) and len(sa) == len(sb)
                and all(x[2] == y[2] for x, y in zip(sa, sb)))


# The expressions recorded: values, not the callee of a call, not a slice.
PROBED = (ast.Name, ast.Call, ast.Compare, ast.BinOp, ast.UnaryOp, ast.BoolOp,
          ast.Subscript, ast.Attribute, ast.IfExp)


class _Probe(ast.NodeTransformer):
    """Wraps each recorded expression e of the body in _spelling_probe(sid, e)."""

    def visit(self, node):
        node = super().visit(node)
        if (isinstance(node, PROBED) and hasattr(node, "_sid")
                and isinstance(getattr(node, "ctx", ast.Load()), ast.Load)):
            return ast.Call(ast.Name("_spelling_probe", ast.Load()),
                            [ast.Constant(node._sid), node], [])
        return node

    def visit_Call(self, node):
        # The callee stays as written (a bound method, torch.where).
        node.args = [self.visit(a) for a in node.args]
        node.keywords = [self.visit(k) for k in node.keywords]
        if isinstance(node.func, ast.Attribute):
            node.func.value = self.visit(node.func.value)
        return node

    def visit_AnnAssign(self, node):
        node.value = self.visit(node.value) if node.value else None
        return node


def parse_forward(cls):
    """The forward of cls as an ast.FunctionDef, each expression numbered."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls.forward))).body[0]
    for sid, node in enumerate(n for stmt in tree.body for n in ast.walk(stmt)):
        node._sid = sid
    return tree


def learn(tree, module, inputs):
    """Facts of running tree (a forward) as Python on module and its inputs."""
    facts = Facts()
    probed = copy.deepcopy(tree)
    probed.body = [_Probe().visit(s) for s in probed.body]
    probed.decorator_list = []
    namespace = dict(vars(idioms), _spelling_probe=facts.record)
    exec(compile(ast.fix_missing_locations(ast.Module([probed], [])), "<probe>", "exec"),
         namespace)
    forward = namespace[tree.name]
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for kind in PROBE_KINDS:
            try:
                forward(module, *inputs(gen, kind))
            except Exception:  # noqa: BLE001 - what ran before the raise counts
                pass
    return facts


# --- building blocks ---------------------------------------------------------------------

def name(n):
    return ast.Name(n, ast.Load())


def attr(value, n):
    return ast.Attribute(value, n, ast.Load())


def call(func, *args, **keywords):
    return ast.Call(func, list(args), [ast.keyword(k, v) for k, v in keywords.items()])


def torch_call(n, *args, **keywords):
    return call(attr(name("torch"), n), *args, **keywords)


def method(receiver, n, *args, **keywords):
    return call(attr(receiver, n), *args, **keywords)


def const(value):
    return ast.Constant(value)


def dup(node):
    """A second copy of node (a tree may not hold one node twice: a later
    rule would rewrite it twice)."""
    return copy.deepcopy(node)


def full_slice():
    return ast.Slice(None, None, None)


def int_constant(node, values=None):
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = int_constant(node.operand)
        return None if inner is None or values is not None and -inner not in values else -inner
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value if values is None or node.value in values else None
    return None


def namespace_call(node, namespace, names):
    """f when node is namespace.f(...) with f in names (namespace: "torch", "F")."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == namespace
            and node.func.attr in names):
        return node.func.attr
    return None


def method_call(node, facts, names):
    """f when node is x.f(...) with f in names and x a tensor on every run."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in names and facts.tensor(node.func.value)):
        return node.func.attr
    return None


def tensor_op(node, facts, names):
    """(f, operand, args, keywords) when node is x.f(args) or torch.f(x, args)
    with f in names and x a tensor; None otherwise."""
    f = method_call(node, facts, names)
    if f:
        return f, node.func.value, node.args, node.keywords
    f = namespace_call(node, "torch", names)
    if f and node.args and facts.tensor(node.args[0]):
        return f, node.args[0], node.args[1:], node.keywords
    return None


def free_names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


# --- the rules ---------------------------------------------------------------------------
#
# An expression rule takes a node (its operands already rewritten) and the
# facts, and returns the node's replacement, or None where it does not apply.
# A body rule takes the forward and rewrites its statements, returning how
# many sites it rewrote.

RULES = {}


class _Rewrite(ast.NodeTransformer):
    def __init__(self, rule, facts):
        self.rule, self.facts, self.sites = rule, facts, 0

    def visit(self, node):
        node = super().visit(node)
        if isinstance(node, ast.expr):
            new = self.rule(node, self.facts)
            if new is not None:
                # The replacement has the value of what it replaces: its facts.
                if hasattr(node, "_sid"):
                    new._sid = node._sid
                self.sites += 1
                return new
        return node

    def visit_AnnAssign(self, node):
        node.value = self.visit(node.value) if node.value else None
        return node


def expression_rule(rule_name):
    def register(fn):
        def apply(tree, facts):
            rewrite = _Rewrite(fn, facts)
            tree.body = [rewrite.visit(s) for s in tree.body]
            return rewrite.sites
        apply.__doc__ = fn.__doc__
        RULES[rule_name] = apply
        return fn
    return register


def body_rule(rule_name):
    def register(fn):
        RULES[rule_name] = fn
        return fn
    return register


# Comparisons.

COMPARISONS = {ast.Gt: "gt", ast.GtE: "ge", ast.Lt: "lt", ast.LtE: "le",
               ast.Eq: "eq", ast.NotEq: "ne"}
MIRRORED = {ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Lt: ast.Gt, ast.LtE: ast.GtE,
            ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}
OPERATORS = {v: k for k, v in COMPARISONS.items()}


def _comparison(node, facts):
    """(left, op type, right) of a single comparison whose left is a tensor."""
    if (isinstance(node, ast.Compare) and len(node.ops) == 1
            and type(node.ops[0]) in COMPARISONS and facts.tensor(node.left)):
        return node.left, type(node.ops[0]), node.comparators[0]
    return None


@expression_rule("compare-method")
def _(node, facts):
    """`a > b` as `a.gt(b)` (ge, lt, le, eq, ne alike)."""
    c = _comparison(node, facts)
    return c and method(c[0], COMPARISONS[c[1]], c[2])


@expression_rule("compare-function")
def _(node, facts):
    """`a > b` as `torch.gt(a, b)`."""
    c = _comparison(node, facts)
    return c and torch_call(COMPARISONS[c[1]], c[0], c[2])


@expression_rule("compare-flipped")
def _(node, facts):
    """`a > b` as `b < a` (a tensor comparison, either side the tensor)."""
    if (isinstance(node, ast.Compare) and len(node.ops) == 1
            and type(node.ops[0]) in MIRRORED and facts.tensor(node)):
        return ast.Compare(node.comparators[0], [MIRRORED[type(node.ops[0])]()], [node.left])
    return None


@expression_rule("compare-operator")
def _(node, facts):
    """`a.ne(b)` and `torch.ne(a, b)` as `a != b`."""
    op = tensor_op(node, facts, OPERATORS)
    if op and len(op[2]) == 1 and not op[3]:
        return ast.Compare(op[1], [OPERATORS[op[0]]()], [op[2][0]])
    return None


# Logic on bool masks.

def _masks(node, facts, op):
    if (isinstance(node, ast.BinOp) and isinstance(node.op, op)
            and facts.mask(node.left) and facts.mask(node.right)):
        return node.left, node.right
    return None


@expression_rule("and-function")
def _(node, facts):
    """`a & b` of bool masks as `torch.logical_and(a, b)`."""
    m = _masks(node, facts, ast.BitAnd)
    return m and torch_call("logical_and", *m)


@expression_rule("and-method")
def _(node, facts):
    """`a & b` of bool masks as `a.logical_and(b)`."""
    m = _masks(node, facts, ast.BitAnd)
    return m and method(m[0], "logical_and", m[1])


@expression_rule("and-multiply")
def _(node, facts):
    """`a & b` of bool masks as `a * b` (a product of bools is a bool)."""
    m = _masks(node, facts, ast.BitAnd)
    return m and ast.BinOp(m[0], ast.Mult(), m[1])


@expression_rule("and-bitwise")
def _(node, facts):
    """`a & b` as `torch.bitwise_and(a, b)`."""
    m = _masks(node, facts, ast.BitAnd)
    return m and torch_call("bitwise_and", *m)


def _negated_mask(node, facts):
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert) \
            and facts.mask(node.operand):
        return node.operand
    return None


@expression_rule("not-function")
def _(node, facts):
    """`~m` of a bool mask as `torch.logical_not(m)`."""
    m = _negated_mask(node, facts)
    return m and torch_call("logical_not", m)


@expression_rule("not-method")
def _(node, facts):
    """`~m` of a bool mask as `m.logical_not()`."""
    m = _negated_mask(node, facts)
    return m and method(m, "logical_not")


@expression_rule("not-nan-self-equal")
def _(node, facts):
    """`~torch.isnan(t)` as `t == t` (only NaN differs from itself)."""
    m = _negated_mask(node, facts)
    op = m and tensor_op(m, facts, {"isnan"})
    if op and not op[2] and not op[3]:
        return ast.Compare(op[1], [ast.Eq()], [dup(op[1])])
    return None


# nonzero and where.

def _where_first(node, facts):
    """c of `torch.where(c)[0]` with c 1-D."""
    if (isinstance(node, ast.Subscript) and int_constant(node.slice, {0}) == 0
            and namespace_call(node.value, "torch", {"where"})
            and len(node.value.args) == 1 and not node.value.keywords
            and facts.tensor(node.value.args[0], ndim=1)):
        return node.value.args[0]
    return None


@expression_rule("where-nonzero-squeeze")
def _(node, facts):
    """`torch.where(c)[0]` (c 1-D) as `torch.nonzero(c).squeeze(1)`."""
    c = _where_first(node, facts)
    return c and method(torch_call("nonzero", c), "squeeze", const(1))


@expression_rule("where-nonzero-squeeze-last")
def _(node, facts):
    """`torch.where(c)[0]` (c 1-D) as `torch.nonzero(c).squeeze(-1)` (mmdet's
    samplers)."""
    c = _where_first(node, facts)
    return c and method(torch_call("nonzero", c), "squeeze", const(-1))


@expression_rule("where-nonzero-flatten")
def _(node, facts):
    """`torch.where(c)[0]` (c 1-D) as `c.nonzero().flatten()`."""
    c = _where_first(node, facts)
    return c and method(method(c, "nonzero"), "flatten")


@expression_rule("where-nonzero-view")
def _(node, facts):
    """`torch.where(c)[0]` (c 1-D) as `torch.nonzero(c).view(-1)`."""
    c = _where_first(node, facts)
    return c and method(torch_call("nonzero", c), "view", const(-1))


@expression_rule("where-nonzero-column")
def _(node, facts):
    """`torch.where(c)[0]` (c 1-D) as `torch.nonzero(c)[:, 0]`."""
    c = _where_first(node, facts)
    return c and ast.Subscript(torch_call("nonzero", c),
                               ast.Tuple([full_slice(), const(0)], ast.Load()), ast.Load())


@expression_rule("where-nonzero-unbind")
def _(node, facts):
    """`torch.where(c)[0]` (c 1-D) as `c.nonzero().unbind(1)[0]` (detectron2's
    nonzero_tuple)."""
    c = _where_first(node, facts)
    return c and ast.Subscript(method(method(c, "nonzero"), "unbind", const(1)),
                               const(0), ast.Load())


@expression_rule("where-argwhere")
def _(node, facts):
    """`torch.where(c)[0]` (c 1-D) as `torch.argwhere(c)[:, 0]`."""
    c = _where_first(node, facts)
    return c and ast.Subscript(torch_call("argwhere", c),
                               ast.Tuple([full_slice(), const(0)], ast.Load()), ast.Load())


def _nonzero_of(node, facts, ndim=None):
    """x of `x.nonzero()` or `torch.nonzero(x)` (x of rank ndim, where given)."""
    op = tensor_op(node, facts, {"nonzero"})
    if op and not op[2] and not op[3] and (ndim is None or facts.tensor(op[1], ndim=ndim)):
        return op[1]
    return None


@expression_rule("nonzero-where")
def _(node, facts):
    """`x.nonzero().squeeze(1)` (x 1-D) as `torch.where(x)[0]`."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "squeeze" and len(node.args) == 1 and not node.keywords
            and int_constant(node.args[0], {1, -1}) is not None):
        x = _nonzero_of(node.func.value, facts, ndim=1)
        if x:
            return ast.Subscript(torch_call("where", x), const(0), ast.Load())
    return None


@expression_rule("nonzero-argwhere")
def _(node, facts):
    """`torch.nonzero(x)` and `x.nonzero()` as `torch.argwhere(x)`."""
    x = _nonzero_of(node, facts)
    return x and torch_call("argwhere", x)


def _nonzero_count(node, facts):
    """x of `x.nonzero().numel()` with x 1-D."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "numel" and not node.args and not node.keywords):
        return _nonzero_of(node.func.value, facts, ndim=1)
    return None


@expression_rule("nonzero-count-size")
def _(node, facts):
    """`x.nonzero().numel()` (x 1-D) as `x.nonzero().size(0)`."""
    x = _nonzero_count(node, facts)
    return x and method(method(x, "nonzero"), "size", const(0))


@expression_rule("nonzero-count-count-nonzero")
def _(node, facts):
    """`x.nonzero().numel()` (x 1-D) as `int(torch.count_nonzero(x))`."""
    x = _nonzero_count(node, facts)
    return x and call(name("int"), torch_call("count_nonzero", x))


@expression_rule("mask-sum-count-nonzero")
def _(node, facts):
    """`m.sum()` and `m.sum(d)` of a bool mask as `torch.count_nonzero(m)`,
    `torch.count_nonzero(m, d)` (both int64)."""
    op = tensor_op(node, facts, {"sum"})
    if op and facts.mask(op[1]) and len(op[2]) <= 1 and all(k.arg == "dim" for k in op[3]):
        return call(attr(name("torch"), "count_nonzero"), op[1], *op[2],
                    **{k.arg: k.value for k in op[3]})
    return None


# Boolean indexing.

def _mask_index(node, facts, ndim=None):
    """(x, m) of a read x[m] with m a bool mask (of rank ndim, where given)."""
    if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
            and facts.tensor(node.value) and facts.mask(node.slice, ndim)):
        return node.value, node.slice
    return None


@expression_rule("mask-select-function")
def _(node, facts):
    """`x[m]` with m of x's shape as `torch.masked_select(x, m)`."""
    xm = _mask_index(node, facts)
    return xm and facts.same_shape(*xm) and torch_call("masked_select", *xm) or None


@expression_rule("mask-select-method")
def _(node, facts):
    """`x[m]` with m of x's shape as `x.masked_select(m)`."""
    xm = _mask_index(node, facts)
    return xm and facts.same_shape(*xm) and method(xm[0], "masked_select", xm[1]) or None


@expression_rule("mask-index-where")
def _(node, facts):
    """`x[m]` with m 1-D as `x[torch.where(m)[0]]`."""
    xm = _mask_index(node, facts, ndim=1)
    return xm and ast.Subscript(
        xm[0], ast.Subscript(torch_call("where", xm[1]), const(0), ast.Load()), ast.Load())


@expression_rule("mask-index-nonzero")
def _(node, facts):
    """`x[m]` with m 1-D as `x[m.nonzero().squeeze(1)]`."""
    xm = _mask_index(node, facts, ndim=1)
    return xm and ast.Subscript(
        xm[0], method(method(xm[1], "nonzero"), "squeeze", const(1)), ast.Load())


@expression_rule("mask-index-select")
def _(node, facts):
    """`x[m]` with m 1-D as `x.index_select(0, torch.where(m)[0])`."""
    xm = _mask_index(node, facts, ndim=1)
    return xm and method(xm[0], "index_select", const(0),
                         ast.Subscript(torch_call("where", xm[1]), const(0), ast.Load()))


@expression_rule("masked-select-index")
def _(node, facts):
    """`torch.masked_select(x, m)` and `x.masked_select(m)` with m of x's
    shape as `x[m]`."""
    op = tensor_op(node, facts, {"masked_select"})
    if not op:
        return None
    x, args, keywords = op[1], op[2], op[3]
    m = args[0] if args else next((k.value for k in keywords if k.arg == "mask"), None)
    if m is not None and len(args) + len(keywords) == 1 and facts.same_shape(x, m) \
            and facts.mask(m):
        return ast.Subscript(x, m, ast.Load())
    return None


# Host reads.

def _host_read(node, facts):
    """(int/float/bool, t) of `int(t)` with t a tensor."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("int", "float", "bool") and len(node.args) == 1
            and not node.keywords and facts.tensor(node.args[0])):
        return node.func.id, node.args[0]
    return None


@expression_rule("host-read-item")
def _(node, facts):
    """`int(t)` (float, bool alike) as `int(t.item())`."""
    r = _host_read(node, facts)
    return r and call(name(r[0]), method(r[1], "item"))


@expression_rule("item-host-read")
def _(node, facts):
    """`t.item()` as `int(t)` (integral t) or `float(t)` (floating t)."""
    if method_call(node, facts, {"item"}) and not node.args:
        t = node.func.value
        cast = "int" if facts.integral(t) else "float" if facts.floating(t) else None
        return cast and call(name(cast), t)
    return None


# Sizes.

@expression_rule("numel-size")
def _(node, facts):
    """`t.numel()` of a 1-D t as `t.size(0)`."""
    if method_call(node, facts, {"numel"}) and not node.args \
            and facts.tensor(node.func.value, ndim=1):
        return method(node.func.value, "size", const(0))
    return None


@expression_rule("numel-len")
def _(node, facts):
    """`t.numel()` of a 1-D t as `len(t)`."""
    if method_call(node, facts, {"numel"}) and not node.args \
            and facts.tensor(node.func.value, ndim=1):
        return call(name("len"), node.func.value)
    return None


def _shape_index(node, facts):
    """(t, k) of `t.shape[k]` with k an int."""
    if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
            and isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
            and facts.tensor(node.value.value) and int_constant(node.slice) is not None):
        return node.value.value, node.slice
    return None


@expression_rule("shape-size")
def _(node, facts):
    """`t.shape[k]` as `t.size(k)`."""
    s = _shape_index(node, facts)
    return s and method(s[0], "size", s[1])


@expression_rule("size-shape")
def _(node, facts):
    """`t.size(k)` as `t.shape[k]`."""
    if method_call(node, facts, {"size"}) and len(node.args) == 1 and not node.keywords \
            and int_constant(node.args[0]) is not None:
        return ast.Subscript(attr(node.func.value, "shape"), node.args[0], ast.Load())
    return None


@expression_rule("size-len")
def _(node, facts):
    """`t.shape[0]` and `t.size(0)` as `len(t)`."""
    s = _shape_index(node, facts)
    if s and int_constant(s[1]) == 0:
        return call(name("len"), s[0])
    if method_call(node, facts, {"size"}) and len(node.args) == 1 and not node.keywords \
            and int_constant(node.args[0]) == 0:
        return call(name("len"), node.func.value)
    return None


# Views and indexing.

@expression_rule("view-reshape")
def _(node, facts):
    """`t.view(...)` as `t.reshape(...)` (equal values; view only where
    the strides allow, which they did)."""
    if method_call(node, facts, {"view"}) and node.args and not node.keywords:
        return method(node.func.value, "reshape", *node.args)
    return None


@expression_rule("view-flatten")
def _(node, facts):
    """`t.view(-1)` as `t.flatten()`."""
    if method_call(node, facts, {"view"}) and len(node.args) == 1 and not node.keywords \
            and int_constant(node.args[0]) == -1 and not facts.tensor(node.func.value, ndim=0):
        return method(node.func.value, "flatten")
    return None


@expression_rule("unsqueeze-none")
def _(node, facts):
    """`t.unsqueeze(1)` (or -1) of a 1-D t as `t[:, None]`."""
    if method_call(node, facts, {"unsqueeze"}) and len(node.args) == 1 \
            and int_constant(node.args[0], {1, -1}) is not None \
            and facts.tensor(node.func.value, ndim=1):
        return ast.Subscript(node.func.value,
                             ast.Tuple([full_slice(), const(None)], ast.Load()), ast.Load())
    return None


@expression_rule("none-unsqueeze")
def _(node, facts):
    """`t[:, None]` of a 1-D t as `t.unsqueeze(1)`."""
    if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2
            and ast.dump(node.slice.elts[0]) == ast.dump(full_slice())
            and isinstance(node.slice.elts[1], ast.Constant) and node.slice.elts[1].value is None
            and facts.tensor(node.value, ndim=1)):
        return method(node.value, "unsqueeze", const(1))
    return None


@expression_rule("index-select-int")
def _(node, facts):
    """`t[k]` and `t[:, k]` (k an int) as `t.select(0, k)`, `t.select(1, k)`."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
            and facts.tensor(node.value) and not facts.tensor(node.value, ndim=0)):
        return None
    if int_constant(node.slice) is not None:
        return method(node.value, "select", const(0), node.slice)
    if (isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2
            and ast.dump(node.slice.elts[0]) == ast.dump(full_slice())
            and int_constant(node.slice.elts[1]) is not None):
        return method(node.value, "select", const(1), node.slice.elts[1])
    return None


@expression_rule("index-split")
def _(node, facts):
    """`t[a:b, c]` as `t[a:b][:, c]`, `t[k, c]` as `t[k][c]` (k an int)."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
            and facts.tensor(node.value) and isinstance(node.slice, ast.Tuple)
            and len(node.slice.elts) == 2):
        return None
    first, second = node.slice.elts
    if isinstance(first, ast.Slice) and ast.dump(first) != ast.dump(full_slice()):
        rest = ast.Tuple([full_slice(), second], ast.Load())
    elif int_constant(first) is not None:
        rest = second
    else:
        return None
    return ast.Subscript(ast.Subscript(node.value, first, ast.Load()), rest, ast.Load())


# Results of max, sort, topk.

def _indexed_result(node, facts):
    """(call, k) of `x.sort(...)[k]` (max, min, topk alike) with k 0 or 1."""
    if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
            and int_constant(node.slice, {0, 1}) is not None
            and facts.kind(node.value, "namedtuple")):
        return node.value, int_constant(node.slice)
    return None


@expression_rule("result-fields")
def _(node, facts):
    """`x.sort()[0]` as `x.sort().values`, `[1]` as `.indices`."""
    r = _indexed_result(node, facts)
    return r and attr(r[0], ("values", "indices")[r[1]])


def _max_over_dim(node, facts):
    """(x, dim) of `x.max(d)`, `x.max(dim=d)` or `torch.max(x, d)`."""
    op = tensor_op(node, facts, {"max"})
    if not op or not facts.kind(node, "namedtuple"):
        return None
    dims = list(op[2]) + [k.value for k in op[3] if k.arg == "dim"]
    if len(dims) == 1 and len(op[2]) + len(op[3]) == 1:
        return op[1], dims[0]
    return None


@expression_rule("max-amax")
def _(node, facts):
    """`x.max(dim=d)[0]` as `x.amax(d)`."""
    r = _indexed_result(node, facts)
    xd = r and r[1] == 0 and _max_over_dim(r[0], facts)
    return xd and method(xd[0], "amax", xd[1]) or None


@body_rule("max-unpacked-amax")
def _(tree, facts):
    """`v, _ = x.max(dim=d)` as `v = x.amax(d)`."""
    sites = 0
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Tuple) and len(stmt.targets[0].elts) == 2
                and isinstance(stmt.targets[0].elts[1], ast.Name)
                and stmt.targets[0].elts[1].id == "_"):
            xd = _max_over_dim(stmt.value, facts)
            if xd:
                stmt.targets = [stmt.targets[0].elts[0]]
                stmt.value = method(xd[0], "amax", xd[1])
                sites += 1
    return sites


# Methods and functions: `x.f(...)` and `torch.f(x, ...)` for ops that are both.

REDUCTIONS = {"sum", "mean", "std", "max", "amax", "argmax", "any", "numel", "count_nonzero"}
ELEMENTWISE = {"abs", "sqrt", "sigmoid", "clamp", "clamp_min", "isnan", "neg", "relu",
               "logical_not", "logical_and", "softmax", "log_softmax"}
INDEXING = {"index_select", "gather", "masked_select", "nonzero", "topk", "sort", "cumsum",
            "bincount", "unsqueeze", "squeeze", "flatten", "clone"}


def _as_function(ops):
    def rule(node, facts):
        f = method_call(node, facts, ops)
        return f and torch_call(f, node.func.value, *node.args,
                                **{k.arg: k.value for k in node.keywords})
    rule.__doc__ = f"`x.f(...)` as `torch.f(x, ...)` for f in {sorted(ops)}."
    return rule


def _as_method(ops):
    def rule(node, facts):
        f = namespace_call(node, "torch", ops)
        if f and node.args and facts.tensor(node.args[0]):
            return method(node.args[0], f, *node.args[1:],
                          **{k.arg: k.value for k in node.keywords})
        return None
    rule.__doc__ = f"`torch.f(x, ...)` as `x.f(...)` for f in {sorted(ops)}."
    return rule


for _family, _ops in (("reductions", REDUCTIONS), ("elementwise", ELEMENTWISE),
                      ("indexing", INDEXING)):
    expression_rule(f"{_family}-as-functions")(_as_function(_ops))
    expression_rule(f"{_family}-as-methods")(_as_method(_ops))

FUNCTIONAL = {"log_softmax", "softmax", "relu"}


@expression_rule("functional-as-torch")
def _(node, facts):
    """`F.log_softmax(x, ...)` (softmax, relu alike) as `torch.log_softmax(x, ...)`."""
    f = namespace_call(node, "F", FUNCTIONAL)
    if f and node.args and facts.tensor(node.args[0]):
        return ast.Call(attr(name("torch"), f), node.args, node.keywords)
    return None


@expression_rule("torch-as-functional")
def _(node, facts):
    """`torch.log_softmax(x, ...)` (softmax, relu alike) as `F.log_softmax(x, ...)`."""
    f = namespace_call(node, "torch", FUNCTIONAL)
    if f and node.args and facts.tensor(node.args[0]):
        return ast.Call(attr(name("F"), f), node.args, node.keywords)
    return None


@expression_rule("cross-entropy-expanded")
def _(node, facts):
    """`F.cross_entropy(x, t)` of 2-D x and class indices t as
    `F.nll_loss(F.log_softmax(x, 1), t)` (what ATen computes; reduction kept)."""
    if (namespace_call(node, "F", {"cross_entropy"}) and len(node.args) == 2
            and all(k.arg == "reduction" for k in node.keywords)
            and facts.tensor(node.args[0], ndim=2) and facts.integral(node.args[1])):
        return ast.Call(attr(name("F"), "nll_loss"),
                        [call(attr(name("F"), "log_softmax"), node.args[0], const(1)),
                         node.args[1]], node.keywords)
    return None


# Arithmetic.

ARITHMETIC = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div"}


def _arithmetic(node, facts):
    if (isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC
            and facts.tensor(node.left) and facts.tensor(node)):
        return ARITHMETIC[type(node.op)], node.left, node.right
    return None


@expression_rule("arithmetic-functions")
def _(node, facts):
    """`a - b` (a tensor; +, *, / alike) as `torch.sub(a, b)`."""
    a = _arithmetic(node, facts)
    return a and torch_call(*a)


@expression_rule("arithmetic-methods")
def _(node, facts):
    """`a - b` (a tensor; +, *, / alike) as `a.sub(b)`."""
    a = _arithmetic(node, facts)
    return a and method(a[1], a[0], a[2])


@expression_rule("neg-method")
def _(node, facts):
    """`-t` as `t.neg()`."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
            and facts.tensor(node.operand):
        return method(node.operand, "neg")
    return None


@expression_rule("abs-builtin")
def _(node, facts):
    """`t.abs()` and `torch.abs(t)` as `abs(t)`."""
    op = tensor_op(node, facts, {"abs"})
    return op and not op[2] and not op[3] and call(name("abs"), op[1]) or None


CASTS = {"float": "float32", "double": "float64", "half": "float16", "long": "int64",
         "int": "int32", "bool": "bool"}


@expression_rule("cast-to")
def _(node, facts):
    """`t.float()` as `t.to(torch.float32)` (long, bool, ... alike)."""
    f = method_call(node, facts, CASTS)
    return f and not node.args and method(node.func.value, "to",
                                           attr(name("torch"), CASTS[f])) or None


@expression_rule("cast-to-dtype")
def _(node, facts):
    """`t.float()` as `t.to(dtype=torch.float)` (long, bool, ... alike)."""
    f = method_call(node, facts, CASTS)
    return f and not node.args and method(node.func.value, "to",
                                           dtype=attr(name("torch"), f)) or None


@expression_rule("zeros-like-new-zeros")
def _(node, facts):
    """`torch.zeros_like(x)` as `x.new_zeros(x.shape)`."""
    if namespace_call(node, "torch", {"zeros_like"}) and len(node.args) == 1 \
            and not node.keywords and isinstance(node.args[0], ast.Name) \
            and facts.tensor(node.args[0]):
        return method(node.args[0], "new_zeros", attr(dup(node.args[0]), "shape"))
    return None


@expression_rule("new-full-full")
def _(node, facts):
    """`x.new_full(size, v)` as `torch.full(size, v, dtype=x.dtype, device=x.device)`."""
    if method_call(node, facts, {"new_full"}) and len(node.args) == 2 and not node.keywords \
            and isinstance(node.func.value, ast.Name):
        x = node.func.value
        return torch_call("full", *node.args, dtype=attr(x, "dtype"),
                          device=attr(dup(x), "device"))
    return None


@expression_rule("clamp-min")
def _(node, facts):
    """`x.clamp(min=v)` and `torch.clamp(x, min=v)` as `x.clamp_min(v)`."""
    op = tensor_op(node, facts, {"clamp"})
    if op and not op[2] and len(op[3]) == 1 and op[3][0].arg == "min":
        return method(op[1], "clamp_min", op[3][0].value)
    return None


# Statements.

@body_rule("conditional-as-if")
def _(tree, facts):
    """`return a if c else b` as `if c: return a` then `return b`."""
    sites = 0
    for i, stmt in enumerate(tree.body):
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.IfExp):
            e = stmt.value
            tree.body[i:i + 1] = [ast.If(e.test, [ast.Return(e.body)], []), ast.Return(e.orelse)]
            sites += 1
    return sites


@body_rule("if-as-conditional")
def _(tree, facts):
    """`if c: return a` then `return b` (the last statements) as
    `return a if c else b`."""
    body = tree.body
    if (len(body) >= 2 and isinstance(body[-1], ast.Return) and isinstance(body[-2], ast.If)
            and not body[-2].orelse and len(body[-2].body) == 1
            and isinstance(body[-2].body[0], ast.Return)):
        test, value = body[-2].test, body[-2].body[0].value
        body[-2:] = [ast.Return(ast.IfExp(test, value, body[-1].value))]
        return 1
    return 0


@body_rule("split-tuple-assign")
def _(tree, facts):
    """`a, b = x, y` as `a = x` then `b = y` (y not reading a)."""
    sites, body = 0, []
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Tuple) and isinstance(stmt.value, ast.Tuple)
                and len(stmt.targets[0].elts) == len(stmt.value.elts)
                and all(isinstance(t, ast.Name) for t in stmt.targets[0].elts)):
            targets = [t.id for t in stmt.targets[0].elts]
            if all(not free_names(v) & set(targets[:i]) for i, v in enumerate(stmt.value.elts)):
                body += [ast.Assign([t], v) for t, v in zip(stmt.targets[0].elts, stmt.value.elts)]
                sites += 1
                continue
        body.append(stmt)
    tree.body = body
    return sites


def _bound(stmt):
    """Names a statement binds or mutates (x[...] = writes x)."""
    names = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            names |= free_names(node.value)
        elif isinstance(node, ast.AugAssign):
            names |= free_names(node.target)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr.endswith("_")):  # an in-place op: x.add_(...)
            names |= free_names(node.func.value)
    return names


MASK_EXPRESSIONS = (ast.Compare, ast.BinOp, ast.UnaryOp, ast.Call)


@body_rule("inline-masks")
def _(tree, facts):
    """`m = <mask expression>` then uses of m as the expression at each use
    (all uses in later statements outside loops, nothing the expression reads
    rebound or written in between)."""
    sites, i = 0, 0
    body = tree.body
    while i < len(body):
        stmt = body[i]
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, MASK_EXPRESSIONS) and facts.mask(stmt.value)):
            m, reads = stmt.targets[0].id, free_names(stmt.value)
            later = body[i + 1:]
            uses = [j for j, s in enumerate(later) if m in free_names(s)]
            rebinds = [j for j, s in enumerate(later) if (reads | {m}) & _bound(s)]
            loops = any(isinstance(n, (ast.For, ast.While)) and m in free_names(n)
                        for s in later for n in ast.walk(s))
            if uses and not loops and (not rebinds or min(rebinds) >= max(uses)) \
                    and not any(m in _bound(later[j]) for j in uses):
                value = stmt.value

                class Inline(ast.NodeTransformer):
                    def visit_Name(self, node):
                        return dup(value) if node.id == m and isinstance(node.ctx, ast.Load) \
                            else node
                for j in uses:
                    later[j] = Inline().visit(later[j])
                body[i:] = later
                sites += 1
                continue
        i += 1
    return sites


@body_rule("name-masks")
def _(tree, facts):
    """`x[<mask expression>]` in a statement as `mask = <expression>` before
    it and `x[mask]` (equal expressions of one statement share the name)."""
    sites, body = 0, []
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for stmt in tree.body:
        hoisted = {}
        if isinstance(stmt, (ast.Assign, ast.Return, ast.Expr)):
            for node in ast.walk(stmt):
                if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
                        and isinstance(node.slice, MASK_EXPRESSIONS) and facts.mask(node.slice)):
                    key = ast.dump(node.slice)
                    if key not in hoisted:
                        n = next(f"mask{k}" for k in itertools.count() if f"mask{k}" not in taken)
                        taken.add(n)
                        hoisted[key] = (n, node.slice)
                    node.slice = name(hoisted[key][0])
        body += [ast.Assign([ast.Name(n, ast.Store())], e) for n, e in hoisted.values()]
        body.append(stmt)
        sites += len(hoisted)
    tree.body = body
    return sites


# --- variants ------------------------------------------------------------------------------

def render(tree):
    return ast.unparse(ast.fix_missing_locations(tree))


def apply(tree, facts, rules):
    """tree with rules applied in order, and whether each rewrote something."""
    tree = copy.deepcopy(tree)
    return tree, all([RULES[r](tree, facts) > 0 for r in rules])


def variants(idiom):
    """The spelling variants of an idiom (an entry of idioms.IDIOMS): each
    rule that applies, then pairs of them while there are fewer than
    MIN_VARIANTS, each a source unlike the others'."""
    name, _, module, inputs = idiom
    tree = parse_forward(type(module))
    facts = learn(tree, module, inputs)
    seen = {render(tree)}
    found = []

    def add(rules):
        new, applied = apply(tree, facts, rules)
        source = render(new)
        if applied and source not in seen:
            seen.add(source)
            found.append(Variant(name, "+".join(rules), source))

    for rule in RULES:
        add([rule])
    singles = [v.rules for v in found]
    for pair in itertools.combinations(singles, 2):
        if len(found) >= MIN_VARIANTS:
            break
        add(list(pair))
    return found


def all_variants():
    return [v for idiom in idioms.IDIOMS for v in variants(idiom)]


def module_name(variant):
    return "spelling_" + "_".join(
        "".join(c if c.isalnum() else "_" for c in part)
        for part in (variant.idiom, variant.rules))


def materialize(variant, directory):
    """The variant as a module instance: its class (a subclass of the
    idiom's, the forward replaced) written to a file under directory and
    imported, so that TorchScript can read its source; the instance a copy of
    the idiom's (its parameters too)."""
    original = next(i[2] for i in idioms.IDIOMS if i[0] == variant.idiom)
    cls = type(original).__name__
    mod = module_name(variant)
    path = pathlib.Path(directory) / f"{mod}.py"
    path.write_text(
        f'"""{variant.idiom} spelled with {variant.rules} (spellings.py)."""\n'
        "from idioms import *  # noqa: F401,F403 - the names the forward uses\n"
        "import idioms\n\n\n"
        f"class {cls}(idioms.{cls}):\n" + textwrap.indent(variant.source, "    ") + "\n")
    spec = importlib.util.spec_from_file_location(mod, path)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[mod] = loaded
    spec.loader.exec_module(loaded)
    instance = copy.deepcopy(original)
    instance.__class__ = getattr(loaded, cls)
    return instance


# --- the command line --------------------------------------------------------------------------

def _check(found, directory):
    """Scripts each variant, compares its outputs with the original's (as
    Python and scripted). Returns the failures."""
    from test_rewrites import compare_outputs
    failures = []
    for v in found:
        _, _, original, inputs = next(i for i in idioms.IDIOMS if i[0] == v.idiom)
        try:
            variant = materialize(v, directory)
            compare_outputs(original, variant, inputs, 12, v.idiom)
            compare_outputs(torch.jit.script(original), torch.jit.script(variant),
                            inputs, 12, v.idiom)
        except Exception as e:  # noqa: BLE001 - reported
            failures.append((v, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                             if str(e) else type(e).__name__))
    return failures


def compare(found, binary, directory, verbose=True):
    """Variants whose (before, after) sync points differ from the
    original's, with the reasons of the sync points each keeps: a list of
    (variant, twin's, variant's, the variant's kept reasons)."""
    divergent = []
    import json
    import subprocess
    from conftest import sync_points

    def run(module, stem):
        path = pathlib.Path(directory) / f"{stem}.pt"
        torch.jit.script(module).save(str(path))
        report = pathlib.Path(directory) / f"{stem}.json"
        subprocess.run([binary, str(path), "--report-json", str(report)], check=True,
                       capture_output=True)
        data = json.loads(report.read_text())
        kept = [f"{f['op']}: {f.get('reason') or ''}".strip()
                for f in data["methods"][0]["findings"]
                if f["role"] == "root" and f["action"] in ("kept", "introduced")]
        return sync_points(data), kept

    twins = {}
    for v in found:
        if v.idiom not in twins:
            twins[v.idiom] = run(next(i[2] for i in idioms.IDIOMS if i[0] == v.idiom), v.idiom)
        (twin, twin_kept), (mine, kept) = twins[v.idiom], run(materialize(v, directory),
                                                               module_name(v))
        if twin != mine:
            extra = sorted(set(kept) - set(twin_kept)) or kept
            divergent.append((v, twin, mine, extra))
            if verbose:
                print(f"{v.idiom} [{v.rules}]: twin {twin}, variant {mine}")
                for line in extra:
                    print(f"    kept: {line}")
    return divergent


def main():
    import argparse
    import tempfile
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--compare", metavar="BIN")
    args = parser.parse_args()
    found = all_variants()
    by_idiom = collections.Counter(v.idiom for v in found)
    for name, _, _, _ in idioms.IDIOMS:
        print(f"{name}: {by_idiom[name]}: "
              + ", ".join(v.rules for v in found if v.idiom == name))
    print(f"{len(found)} variants of {len(by_idiom)} idioms, "
          f"fewest {min(by_idiom.values())}; rules used: "
          f"{len({r for v in found for r in v.rules.split('+')})} of {len(RULES)}")
    with tempfile.TemporaryDirectory() as directory:
        if args.check:
            failures = _check(found, directory)
            for v, why in failures:
                print(f"FAILED {v.idiom} [{v.rules}]: {why}")
            print(f"checked {len(found)}: {len(failures)} failed")
        if args.compare:
            compare(found, args.compare, directory)


if __name__ == "__main__":
    main()
