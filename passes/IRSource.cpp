//===- IRSource.cpp - Textual TorchScript IR with source locations
//---------===//

#include "passes/IRSource.h"

#include "passes/Compat.h"

#include <torch/csrc/jit/ir/irparser.h>

#include <cctype>
#include <optional>
#include <vector>

namespace staticify {

using torch::jit::Block;
using torch::jit::Node;

namespace {

/// A line of IR that creates a node: where its op name starts, the name,
/// and the names it gives its outputs.
struct Statement {
  size_t line;
  size_t column;
  std::string op;
  std::vector<std::string> outputs;
};

/// `%a : T, %b.1 : T` -> {"a", "b.1"}.
std::vector<std::string> outputNames(const std::string &lhs) {
  std::vector<std::string> names;
  for (size_t pos = lhs.find('%'); pos != std::string::npos;
       pos = lhs.find('%', pos + 1)) {
    size_t end = pos + 1;
    while (end < lhs.size() &&
           (std::isalnum(static_cast<unsigned char>(lhs[end])) ||
            lhs[end] == '_' || lhs[end] == '.'))
      ++end;
    names.push_back(lhs.substr(pos + 1, end - pos - 1));
  }
  return names;
}

/// `%a : T, %b : T = ns::op[attrs](...)` or `ns::op(...)` (no outputs).
std::optional<Statement> statementAt(const std::string &text, size_t line) {
  size_t i = text.find_first_not_of(" \t");
  if (i == std::string::npos)
    return std::nullopt;
  std::vector<std::string> outputs;
  if (text[i] == '%') {
    size_t eq = text.find(" = ", i);
    if (eq == std::string::npos)
      return std::nullopt; // a graph or block parameter
    outputs = outputNames(text.substr(i, eq - i));
    i = eq + 3;
  }
  size_t end = i;
  while (end < text.size() &&
         (std::isalnum(static_cast<unsigned char>(text[end])) ||
          text[end] == '_' || text[end] == ':' || text[end] == '.'))
    ++end;
  std::string op = text.substr(i, end - i);
  if (op.find("::") == std::string::npos || end >= text.size() ||
      (text[end] != '(' && text[end] != '['))
    return std::nullopt;
  return Statement{line, i, op, std::move(outputs)};
}

void collectNodes(Block *block, std::vector<Node *> &nodes) {
  for (Node *node : block->nodes()) {
    nodes.push_back(node);
    for (Block *b : node->blocks())
      collectNodes(b, nodes);
  }
}

} // namespace

std::shared_ptr<torch::jit::Graph>
parseIRWithLocations(const std::string &text, const std::string &filename) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(text, graph.get());

  auto source = std::make_shared<torch::jit::Source>(text, filename,
                                                     /*starting_line_no=*/1);
  std::vector<Statement> statements;
  for (size_t line = 0; line < source->num_lines(); ++line) {
    std::string lineText = compat::sourceLine(*source, line);
    if (auto s = statementAt(lineText, line))
      statements.push_back(*s);
  }
  std::vector<Node *> nodes;
  collectNodes(graph->block(), nodes);
  // The parser creates nodes in text order; if the pairing is off anywhere
  // (an IR form this reader does not know), no location beats a wrong one.
  if (nodes.size() != statements.size())
    return graph;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (statements[i].op != nodes[i]->kind().toQualString() ||
        statements[i].outputs.size() != nodes[i]->outputs().size())
      return graph;
  for (size_t i = 0; i < nodes.size(); ++i) {
    size_t start =
        source->offset_for_line(statements[i].line) + statements[i].column;
    nodes[i]->setSourceRange(torch::jit::SourceRange(
        source, start, start + statements[i].op.size()));
    // parseIR drops the names of intermediate values; keep the author's so
    // printed graphs and --print-classes read like the input.
    for (size_t o = 0; o < statements[i].outputs.size(); ++o) {
      const std::string &name = statements[i].outputs[o];
      if (!name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])))
        nodes[i]->output(o)->setDebugName(name);
    }
  }
  return graph;
}

} // namespace staticify
