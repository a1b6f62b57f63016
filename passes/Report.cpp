//===- Report.cpp - Rendering the analysis report -------------------------===//

#include "passes/Report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace staticify {

std::string_view categoryName(Category c) {
  switch (c) {
  case Category::DynamicShape:
    return "dynamic-shape";
  case Category::HostSync:
    return "host-sync";
  case Category::ControlFlow:
    return "control-flow";
  case Category::DataDerived:
    return "data-derived";
  }
  return "unknown";
}

std::string_view roleName(Role r) {
  return r == Role::Root ? "root" : "derived";
}

size_t CategoryCounts::total() const {
  size_t sum = 0;
  for (size_t c : counts)
    sum += c;
  return sum;
}

CategoryCounts countByCategory(const std::vector<Finding> &findings) {
  CategoryCounts counts;
  for (const Finding &f : findings)
    ++counts[f.category];
  return counts;
}

//===----------------------------------------------------------------------===//
// Text
//===----------------------------------------------------------------------===//

static std::string where(const Finding &f, const std::string &method) {
  if (!f.location)
    return "<" + method + ">";
  const Location &loc = *f.location;
  return loc.file + ":" + std::to_string(loc.line) + ":" +
         std::to_string(loc.column);
}

/// The source line, then a caret under the range (clang's `^~~~`).
static void renderSnippet(std::ostream &os, const Finding &f) {
  if (!f.location || f.location->sourceLine.empty()) {
    if (!f.nodeText.empty())
      os << "    " << f.nodeText << "\n";
    return;
  }
  const Location &loc = *f.location;
  os << loc.sourceLine << "\n";
  size_t col = loc.column > 0 ? loc.column - 1 : 0;
  size_t len = std::max<size_t>(1, loc.length);
  if (col + len > loc.sourceLine.size())
    len = loc.sourceLine.size() > col ? loc.sourceLine.size() - col : 1;
  // One pad character per character of the prefix (not per UTF-8 byte),
  // keeping tabs, so that the caret lines up under the source.
  auto isContinuation = [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
  };
  std::string pad;
  for (size_t i = 0; i < col && i < loc.sourceLine.size(); ++i)
    if (!isContinuation(loc.sourceLine[i]))
      pad += loc.sourceLine[i] == '\t' ? '\t' : ' ';
  size_t width = 0;
  for (size_t i = col; i < col + len && i < loc.sourceLine.size(); ++i)
    width += !isContinuation(loc.sourceLine[i]);
  os << pad << '^' << std::string(width > 1 ? width - 1 : 0, '~') << "\n";
}

static std::string renderFindingIn(const Finding &f,
                                   const std::vector<Finding> &all,
                                   const std::string &method) {
  std::ostringstream os;
  bool rewritten = f.action == "rewritten";
  os << where(f, method) << ": " << (rewritten ? "remark" : "warning") << ": "
     << f.message << " [" << categoryName(f.category) << "]\n";
  renderSnippet(os, f);
  if (rewritten)
    os << where(f, method) << ": note: rewritten by " << f.rule << "\n";
  else if (f.action == "introduced")
    os << where(f, method) << ": note: introduced by a rewrite"
       << (f.reason.empty() ? "" : "; kept by " + f.reason) << "\n";
  else if (!f.reason.empty() && f.action == "kept")
    os << where(f, method) << ": note: kept by " << f.reason << "\n";
  if (f.role == Role::Derived && !f.causes.empty()) {
    os << where(f, method) << ": note: data-dependent because of ";
    for (size_t i = 0; i < f.causes.size(); ++i) {
      auto it = std::find_if(all.begin(), all.end(), [&](const Finding &g) {
        return g.id == f.causes[i];
      });
      if (it == all.end())
        continue;
      os << (i ? ", " : "") << "'" << it->op << "' at " << where(*it, method);
    }
    os << "\n";
  }
  return os.str();
}

std::string renderFinding(const Finding &finding,
                          const std::vector<Finding> &all) {
  return renderFindingIn(finding, all, "graph");
}

static std::string pad(std::string s, size_t width) {
  if (s.size() < width)
    s.append(width - s.size(), ' ');
  return s;
}

static std::string spanOf(const Segment &seg) {
  if (!seg.firstLine)
    return "no source location";
  std::string file = seg.file.substr(seg.file.rfind('/') + 1);
  return seg.firstLine == seg.lastLine
             ? file + ":" + std::to_string(seg.firstLine)
             : file + ":" + std::to_string(seg.firstLine) + "-" +
                   std::to_string(seg.lastLine);
}

/// `partition after: 1 static region, no dynamic island` and one line per
/// segment.
static std::string renderPartition(const char *when,
                                   const std::vector<Segment> &segments) {
  size_t regions =
      std::count_if(segments.begin(), segments.end(), [](const Segment &s) {
        return s.kind == Segment::Kind::StaticRegion;
      });
  size_t islands = segments.size() - regions;
  std::ostringstream os;
  os << "  partition " << when << ": " << regions << " static region"
     << (regions == 1 ? "" : "s") << ", " << islands << " dynamic island"
     << (islands == 1 ? "" : "s") << "\n";
  for (const Segment &seg : segments) {
    bool island = seg.kind == Segment::Kind::DynamicIsland;
    os << "    " << (island ? "dynamic island " : "static region  ")
       << seg.number
       << (island && seg.guardedOnly ? " (in guards' fallbacks only)" : "")
       << ": " << spanOf(seg) << ", " << seg.numNodes << " node"
       << (seg.numNodes == 1 ? "" : "s");
    if (island && !seg.ops.empty()) {
      os << " (";
      for (size_t i = 0; i < seg.ops.size(); ++i)
        os << (i ? ", " : "") << seg.ops[i];
      os << ")";
    }
    os << "\n";
  }
  return os.str();
}

static std::string plural(size_t n, const char *noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

static std::string renderSummary(const MethodReport &m) {
  std::ostringstream os;
  auto count = [&](auto pred) {
    return static_cast<size_t>(
        std::count_if(m.findings.begin(), m.findings.end(), pred));
  };
  size_t roots = count([](const Finding &f) {
    return f.role == Role::Root && f.action != "introduced";
  });
  size_t rewritten =
      count([](const Finding &f) { return f.action == "rewritten"; });
  size_t introduced =
      count([](const Finding &f) { return f.action == "introduced"; });
  // One set of counts: the input's findings are the table's "before"
  // column, the rewritten graph's its "after" column (the introduced ones
  // among them), and the sync points the places the host waits.
  os << "summary of '" << m.name << "': "
     << plural(m.before.counts.total(), "finding") << " ("
     << plural(roots, "root cause") << "), " << plural(m.before.numNodes, "node")
     << (m.inlined ? " after inlining" : "") << "\n";
  if (rewritten || introduced || m.after.counts.total() != m.before.counts.total())
    os << "  after rewriting: " << plural(m.after.counts.total(), "finding")
       << (introduced ? " (" + std::to_string(introduced) + " introduced by a rewrite)"
                      : std::string())
       << "; " << rewritten << " of the input's rewritten\n";
  os << "  " << pad("category", 16) << pad("before", 8) << "after\n";
  for (Category c : kAllCategories)
    os << "  " << pad(std::string(categoryName(c)), 16)
       << pad(std::to_string(m.before.counts[c]), 8) << m.after.counts[c]
       << "\n";
  // The categories count every finding, derived ones too (a rewrite's
  // bounded values derive from the count it reads once); the sync points
  // are the places the host waits, which is what a rewrite must not add.
  os << "  sync points: " << m.before.syncPoints << " before, "
     << m.after.syncPoints << " after (one per root cause)\n";
  os << "  ops per call: " << m.before.opsPerCall << " before, "
     << m.after.opsPerCall << " after\n";
  os << "  output shapes: "
     << (m.after.outputsStatic ? "all static" : "data-dependent") << "\n";
  if (m.after.fallbackSyncPoints)
    os << "  guards: static while the host facts they check hold (ranks, "
          "shapes, dtypes); otherwise their fallbacks read the host at "
       << m.after.fallbackSyncPoints << " point"
       << (m.after.fallbackSyncPoints == 1 ? "" : "s") << "\n";
  if (m.after.errorPathSyncPoints)
    os << "  error paths: branches that only raise or warn read the host at "
       << m.after.errorPathSyncPoints << " point"
       << (m.after.errorPathSyncPoints == 1 ? "" : "s")
       << ", only on the way to their message\n";
  if (!m.assumedNone.empty()) {
    os << "  assumed None (callers never pass them):";
    for (size_t i = 0; i < m.assumedNone.size(); ++i)
      os << (i ? ", " : " ") << m.assumedNone[i];
    os << "\n";
  }
  os << "  graph: "
     << (m.after.isStatic()
             ? std::string(m.after.fallbackSyncPoints
                               ? "static (no data-dependent value remains "
                                 "outside guarded fallbacks)"
                               : "static (no data-dependent value remains)")
             : "not static (" + std::to_string(m.after.counts.total()) +
                   (m.after.counts.total() == 1
                        ? " data-dependent value remains)"
                        : " data-dependent values remain)"))
     << "\n";
  if (m.batch.asked)
    os << "  batch: "
       << (m.batch.method.empty() ? "not batched: " + m.batch.reason
                                  : "method '" + m.batch.method +
                                        "' takes a leading batch dimension")
       << "\n";
  const MethodReport::Lowering &l = m.lowering;
  bool wantsCpu = l.target.find("cpu") != std::string::npos,
       wantsCuda = l.target.find("cuda") != std::string::npos;
  if (wantsCpu)
    os << "  lowering (cpu, inputs " << l.signature << "): "
       << (l.kernelBytes ? "one kernel (" + std::to_string(l.kernelBytes) +
                               " bytes); other inputs run the TorchScript"
                         : "not lowered: " + l.reason)
       << "\n";
  for (const MethodReport::Lowering::Region &r : l.regions)
    os << "    static region " << r.number << ": "
       << (r.lowered ? "lowered (" + r.method + ", " +
                           std::to_string(r.kernelBytes) + " bytes)"
                     : "not lowered: " + r.reason)
       << "\n";
  if (!l.lowered && !l.regionsReason.empty())
    os << "    regions: " << l.regionsReason << "\n";
  if (wantsCuda) {
    os << "  lowering (cuda, inputs " << l.signature << "): ";
    if (l.cudaLowered) {
      os << l.cudaKernels << " kernels (";
      for (size_t i = 0; i < l.cudaImages.size(); ++i)
        os << (i ? ", " : "") << l.cudaImages[i].first << " "
           << l.cudaImages[i].second << " bytes";
      os << "); other inputs run the TorchScript";
    } else {
      os << "not lowered: "
         << (l.cudaReason.empty() ? l.reason : l.cudaReason);
    }
    os << "\n";
  }
  for (const std::string &hint : m.hints)
    os << "  hint: " << hint << "\n";
  auto same = [](const std::vector<Segment> &a, const std::vector<Segment> &b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const Segment &x, const Segment &y) {
                        return x.kind == y.kind && x.numNodes == y.numNodes &&
                               x.firstLine == y.firstLine &&
                               x.lastLine == y.lastLine;
                      });
  };
  if (same(m.before.partition, m.after.partition)) {
    os << renderPartition("(unchanged by rewriting)", m.after.partition);
  } else {
    os << renderPartition("before rewriting", m.before.partition);
    os << renderPartition("after", m.after.partition);
  }
  return os.str();
}

/// Whether the short report shows \p f: what is left after rewriting, by
/// its root causes (a derived finding whose causes were all rewritten is
/// left on its own account).
static bool isLeft(const Finding &f, const std::vector<Finding> &all) {
  if (f.action == "rewritten")
    return false;
  if (f.role == Role::Root)
    return true;
  return f.action == "kept" &&
         std::all_of(f.causes.begin(), f.causes.end(), [&](size_t c) {
           return c < all.size() && all[c].action == "rewritten";
         });
}

std::string renderText(const Report &report, ReportDetail detail) {
  std::ostringstream os;
  for (const MethodReport &m : report.methods) {
    size_t shown = 0;
    for (const Finding &f : m.findings)
      if (detail == ReportDetail::Full || isLeft(f, m.findings)) {
        os << renderFindingIn(f, m.findings, m.name);
        ++shown;
      }
    if (shown < m.findings.size())
      os << "(" << plural(m.findings.size() - shown, "more finding")
         << ", rewritten or following from those "
         << (shown ? "above" : "rewritten")
         << ": --report=full lists every finding)\n";
    if (!m.findings.empty())
      os << "\n";
    os << renderSummary(m);
  }
  return os.str();
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

/// The length of the valid UTF-8 sequence starting at \p s[i], or 0.
static size_t utf8Length(std::string_view s, size_t i) {
  unsigned char c = s[i];
  size_t n = c < 0x80           ? 1
             : (c >> 5) == 0x6  ? 2
             : (c >> 4) == 0xE  ? 3
             : (c >> 3) == 0x1E ? 4
                                : 0;
  if (n == 0 || i + n > s.size())
    return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
      return 0;
  return n;
}

/// A JSON string: escapes, and U+FFFD for bytes that are not UTF-8 (a
/// path can hold any bytes; JSON must be UTF-8).
static std::string quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8Length(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    unsigned char ch = s[i++];
    switch (ch) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (ch < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", ch);
        out += buf;
      } else {
        out += static_cast<char>(ch);
      }
    }
  }
  return out + "\"";
}

static std::string jsonBool(bool b) { return b ? "true" : "false"; }

static std::string jsonCounts(const CategoryCounts &counts) {
  std::string out = "{";
  for (Category c : kAllCategories)
    out += quote(categoryName(c)) + ": " + std::to_string(counts[c]) + ", ";
  return out + "\"total\": " + std::to_string(counts.total()) + "}";
}

static std::string jsonSegment(const Segment &seg) {
  std::string ops = "[";
  for (size_t i = 0; i < seg.ops.size(); ++i)
    ops += (i ? ", " : "") + quote(seg.ops[i]);
  return "{\"kind\": " +
         quote(seg.kind == Segment::Kind::StaticRegion ? "static" : "dynamic") +
         ", \"number\": " + std::to_string(seg.number) +
         ", \"nodes\": " + std::to_string(seg.numNodes) +
         ", \"file\": " + (seg.firstLine ? quote(seg.file) : "null") +
         ", \"lines\": " +
         (seg.firstLine ? "[" + std::to_string(seg.firstLine) + ", " +
                              std::to_string(seg.lastLine) + "]"
                        : "null") +
         ", \"ops\": " + ops + "]" +
         (seg.kind == Segment::Kind::DynamicIsland
              ? std::string(", \"guarded_only\": ") + jsonBool(seg.guardedOnly)
              : std::string()) +
         "}";
}

static std::string jsonSummary(const GraphSummary &s) {
  std::string partition = "[";
  for (size_t i = 0; i < s.partition.size(); ++i)
    partition += (i ? ", " : "") + jsonSegment(s.partition[i]);
  return "{\"nodes\": " + std::to_string(s.numNodes) +
         ", \"counts\": " + jsonCounts(s.counts) +
         ", \"sync_points\": " + std::to_string(s.syncPoints) +
         ", \"outputs_static\": " + jsonBool(s.outputsStatic) +
         ", \"static\": " + jsonBool(s.isStatic()) +
         ", \"fallback_sync_points\": " +
         std::to_string(s.fallbackSyncPoints) +
         ", \"error_path_sync_points\": " +
         std::to_string(s.errorPathSyncPoints) +
         ", \"ops_per_call\": " + std::to_string(s.opsPerCall) +
         ", \"partition\": " + partition + "]}";
}

static std::string jsonFinding(const Finding &f) {
  std::ostringstream os;
  os << "{\"id\": " << f.id
     << ", \"category\": " << quote(categoryName(f.category))
     << ", \"role\": " << quote(roleName(f.role)) << ", \"op\": " << quote(f.op)
     << ", \"value\": " << quote(f.value)
     << ", \"message\": " << quote(f.message) << ", \"location\": ";
  if (f.location) {
    const Location &l = *f.location;
    os << "{\"file\": " << quote(l.file) << ", \"line\": " << l.line
       << ", \"column\": " << l.column << ", \"length\": " << l.length
       << ", \"source\": " << quote(l.sourceLine) << "}";
  } else {
    os << "null";
  }
  os << ", \"node\": " << quote(f.nodeText) << ", \"causes\": [";
  for (size_t i = 0; i < f.causes.size(); ++i)
    os << (i ? ", " : "") << f.causes[i];
  os << "], \"action\": " << quote(f.action)
     << ", \"rule\": " << (f.rule.empty() ? "null" : quote(f.rule))
     << ", \"reason\": " << (f.reason.empty() ? "null" : quote(f.reason))
     << "}";
  return os.str();
}

std::string renderJson(const Report &report) {
  std::ostringstream os;
  os << "{\n  \"schema\": \"staticify-report\",\n  \"version\": "
     << kReportSchemaVersion << ",\n  \"tool\": {\"name\": \"staticify\", "
     << "\"version\": " << quote(report.toolVersion)
     << ", \"torch\": " << quote(report.torchVersion) << "},\n"
     << "  \"input\": " << quote(report.input) << ",\n  \"output\": "
     << (report.output.empty() ? "null" : quote(report.output)) << ",\n"
     << "  \"methods\": [";
  for (size_t i = 0; i < report.methods.size(); ++i) {
    const MethodReport &m = report.methods[i];
    os << (i ? "," : "") << "\n    {\"name\": " << quote(m.name)
       << ", \"inlined\": " << jsonBool(m.inlined) << ", \"passes\": [";
    for (size_t p = 0; p < m.passes.size(); ++p)
      os << (p ? ", " : "") << quote(m.passes[p]);
    os << "],\n     \"before\": " << jsonSummary(m.before)
       << ",\n     \"after\": " << jsonSummary(m.after);
    if (!m.lowering.target.empty())
      os << ",\n     \"lowering\": {\"target\": " << quote(m.lowering.target)
         << ", \"inputs\": " << quote(m.lowering.signature)
         << ", \"lowered\": " << jsonBool(m.lowering.lowered)
         << ", \"reason\": " << (m.lowering.lowered ? "null" : quote(m.lowering.reason))
         << ", \"kernel_bytes\": " << m.lowering.kernelBytes;
    if (!m.lowering.target.empty() && !m.lowering.lowered) {
      os << ", \"regions\": [";
      for (size_t r = 0; r < m.lowering.regions.size(); ++r) {
        const MethodReport::Lowering::Region &g = m.lowering.regions[r];
        os << (r ? ", " : "") << "{\"region\": " << g.number
           << ", \"method\": " << (g.lowered ? quote(g.method) : "null")
           << ", \"lowered\": " << jsonBool(g.lowered)
           << ", \"reason\": " << (g.lowered ? "null" : quote(g.reason))
           << ", \"kernel_bytes\": " << g.kernelBytes << "}";
      }
      os << "], \"regions_reason\": "
         << (m.lowering.regionsReason.empty() ? "null"
                                              : quote(m.lowering.regionsReason));
    }
    if (m.lowering.target.find("cuda") != std::string::npos) {
      const MethodReport::Lowering &l = m.lowering;
      os << ", \"cuda\": {\"lowered\": " << jsonBool(l.cudaLowered)
         << ", \"reason\": "
         << (l.cudaLowered ? "null"
                           : quote(l.cudaReason.empty() ? l.reason : l.cudaReason))
         << ", \"kernels\": " << l.cudaKernels << ", \"images\": {";
      for (size_t i = 0; i < l.cudaImages.size(); ++i)
        os << (i ? ", " : "") << quote(l.cudaImages[i].first) << ": "
           << l.cudaImages[i].second;
      os << "}}";
    }
    if (!m.lowering.target.empty())
      os << "}";
    auto strings = [&](const std::vector<std::string> &items) {
      std::string list = "[";
      for (size_t k = 0; k < items.size(); ++k)
        list += (k ? ", " : "") + quote(items[k]);
      return list + "]";
    };
    if (m.batch.asked)
      os << ",\n     \"batch\": {\"method\": "
         << (m.batch.method.empty() ? "null" : quote(m.batch.method))
         << ", \"reason\": "
         << (m.batch.method.empty() ? quote(m.batch.reason) : "null") << "}";
    os << ",\n     \"assumed_none\": " << strings(m.assumedNone)
       << ", \"hints\": " << strings(m.hints);
    os << ",\n     \"findings\": [";
    for (size_t f = 0; f < m.findings.size(); ++f)
      os << (f ? "," : "") << "\n       " << jsonFinding(m.findings[f]);
    os << (m.findings.empty() ? "" : "\n     ") << "]}";
  }
  os << (report.methods.empty() ? "" : "\n  ") << "]\n}\n";
  return os.str();
}

} // namespace staticify
