//===- Report.h - The analysis report, as diagnostics and as JSON
//----------===//
//
// The text form reads like a compiler's diagnostics; the JSON form follows the
// versioned schema of docs/report-format.md. Free of libtorch.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Finding.h"

#include <string>
#include <vector>

namespace staticify {

/// Bump when a field changes meaning or disappears; adding fields is fine.
inline constexpr int kReportSchemaVersion = 1;

/// One part of a graph's partition (DESIGN §2, partition): a maximal run of
/// static nodes in program order, or a connected group of data-dependent
/// nodes.
struct Segment {
  enum class Kind { StaticRegion, DynamicIsland } kind = Kind::StaticRegion;
  size_t number = 0;   // 1-based, per kind, in program order
  size_t numNodes = 0; // constants not counted; nested blocks counted
  std::string file;    // the source span, when known
  size_t firstLine = 0, lastLine = 0;
  std::vector<std::string> ops; // an island's data-dependent ops, in order
  /// An island whose data-dependent nodes are all in guards' fallbacks:
  /// they run only where the host facts a guard checks fail.
  bool guardedOnly = false;
};

/// The state of one method's graph at one point of the pipeline.
struct GraphSummary {
  size_t numNodes = 0;
  CategoryCounts counts;
  /// Where the host waits for the device: one per root finding (what
  /// derives from a root does not wait again); what the policy weighs.
  size_t syncPoints = 0;
  bool outputsStatic = false; // every output has a host-static shape
  /// Host reads in guards' fallback branches (taken only when the host
  /// facts a guard checks do not hold): not findings, not sync points.
  size_t fallbackSyncPoints = 0;
  /// Host reads in branches that only raise (run only on the way to an
  /// exception): not findings, not sync points.
  size_t errorPathSyncPoints = 0;
  /// The ops one call runs (constants and list/tuple plumbing not counted,
  /// a loop's body once, a guard's fallback not at all): a proxy for kernel
  /// launches and interpreter steps, which the policy weighs at equal sync
  /// points.
  size_t opsPerCall = 0;
  std::vector<Segment> partition;
  bool isStatic() const { return counts.total() == 0; }
};

struct MethodReport {
  std::string name;
  bool inlined = true;
  std::vector<std::string> passes; // the pipeline that ran, in order
  std::vector<Finding> findings;   // found in the input, with their actions
  GraphSummary before;
  GraphSummary after;
  /// With --lower: the target ("cpu"), whether the method became a kernel,
  /// and why not (the op that stopped the bridge and its line).
  struct Lowering {
    std::string target; // empty: not asked
    bool lowered = false;
    std::string reason;
    std::string signature;
    size_t kernelBytes = 0;
    /// With cuda among the targets.
    bool cudaLowered = false;
    std::string cudaReason;
    size_t cudaKernels = 0;
    std::vector<std::pair<std::string, size_t>> cudaImages; // name, bytes
    /// Where the method did not lower whole: its static regions', each
    /// lowered on its own (lower/LowerRegions.h), or why none was tried.
    struct Region {
      size_t number = 0; // Segment::number
      std::string method; // the region's method, when it lowered
      bool lowered = false;
      std::string reason;
      size_t kernelBytes = 0;
    };
    std::vector<Region> regions;
    std::string regionsReason;
  } lowering;
  /// With --batch: the batched method added, or why none was.
  struct Batch {
    bool asked = false;
    std::string method;
    std::string reason;
  } batch;
  /// Optional arguments treated as None (--assume-none, or --inference's
  /// arguments that default to None).
  std::vector<std::string> assumedNone;
  /// Command-line flags that would remove what is left, each with why
  /// ("--padded-outputs: 2 bounded outputs are cut at the return").
  std::vector<std::string> hints;
};

struct Report {
  std::string toolVersion;
  std::string torchVersion;
  std::string input;
  std::string output; // empty when only analysing
  std::vector<MethodReport> methods;
};

/// How much of the findings the text report shows.
enum class ReportDetail {
  /// What is left after rewriting (the root causes kept or introduced, with
  /// why), then the summary: `staticify --report`.
  Short,
  /// Every finding, rewritten ones too: `--report=full`, staticify-opt.
  Full,
};

/// Clang-style diagnostics for the findings \p detail selects, then a
/// summary per method.
std::string renderText(const Report &report,
                       ReportDetail detail = ReportDetail::Full);
/// The JSON document of docs/report-format.md.
std::string renderJson(const Report &report);
/// One diagnostic: `file:line:col: warning: message [category]`, the source
/// line, a caret. Derived findings add a note naming their root causes.
std::string renderFinding(const Finding &finding,
                          const std::vector<Finding> &all);

} // namespace staticify
