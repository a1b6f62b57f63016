//===- Signature.cpp - Tensor signatures of a method's inputs ------------===//
#include "passes/Signature.h"

#include <ATen/ATen.h>

#include <cctype>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace staticify {

using c10::ScalarType;

namespace {
const std::pair<const char *, ScalarType> kDtypes[] = {
    {"f16", ScalarType::Half},  {"bf16", ScalarType::BFloat16},
    {"f32", ScalarType::Float}, {"f64", ScalarType::Double},
    {"i8", ScalarType::Char},   {"i16", ScalarType::Short},
    {"i32", ScalarType::Int},   {"i64", ScalarType::Long},
    {"b8", ScalarType::Bool}};
} // namespace

std::string dtypeName(ScalarType dtype) {
  for (const auto &[name, t] : kDtypes)
    if (t == dtype)
      return name;
  return "";
}

std::vector<TensorSignature> parseSignature(const std::string &text) {
  std::vector<TensorSignature> out;
  size_t pos = 0;
  auto skipSpaces = [&] {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t'))
      ++pos;
  };
  auto fail = [&](const std::string &what) -> std::invalid_argument {
    return std::invalid_argument("input types '" + text + "': " + what +
                                 " at character " + std::to_string(pos + 1) +
                                 " (expected e.g. 'f32[?], i64[?,4]')");
  };
  while (true) {
    skipSpaces();
    size_t start = pos;
    while (pos < text.size() &&
           std::isalnum(static_cast<unsigned char>(text[pos])))
      ++pos;
    std::string name = text.substr(start, pos - start);
    bool list = name == "list";
    if (list) {
      if (pos >= text.size() || text[pos] != '[')
        throw fail("'[' expected after list");
      start = ++pos;
      while (pos < text.size() &&
             std::isalnum(static_cast<unsigned char>(text[pos])))
        ++pos;
      name = text.substr(start, pos - start);
    }
    std::optional<ScalarType> dtype;
    for (const auto &[n, t] : kDtypes)
      if (name == n)
        dtype = t;
    if (!dtype)
      throw fail("unknown dtype '" + name +
                 "' (f16 bf16 f32 f64 i8 i16 i32 i64 b8)");
    if (pos >= text.size() || text[pos] != '[')
      throw fail("'[' expected");
    ++pos;
    TensorSignature sig{*dtype, {}};
    skipSpaces();
    while (pos < text.size() && text[pos] != ']') {
      skipSpaces();
      if (text[pos] == '?') {
        sig.sizes.push_back(-1);
        ++pos;
      } else {
        size_t digits = pos;
        while (pos < text.size() &&
               std::isdigit(static_cast<unsigned char>(text[pos])))
          ++pos;
        if (digits == pos || pos - digits > 12)
          throw fail("a size ('?' or a number) expected");
        sig.sizes.push_back(std::stoll(text.substr(digits, pos - digits)));
      }
      skipSpaces();
      if (pos < text.size() && text[pos] == ',')
        ++pos;
      else if (pos >= text.size() || text[pos] != ']')
        throw fail("',' or ']' expected");
    }
    if (pos >= text.size())
      throw fail("']' expected");
    ++pos;
    if (sig.sizes.size() > 8)
      throw fail("rank over 8");
    if (list) {
      if (pos >= text.size() || text[pos] != ']')
        throw fail("']' expected to close list[");
      ++pos;
      sig.list = true;
    }
    out.push_back(std::move(sig));
    skipSpaces();
    if (pos == text.size())
      return out;
    if (text[pos] != ',')
      throw fail("',' expected between inputs");
    ++pos;
  }
}

std::string formatSignature(const std::vector<TensorSignature> &signature) {
  std::ostringstream s;
  for (size_t i = 0; i < signature.size(); ++i) {
    s << (i ? ", " : "") << (signature[i].list ? "list[" : "")
      << dtypeName(signature[i].dtype) << "[";
    for (size_t d = 0; d < signature[i].sizes.size(); ++d) {
      int64_t n = signature[i].sizes[d];
      s << (d ? "," : "");
      if (n < 0)
        s << "?";
      else
        s << n;
    }
    s << (signature[i].list ? "]]" : "]");
  }
  return s.str();
}

std::vector<c10::IValue>
exampleInputs(const std::vector<TensorSignature> &signature,
              int64_t dynamic) {
  std::vector<c10::IValue> out;
  for (const TensorSignature &s : signature) {
    std::vector<int64_t> sizes;
    for (int64_t d : s.sizes)
      sizes.push_back(d < 0 ? dynamic : d);
    auto options = at::TensorOptions().dtype(s.dtype);
    at::Tensor t = c10::isFloatingType(s.dtype) ? at::randn(sizes, options)
                   : s.dtype == c10::ScalarType::Bool
                       ? at::rand(sizes) < 0.5
                       : at::zeros(sizes, options);
    if (s.list) // a list of one
      out.emplace_back(c10::List<at::Tensor>({t}));
    else
      out.emplace_back(t);
  }
  return out;
}

} // namespace staticify
