//===- DictRecords.h - Dicts whose keys the graph fixes, as their entries -===//
//
// A dict built in the graph and only ever accessed at constant keys is a
// record: Segment Anything's MaskData (`for k, v in data.items(): out[k] =
// v[keep]`), post-processing that filters every entry of a result alike.
// TorchScript keeps it a dict, a container the analysis sees into only
// where it is built, so a selection stored in it is cut where it is
// stored. normalize makes each such dict its entries, as SSA values:
//
//   d = {"a": x}; d["b"] = y; z = d["a"]   ->  z = x
//   for k, v in d.items(): e[k] = f(v)    ->  e_a = f(x); e_b = f(y)
//                                               (the loop unrolled)
//   d = if c: filter(d) else: d           ->  one if result per entry
//   return d                              ->  return {"a": .., "b": ..},
//                                               built at the return
//
// `d.pop(k)` reads an entry and drops it, `d.update(e)` of a record e sets
// e's entries in order; `key in d` and `len(d)` become constants (an if on
// one is its branch), `d.keys()`, `d.values()` and `d.items()` lists built
// in place; a loop over such a list whose body never breaks is unrolled,
// one copy of the body per entry (up to a size limit), so that the keys it
// writes at are constants too.
//
// A family of dict values (a construct and the if results that may be it)
// is left as it is when any of these fails: every key is a constant str or
// int; every use reads, writes, pops or tests the dict at a constant key,
// takes its length, keys, values or items, updates it from a record (or
// another record from it), yields it from an if's branch, or returns it
// from the graph (alone or in the returned tuple); no loop carries it and
// no loop body writes it; the branches of an if leave it (and an if's dict
// result) with the same keys in the same order; a read or pop without a
// default names a key the dict holds there (a missing key raises); and a
// dict a branch yields from outside the if is made in the if's own block
// and not used after the if (a write through the result would be seen
// through it).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace staticify {

/// Rewrites every dict of \p graph that is a record (above) into its
/// entries; returns whether any was. Dead constructs are left for
/// dead-code elimination.
bool dictRecords(std::shared_ptr<torch::jit::Graph> &graph);

} // namespace staticify
