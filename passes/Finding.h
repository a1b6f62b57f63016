//===- Finding.h - What the dynamism analysis reports
//----------------------===//
//
// A Finding is one node whose result is data-dependent (DESIGN §1). This header
// is deliberately free of libtorch so that report rendering and its unit tests
// build in seconds.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace staticify {

/// Why a value is data-dependent. The spelling of each category is part of the
/// report format (docs/report-format.md): never rename one.
enum class Category {
  /// A tensor whose shape depends on tensor data (`nonzero`, `x[mask]`...).
  DynamicShape,
  /// A host scalar read from the device (`item`, `int(t)`, `numel()` of a
  /// data-dependent-shape tensor...): a host-device synchronization.
  HostSync,
  /// A `prim::If` / `prim::Loop` whose condition or trip count comes from data.
  ControlFlow,
  /// Host arithmetic, comparisons and `min`/`max` on data-derived scalars.
  DataDerived,
};
inline constexpr Category kAllCategories[] = {
    Category::DynamicShape, Category::HostSync, Category::ControlFlow,
    Category::DataDerived};
inline constexpr size_t kNumCategories = std::size(kAllCategories);

std::string_view categoryName(Category c);

/// A root introduces data-dependence by itself; a derived finding inherits it.
enum class Role { Root, Derived };
std::string_view roleName(Role r);

/// A place in the original program: the Python source TorchScript recorded, or
/// the line of a textual IR file.
struct Location {
  std::string file;
  size_t line = 0;   // 1-based
  size_t column = 0; // 1-based
  size_t length = 1; // columns to underline on `sourceLine`
  std::string sourceLine;
};

struct Finding {
  size_t id = 0;
  Category category = Category::DynamicShape;
  Role role = Role::Root;
  std::string op;      // "aten::where"
  std::string value;   // "%positive.1", or "" for a node without outputs
  std::string message; // "shape depends on data: indices of true elements"
  std::optional<Location> location;
  std::string nodeText; // the node as TorchScript IR, for findings without a
                        // location
  std::vector<size_t> causes; // ids of the roots a derived finding comes from
  /// What staticify did about it: "kept" until a rewrite pass claims it,
  /// "rewritten" after, "introduced" for what a rewrite left behind.
  std::string action = "kept";
  std::string rule; // the pass that rewrote it, when action is "rewritten"
  /// Why a rewrite left it alone ("masked-reduce: ..."), when one looked.
  std::string reason;
};

/// Counts of findings per category.
struct CategoryCounts {
  size_t counts[kNumCategories] = {};
  size_t &operator[](Category c) { return counts[static_cast<size_t>(c)]; }
  size_t operator[](Category c) const { return counts[static_cast<size_t>(c)]; }
  size_t total() const;
};
CategoryCounts countByCategory(const std::vector<Finding> &findings);

} // namespace staticify
