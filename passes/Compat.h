//===- Compat.h - The few libtorch 1.x / 2.x API differences --------------===//
//
// staticify builds against Debian's libtorch 1.13 and against the libtorch of a
// PyTorch 2.x wheel. Every API difference between the two is bridged here and
// nowhere else.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/frontend/source_range.h>
#include <torch/version.h>

#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace staticify::compat {

/// (file, 1-based line, 0-based column) of \p range, when it has a file name.
inline std::optional<std::tuple<std::string, size_t, size_t>>
fileLineCol(const torch::jit::SourceRange &range) {
  auto flc = range.file_line_col();
  if (!flc)
    return std::nullopt;
  return std::make_tuple(std::get<0>(*flc), std::get<1>(*flc),
                         std::get<2>(*flc));
}

/// A StringCordView (1.13's get_line; it has str()) or a string view.
template <typename Text> std::string toString(const Text &text) {
  if constexpr (std::is_convertible_v<Text, std::string_view>) {
    std::string_view view = text;
    return std::string(view);
  } else {
    return text.str();
  }
}

/// The text of the source line (0-based, within its Source) as a std::string,
/// without its trailing newline.
inline std::string sourceLine(const torch::jit::Source &source, size_t line) {
  std::string text = toString(source.get_line(line));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  return text;
}

inline constexpr int kTorchMajor = TORCH_VERSION_MAJOR;
inline constexpr int kTorchMinor = TORCH_VERSION_MINOR;

} // namespace staticify::compat
