//===- CommandLine.h - The small argument scanner both tools share
//---------===//
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace staticify {

/// Walks argv; `--name VALUE` and `--name=VALUE` are both accepted.
class CommandLine {
public:
  CommandLine(int argc, char **argv) : args(argv + 1, argv + argc) {}
  /// The arguments without the program name.
  explicit CommandLine(std::vector<std::string> arguments)
      : args(std::move(arguments)) {}

  bool done() const { return pos >= args.size(); }
  const std::string &current() const { return args[pos]; }

  /// Consumes a flag without a value.
  bool flag(const char *name) {
    if (args[pos] != name)
      return false;
    ++pos;
    return true;
  }

  /// Consumes an option with a value into \p value.
  bool option(const char *name, std::string &value) {
    const std::string &arg = args[pos];
    std::string prefix = std::string(name) + "=";
    if (arg.rfind(prefix, 0) == 0) {
      value = arg.substr(prefix.size());
      ++pos;
    } else if (arg == name) {
      if (pos + 1 >= args.size())
        throw std::invalid_argument(std::string(name) + " needs a value");
      value = args[pos + 1];
      pos += 2;
    } else {
      return false;
    }
    last = name;
    if (value.empty())
      throw std::invalid_argument(std::string(name) +
                                  " needs a value, got an empty one");
    return true;
  }

  /// The option consumed last, as the user spelled it.
  const std::string &lastOption() const { return last; }

  /// Consumes a positional argument or throws on an unknown option.
  std::string positional() {
    const std::string &arg = args[pos];
    if (arg.size() > 1 && arg[0] == '-')
      throw std::invalid_argument("unknown option '" + arg + "'");
    return args[pos++];
  }

private:
  std::vector<std::string> args;
  size_t pos = 0;
  std::string last;
};

} // namespace staticify
