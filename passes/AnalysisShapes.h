//===- AnalysisShapes.h - Shape and list-length transfer functions --------===//
//
// Used by the dynamism analysis (Analysis.cpp) once a node's inputs are
// solved; \p facts holds their ValueInfo.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Analysis.h"
#include "passes/OpCatalogue.h"

namespace staticify {

/// Whether \p out, a list result of \p node (or a tuple, optional or union
/// that may hold one), has a length that depends on data.
bool listLengthFromData(const AnalysisResult &facts,
                        const torch::jit::Node *node,
                        const torch::jit::Value *out);

/// The shape dependence of a tensor result of \p node, an op with
/// data-dependent inputs of role \p role; \p dataShapeArg: a size argument
/// depends on data.
ShapeDep resultShape(const AnalysisResult &facts, const torch::jit::Node *node,
                     OpRole role, bool dataShapeArg);

} // namespace staticify
