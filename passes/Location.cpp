//===- Location.cpp - Where a node came from in the user's Python ---------===//
//
// A node's source range, mapped back through the archive's debug records to
// the original file, line and column (locationOf, declared in Analysis.h);
// a traced module's "path.py(12): forward" frames are followed to the file
// on disk.
//
//===----------------------------------------------------------------------===//

#include "passes/Analysis.h"

#include "passes/Compat.h"

#include <algorithm>
#include <cctype>
#include <fstream>

namespace staticify {

using torch::jit::Node;

namespace {

/// "path.py(12): forward" -> ("path.py", 12): the form of a traced module's
/// Python stack frames.
std::optional<std::pair<std::string, size_t>>
tracedFrame(const std::string &line) {
  size_t colon = line.rfind("): ");
  if (colon == std::string::npos || colon == 0)
    return std::nullopt;
  std::string_view name(line.data() + colon + 3, line.size() - colon - 3);
  auto identifierChar = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) ||
      !std::all_of(name.begin(), name.end(), identifierChar))
    return std::nullopt;
  size_t open = line.rfind('(', colon);
  if (open == std::string::npos || open == 0 || open + 1 == colon ||
      colon - open - 1 > 9)
    return std::nullopt;
  std::string digits = line.substr(open + 1, colon - open - 1);
  if (!std::all_of(digits.begin(), digits.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return std::nullopt;
  return std::make_pair(line.substr(0, open), std::stoul(digits));
}

} // namespace

std::optional<Location> locationOf(const Node *node) {
  // A module loaded from an archive has ranges in its re-printed code; its
  // debug records map them back to the user's Python source.
  torch::jit::SourceRange range = node->sourceRange();
  // The debug records are read lazily, here: one libtorch cannot parse
  // costs the location, not the run (the loader has dropped those it knows
  // would crash it).
  try {
    if (auto original = range.findSourceRangeThatGenerated())
      range = *original;
  } catch (const std::exception &) {
    return std::nullopt;
  }
  auto flc = compat::fileLineCol(range);
  if (!flc || std::get<0>(*flc).empty())
    return std::nullopt;
  Location loc;
  loc.file = std::get<0>(*flc);
  loc.line = std::get<1>(*flc);
  loc.column = std::get<2>(*flc) + 1;
  const torch::jit::Source &source = *range.source();
  size_t lineIndex = source.lineno_for_offset(range.start());
  loc.sourceLine = compat::sourceLine(source, lineIndex);
  // A traced module records Python stack frames, "path.py(12): forward":
  // the place is the frame's file and line, its text is on disk.
  // Matched by hand: libstdc++'s std::regex recurses per character and
  // overflows the stack on a long line (a hostile archive's).
  if (auto frame = tracedFrame(loc.sourceLine)) {
    loc.file = frame->first;
    loc.line = frame->second;
    loc.sourceLine.clear();
    std::ifstream in(loc.file);
    for (size_t n = 1; in && std::getline(in, loc.sourceLine) && n < loc.line;
         ++n)
      ;
    if (!in)
      loc.sourceLine.clear();
    size_t first = loc.sourceLine.find_first_not_of(" \t");
    loc.column = first == std::string::npos ? 1 : first + 1;
    loc.length = loc.sourceLine.size() > loc.column - 1
                     ? loc.sourceLine.size() - (loc.column - 1)
                     : 1;
    return loc;
  }
  size_t lineStart = source.offset_for_line(lineIndex);
  size_t lineEnd = lineStart + loc.sourceLine.size();
  loc.length = std::max<size_t>(1, std::min(range.end(), lineEnd) -
                                       std::min(range.start(), lineEnd));
  return loc;
}

} // namespace staticify
