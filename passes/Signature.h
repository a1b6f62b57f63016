//===- Signature.h - Tensor signatures of a method's inputs -----*- C++ -*-===//
//
// `--input-types`: each input's dtype, rank and sizes (`?` dynamic), for
// the lowering (lower/) and the batch pass, and example inputs of one.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace staticify {

/// One input of a method: a tensor of a dtype and rank, with each
/// size fixed or dynamic (-1).
struct TensorSignature {
  c10::ScalarType dtype;
  std::vector<int64_t> sizes;
  /// A List[Tensor] input of such tensors (`list[f32[3,?,?]]`): no kernel
  /// takes one; a method with one is lowered by its regions.
  bool list = false;
  bool operator==(const TensorSignature &o) const {
    return dtype == o.dtype && sizes == o.sizes && list == o.list;
  }
};

/// Parses `f32[?], i64[?,4], b8[], list[f32[3,?,?]]` (dtype names: f16 bf16
/// f32 f64 i8 u8 i16 i32 i64 b8; `?` a dynamic size; `list[T]` a list of
/// tensors of type T). Throws std::invalid_argument naming
/// what is wrong.
std::vector<TensorSignature> parseSignature(const std::string &text);
std::string formatSignature(const std::vector<TensorSignature> &signature);

/// dtype's name in a signature (`f32`), or "" when it has none.
std::string dtypeName(c10::ScalarType dtype);

/// Inputs of \p signature for an example run: each `?` size \p dynamic;
/// floats normal, integers zero (an index in range of any size), bools
/// random; a list of one such tensor for `list[...]`.
std::vector<c10::IValue>
exampleInputs(const std::vector<TensorSignature> &signature,
              int64_t dynamic = 8);

} // namespace staticify
