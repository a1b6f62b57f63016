//===- ArchiveGuard.cpp - Checks an untrusted archive before libtorch reads it //

#include "tools/ArchiveGuard.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <unordered_set>

namespace staticify {

//===----------------------------------------------------------------------===//
// The zip directory
//===----------------------------------------------------------------------===//

namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64End = 0x06064b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr size_t kEndSize = 22, kLocatorSize = 20, kZip64EndSize = 56;
constexpr size_t kCentralSize = 46, kLocalSize = 30;

uint64_t little(const char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
uint16_t u16(const char *p) { return static_cast<uint16_t>(little(p, 2)); }
uint32_t u32(const char *p) { return static_cast<uint32_t>(little(p, 4)); }
uint64_t u64(const char *p) { return little(p, 8); }

std::string readExactly(const ReadAt &read, uint64_t offset, uint64_t n) {
  std::string bytes(n, '\0');
  if (read(offset, n, bytes.data()) != n)
    throw ArchiveProblem("a read stops short of the end");
  return bytes;
}

/// The 64-bit sizes of a zip64 record replace the 32-bit ones set to
/// 0xffffffff, in this order.
void applyZip64Extra(std::string_view extra, uint64_t &size,
                     uint64_t &compressedSize, uint64_t &localOffset) {
  while (extra.size() >= 4) {
    uint16_t id = u16(extra.data()), length = u16(extra.data() + 2);
    std::string_view body = extra.substr(4, length);
    if (id == 1) {
      size_t at = 0;
      for (uint64_t *field : {&size, &compressedSize, &localOffset}) {
        if (*field != 0xffffffffu)
          continue;
        if (at + 8 > body.size())
          throw ArchiveProblem("a zip64 record is cut short");
        *field = u64(body.data() + at);
        at += 8;
      }
      return;
    }
    extra.remove_prefix(std::min<size_t>(extra.size(), 4 + length));
  }
}

std::string_view topFolder(std::string_view name) {
  size_t slash = name.find('/');
  return slash == std::string_view::npos ? std::string_view()
                                         : name.substr(0, slash + 1);
}

std::string lowerCase(std::string_view s) {
  std::string lower(s);
  for (char &c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

} // namespace

std::vector<ArchiveRecord> readArchiveDirectory(const ReadAt &read,
                                                uint64_t fileSize,
                                                const ArchiveLimits &limits) {
  if (fileSize < kEndSize)
    throw ArchiveProblem("too short to be a zip archive");
  // The end record is in the last 64 KiB + 22 bytes (its comment is at most
  // 64 KiB); the last signature that fits wins, as in libtorch's miniz.
  uint64_t tailSize = std::min<uint64_t>(fileSize, 65535 + kEndSize);
  std::string tail = readExactly(read, fileSize - tailSize, tailSize);
  size_t at = std::string::npos;
  for (size_t i = tail.size() - kEndSize + 1; i-- > 0;)
    if (u32(tail.data() + i) == kEndOfDirectory) {
      at = i;
      break;
    }
  if (at == std::string::npos)
    throw ArchiveProblem(
        "its zip directory is missing");
  const char *end = tail.data() + at;
  uint64_t endOffset = fileSize - tailSize + at;
  uint64_t records = u16(end + 10), directorySize = u32(end + 12),
           directoryOffset = u32(end + 16);
  bool sentinel = records == 0xffff || directorySize == 0xffffffffu ||
                  directoryOffset == 0xffffffffu;
  // As libtorch's miniz reads it: where a zip64 locator precedes the end
  // record and names a zip64 record, that record's counts and offsets are
  // the directory's, whatever the 32-bit fields say (torch.jit.save writes
  // both); the 32-bit fields count only without one.
  std::string locator =
      endOffset >= kLocatorSize
          ? readExactly(read, endOffset - kLocatorSize, kLocatorSize)
          : std::string();
  if (!locator.empty() && u32(locator.data()) == kZip64Locator) {
    uint64_t zip64Offset = u64(locator.data() + 8);
    if (zip64Offset > fileSize || fileSize - zip64Offset < kZip64EndSize)
      throw ArchiveProblem("its zip64 directory lies outside the file");
    std::string zip64 = readExactly(read, zip64Offset, kZip64EndSize);
    if (u32(zip64.data()) == kZip64End) {
      records = u64(zip64.data() + 32);
      directorySize = u64(zip64.data() + 40);
      directoryOffset = u64(zip64.data() + 48);
    } else if (sentinel) {
      throw ArchiveProblem("its zip64 directory record is corrupt");
    }
  } else if (sentinel) {
    throw ArchiveProblem("its zip64 directory locator is missing");
  }
  if (records > limits.maxRecords)
    throw ArchiveProblem(std::to_string(records) + " records; the limit is " +
                             std::to_string(limits.maxRecords),
                         true);
  if (directoryOffset > fileSize || directorySize > fileSize - directoryOffset)
    throw ArchiveProblem("its zip directory lies outside the file");
  if (records * kCentralSize > directorySize)
    throw ArchiveProblem("its zip directory is shorter than its record count");
  std::string directory = readExactly(read, directoryOffset, directorySize);

  std::vector<ArchiveRecord> result;
  result.reserve(records);
  // libtorch reads the records under the folder of the directory's first
  // record, and finds a name by a binary search that ignores ASCII case: of
  // two records with one name, it may read either.
  std::string folder;
  std::unordered_set<std::string> names;
  uint64_t inflated = 0, codeBytes = 0;
  size_t pos = 0;
  for (uint64_t i = 0; i < records; ++i) {
    if (directory.size() - pos < kCentralSize ||
        u32(directory.data() + pos) != kCentralHeader)
      throw ArchiveProblem("its zip directory is corrupt");
    const char *h = directory.data() + pos;
    ArchiveRecord r;
    r.method = u16(h + 10);
    r.crc = u32(h + 16);
    r.compressedSize = u32(h + 20);
    r.size = u32(h + 24);
    size_t nameLength = u16(h + 28), extraLength = u16(h + 30),
           commentLength = u16(h + 32);
    uint64_t localOffset = u32(h + 42);
    if (directory.size() - pos - kCentralSize <
        nameLength + extraLength + commentLength)
      throw ArchiveProblem("its zip directory is corrupt");
    std::string_view full(h + kCentralSize, nameLength);
    applyZip64Extra(std::string_view(h + kCentralSize + nameLength,
                                     extraLength),
                    r.size, r.compressedSize, localOffset);
    pos += kCentralSize + nameLength + extraLength + commentLength;
    if (i == 0)
      folder = std::string(topFolder(full));
    if (!names.insert(lowerCase(full)).second)
      throw ArchiveProblem("record '" + std::string(full) +
                           "' appears twice in its zip directory, and "
                           "libtorch may read either",
                           true);
    bool readByLibtorch = !folder.empty() && full.size() > folder.size() &&
                full.compare(0, folder.size(), folder) == 0;
    r.name = std::string(readByLibtorch ? full.substr(folder.size()) : full);

    std::string quoted = "record '" + r.name + "'";
    if (r.method != 0 && r.method != 8)
      throw ArchiveProblem(quoted + " uses zip method " +
                           std::to_string(r.method) +
                           ", which libtorch cannot read");
    if (r.method == 0 && r.size != r.compressedSize)
      throw ArchiveProblem(quoted + " has two different sizes");
    if (r.method == 8 && readByLibtorch) {
      if (r.size > limits.minSizeForInflationRatio &&
          r.size / limits.maxInflationRatio > r.compressedSize + 64)
        throw ArchiveProblem(quoted + " would inflate from " +
                             std::to_string(r.compressedSize) + " to " +
                             std::to_string(r.size) +
                             " bytes (a zip bomb?)",
                             true);
      inflated += r.size;
      if (inflated > limits.maxInflatedBytes)
        throw ArchiveProblem("compressed records inflate to more than " +
                             std::to_string(limits.maxInflatedBytes >> 20) +
                             " MiB (a zip bomb?)",
                             true);
    }
    if (localOffset > fileSize || fileSize - localOffset < kLocalSize)
      throw ArchiveProblem(quoted + " lies outside the file (truncated?)");
    std::string local = readExactly(read, localOffset, kLocalSize);
    if (u32(local.data()) != kLocalHeader)
      throw ArchiveProblem(quoted + " has a corrupt header");
    r.dataOffset = localOffset + kLocalSize + u16(local.data() + 26) +
                   u16(local.data() + 28);
    if (r.dataOffset > fileSize ||
        fileSize - r.dataOffset < r.compressedSize)
      throw ArchiveProblem(quoted + " extends past the end of the file "
                                    "(truncated?)");
    if (!readByLibtorch)
      continue; // libtorch never reads it: its bytes do not matter
    RecordKind kind = recordKind(r.name);
    if (kind == RecordKind::Code) {
      codeBytes += r.size;
      if (codeBytes > limits.maxCodeBytes)
        throw ArchiveProblem("its code records hold more than " +
                                 std::to_string(limits.maxCodeBytes >> 20) +
                                 " MiB",
                             true);
    }
    if (kind != RecordKind::Other && r.size > limits.maxParsedRecordBytes)
      throw ArchiveProblem(quoted + " is " + std::to_string(r.size >> 20) +
                           " MiB (the limit for code and pickles is " +
                           std::to_string(limits.maxParsedRecordBytes >> 20) +
                           " MiB)",
                           true);
    result.push_back(std::move(r));
  }
  return result;
}

RecordKind recordKind(std::string_view name) {
  // libtorch's zip reader finds records ignoring ASCII case: so does this.
  // torch::jit::load unpickles data.pkl, constants.pkl and the debug records
  // of its code, and parses code/; a bytecode.pkl (the mobile format) or an
  // extra file is never parsed.
  std::string lower = lowerCase(name);
  auto endsWith = [&](std::string_view suffix) {
    return lower.size() >= suffix.size() &&
           lower.compare(lower.size() - suffix.size(), suffix.size(),
                         suffix) == 0;
  };
  bool code = lower.rfind("code/", 0) == 0;
  if (code && endsWith(".py.debug_pkl"))
    return RecordKind::DebugPickle;
  if (code && endsWith(".py"))
    return RecordKind::Code;
  if (lower == "data.pkl" || lower == "constants.pkl")
    return RecordKind::Pickle;
  return RecordKind::Other;
}

//===----------------------------------------------------------------------===//
// Pickles
//===----------------------------------------------------------------------===//

namespace {

/// What the check knows of a value on the unpickler's stack: its nesting
/// depth, and for a list or dict (which grow after they are made) its index
/// in a table of depths, shared by every copy fetched from the memo.
struct StackValue {
  int64_t container = -1;
  uint32_t depth = 0;
  /// What a storage reference needs: a short string (BINUNICODE, GLOBAL),
  /// an int, or a short tuple of those; indices into the check's tables.
  int32_t text = -1;
  int32_t tuple = -1;
  bool isInt = false;
  int64_t integer = 0;
};

/// Bytes per element of `torch.<Type>Storage`; 1 when unknown (the
/// smallest, so the check never refuses what it cannot judge).
uint64_t storageItemSize(std::string_view global) {
  static const std::pair<const char *, uint64_t> sizes[] = {
      {"torch.DoubleStorage", 8}, {"torch.LongStorage", 8},
      {"torch.ComplexFloatStorage", 8}, {"torch.ComplexDoubleStorage", 16},
      {"torch.FloatStorage", 4}, {"torch.IntStorage", 4},
      {"torch.QInt32Storage", 4}, {"torch.ComplexHalfStorage", 4},
      {"torch.HalfStorage", 2}, {"torch.BFloat16Storage", 2},
      {"torch.ShortStorage", 2}};
  for (const auto &[name, size] : sizes)
    if (global == name)
      return size;
  return 1;
}

class PickleCheck {
public:
  PickleCheck(std::string_view data, const ArchiveLimits &limits,
              std::vector<StorageRef> *storages)
      : data(data), limits(limits), storages(storages),
        maxMemoId(std::max<uint64_t>(256, data.size())) {}

  std::optional<std::string> run() {
    if (data.size() < 2 || static_cast<unsigned char>(data[0]) != 0x80)
      return "a pickle lacks its protocol header";
    pos = 2;
    while (pos < data.size()) {
      char op = data[pos++];
      if (op == '.')
        return std::nullopt; // STOP
      if (auto problem = step(op))
        return problem;
    }
    return "a pickle ends before its STOP (truncated)";
  }

private:
  std::string_view data;
  const ArchiveLimits &limits;
  std::vector<StorageRef> *storages;
  uint64_t maxMemoId;
  std::vector<std::string> texts;
  std::vector<std::vector<StackValue>> tuples;

  static constexpr size_t kKeptText = 256, kKeptTuple = 8;

  std::optional<std::string> pushText(size_t start, size_t length) {
    StackValue v;
    if (length <= kKeptText) {
      texts.emplace_back(data.substr(start, length));
      v.text = static_cast<int32_t>(texts.size() - 1);
    }
    return push(v);
  }

  const std::string *textOf(const StackValue &v) const {
    return v.text >= 0 ? &texts[v.text] : nullptr;
  }

  /// BINPERSID of ('storage', torch.<T>Storage, key, device, numel).
  void recordStorage(const StackValue &id) {
    if (!storages || id.tuple < 0)
      return;
    const std::vector<StackValue> &t = tuples[id.tuple];
    if (t.size() != 5 || !textOf(t[0]) || *textOf(t[0]) != "storage" ||
        !textOf(t[2]) || !t[4].isInt || t[4].integer < 0)
      return;
    storages->push_back({*textOf(t[2]), static_cast<uint64_t>(t[4].integer),
                         textOf(t[1]) ? storageItemSize(*textOf(t[1])) : 1});
  }
  size_t pos = 0;
  std::vector<StackValue> stack;
  std::vector<size_t> marks;
  std::vector<StackValue> memo;
  std::vector<uint32_t> containerDepth;

  uint32_t depthOf(const StackValue &v) const {
    return v.container >= 0 ? containerDepth[v.container] : v.depth;
  }

  bool take(size_t n, uint64_t *value = nullptr) {
    if (data.size() - pos < n)
      return false;
    if (value)
      *value = little(data.data() + pos, static_cast<int>(n));
    pos += n;
    return true;
  }

  std::optional<std::string> tooDeep(uint32_t depth) const {
    if (depth <= limits.maxPickleDepth)
      return std::nullopt;
    return "a pickle nests values more than " +
           std::to_string(limits.maxPickleDepth) + " deep";
  }

  std::optional<std::string> push(StackValue v) {
    stack.push_back(v);
    return tooDeep(depthOf(v));
  }

  /// Keeps a short tuple's items (for storage references).
  int32_t keepTuple(size_t from) {
    if (stack.size() - from > kKeptTuple)
      return -1;
    tuples.emplace_back(stack.begin() + from, stack.end());
    return static_cast<int32_t>(tuples.size() - 1);
  }

  /// Depth of a value made of stack[from, end), which are popped.
  uint32_t popInto(size_t from) {
    uint32_t depth = 0;
    for (size_t i = from; i < stack.size(); ++i)
      depth = std::max(depth, depthOf(stack[i]));
    stack.resize(from);
    return depth + 1;
  }

  std::optional<size_t> popMark() {
    if (marks.empty() || marks.back() > stack.size())
      return std::nullopt;
    size_t start = marks.back();
    marks.pop_back();
    return start;
  }

  /// APPENDS / SETITEMS: stack[start, end) go into the list or dict just
  /// below the mark.
  std::optional<std::string> fill(size_t start, bool pairs) {
    if (start == 0)
      return "a pickle adds items with no container below them";
    if (pairs && (stack.size() - start) % 2 != 0)
      return "a pickle sets a dict item without a value";
    StackValue target = stack[start - 1];
    for (size_t i = start; i < stack.size(); ++i)
      if (target.container >= 0 && stack[i].container == target.container)
        return std::string("a pickled container contains itself");
    uint32_t depth = popInto(start);
    if (target.container < 0)
      return "a pickle adds items to a value that is not a list or dict";
    uint32_t &d = containerDepth[target.container];
    d = std::max(d, depth);
    return tooDeep(d);
  }

  std::optional<std::string> newContainer() {
    containerDepth.push_back(1);
    return push({static_cast<int64_t>(containerDepth.size() - 1), 0});
  }

  std::optional<std::string> needStack(size_t n, const char *opName) {
    if (stack.size() >= n)
      return std::nullopt;
    return std::string("a pickle's ") + opName + " finds " +
           std::to_string(stack.size()) + " values on the stack, needs " +
           std::to_string(n);
  }

  std::optional<std::string> step(char op) {
    const std::string cut = "a pickle is cut short";
    uint64_t n = 0;
    switch (op) {
    case ']': // EMPTY_LIST
    case '}': // EMPTY_DICT
      return newContainer();
    case ')': // EMPTY_TUPLE
      return push({-1, 1});
    case '(': // MARK
      marks.push_back(stack.size());
      return std::nullopt;
    case 'N':          // NONE
    case '\x88':       // NEWTRUE
    case '\x89':       // NEWFALSE
      return push({});
    case 'K':   // BININT1
    case 'M':   // BININT2
    case 'J': { // BININT
      size_t width = op == 'K' ? 1 : op == 'M' ? 2 : 4;
      if (!take(width, &n))
        return cut;
      StackValue v;
      v.isInt = true;
      v.integer = width == 4 ? static_cast<int32_t>(n) : static_cast<int64_t>(n);
      return push(v);
    }
    case 'G': // BINFLOAT
      if (!take(8))
        return cut;
      return push({});
    case '\x8a': { // LONG1: libtorch reads only 8-byte ones
      if (!take(1, &n))
        return cut;
      if (n != 8)
        return "a pickle has a LONG1 of " + std::to_string(n) +
               " bytes (libtorch reads 8)";
      StackValue v;
      v.isInt = true;
      if (!take(8, &n))
        return cut;
      v.integer = static_cast<int64_t>(n);
      return push(v);
    }
    case 'X': { // BINUNICODE
      if (!take(4, &n) || data.size() - pos < n)
        return cut;
      size_t start = pos;
      pos += n;
      return pushText(start, n);
    }
    case 'c': { // GLOBAL: module and name, each ending in a newline
      std::string name;
      for (int part = 0; part < 2; ++part) {
        size_t newline = data.find('\n', pos);
        if (newline == std::string_view::npos)
          return cut;
        name += (part ? "." : "") + std::string(data.substr(pos, newline - pos));
        pos = newline + 1;
      }
      StackValue v;
      if (name.size() <= kKeptText) {
        texts.push_back(std::move(name));
        v.text = static_cast<int32_t>(texts.size() - 1);
      }
      return push(v);
    }
    case 'q': // BINPUT
    case 'r': // LONG_BINPUT
      if (!take(op == 'q' ? 1 : 4, &n))
        return cut;
      if (stack.empty())
        return std::string("a pickle memoizes from an empty stack");
      if (n > maxMemoId)
        return "a pickle uses memo slot " + std::to_string(n) +
               ", far past its size";
      if (n >= memo.size())
        memo.resize(n + 1);
      memo[n] = stack.back();
      return std::nullopt;
    case 'h': // BINGET
    case 'j': // LONG_BINGET
      if (!take(op == 'h' ? 1 : 4, &n))
        return cut;
      if (n >= memo.size())
        return "a pickle reads memo slot " + std::to_string(n) +
               ", which was never written";
      return push(memo[n]);
    case 't':   // TUPLE
    case 'l': { // LIST
      auto start = popMark();
      if (!start)
        return std::string("a pickle builds a tuple or list without a mark");
      if (op == 't') {
        StackValue tuple;
        tuple.tuple = keepTuple(*start);
        tuple.depth = popInto(*start);
        return push(tuple);
      }
      uint32_t depth = popInto(*start);
      containerDepth.push_back(depth);
      return push({static_cast<int64_t>(containerDepth.size() - 1), 0});
    }
    case 'd': { // DICT
      auto start = popMark();
      if (!start)
        return std::string("a pickle builds a dict without a mark");
      if ((stack.size() - *start) % 2 != 0)
        return std::string("a pickle builds a dict with a key and no value");
      containerDepth.push_back(popInto(*start));
      return push({static_cast<int64_t>(containerDepth.size() - 1), 0});
    }
    case '\x85': // TUPLE1
    case '\x86': // TUPLE2
    case '\x87': { // TUPLE3
      size_t k = static_cast<unsigned char>(op) - 0x84;
      if (auto problem = needStack(k, "TUPLE1/2/3"))
        return problem;
      return push({-1, popInto(stack.size() - k)});
    }
    case 'e':   // APPENDS
    case 'u': { // SETITEMS
      auto start = popMark();
      if (!start)
        return std::string("a pickle adds items without a mark");
      return fill(*start, op == 'u');
    }
    case 's': // SETITEM
      if (auto problem = needStack(3, "SETITEM"))
        return problem;
      return fill(stack.size() - 2, /*pairs=*/true);
    case '\x81': // NEWOBJ: drops its (empty) arguments
      if (auto problem = needStack(1, "NEWOBJ"))
        return problem;
      stack.pop_back();
      return std::nullopt;
    case 'R':   // REDUCE: callable, arguments -> result
    case 'b': { // BUILD: object, state -> object
      if (auto problem = needStack(2, op == 'R' ? "REDUCE" : "BUILD"))
        return problem;
      // The arguments' tuple already counted a level: no second one.
      StackValue result;
      result.depth = popInto(stack.size() - 2) - 1;
      return push(result);
    }
    case 'Q': // BINPERSID: a storage key tuple -> a tensor
      if (auto problem = needStack(1, "BINPERSID"))
        return problem;
      recordStorage(stack.back());
      stack.pop_back();
      return push({});
    default:
      return "a pickle uses opcode 0x" +
             std::string(1, "0123456789abcdef"[(op >> 4) & 15]) +
             std::string(1, "0123456789abcdef"[op & 15]) +
             ", which libtorch does not read";
    }
  }
};

} // namespace

std::optional<std::string> checkPickle(std::string_view data,
                                       const ArchiveLimits &limits,
                                       std::vector<StorageRef> *storages) {
  return PickleCheck(data, limits, storages).run();
}

//===----------------------------------------------------------------------===//
// Code
//===----------------------------------------------------------------------===//

namespace {

bool isIdentifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

bool isOperatorKeyword(std::string_view word) {
  for (const char *k : {"not", "and", "or", "if", "else", "in", "is",
                        "lambda", "await"})
    if (word == k)
      return true;
  return false;
}

/// An upper bound of the depth of the expression tree libtorch's parser and
/// emitter recurse through: each operator (binary, unary, attribute, call,
/// subscript) adds one level over its operand, each bracket one level over
/// the deepest of its comma-separated parts. Each open bracket remembers the
/// depth above it, so the innermost path is checked in O(1) per token.
class ExpressionDepth {
public:
  void open() {
    Frame child;
    child.base = frames.back().base + frames.back().operators + 1;
    frames.push_back(child);
  }
  void close() {
    if (frames.size() == 1)
      return; // unbalanced: libtorch reports it
    uint32_t depth = frames.back().depth() + 1;
    frames.pop_back();
    Frame &parent = frames.back();
    parent.deepestChild = std::max(parent.deepestChild, depth);
  }
  void op() { ++frames.back().operators; }
  /// Returns the number of items of the innermost bracket so far.
  uint32_t separator() {
    frames.back().separate();
    return ++frames.back().items;
  }
  /// The depth of the innermost open bracket's path so far.
  uint32_t current() const { return frames.back().base + frames.back().depth(); }
  size_t openBrackets() const { return frames.size() - 1; }
  void reset() { frames.assign(1, {}); }

private:
  struct Frame {
    uint32_t base = 0, operators = 0, deepestChild = 0, deepestPart = 0,
             items = 0;
    uint32_t depth() const {
      return std::max(deepestPart, operators + deepestChild);
    }
    void separate() {
      deepestPart = depth();
      operators = deepestChild = 0;
    }
  };
  std::vector<Frame> frames{Frame{}};
};

/// The classes whose bodies a logical line may be directly in. libtorch's
/// class parser reads an assignment in a class body as a typed constant
/// (`NAME : Final[T] = v`) and dereferences the missing type of an untyped one
/// (`NAME = v`), except for the module's `__parameters__`/`__buffers__` lists,
/// the `__annotations__ = []` an nn.ParameterList's class opens with (its
/// entries follow as `__annotations__["0"] = Tensor`) and an `Enum`'s
/// members, which torch.jit.save writes untyped.
class ClassBodies {
public:
  /// Returns the problem of the logical line at \p start, indented \p width.
  std::optional<std::string> line(std::string_view src, size_t start,
                                  size_t width) {
    while (!open.empty() && width <= open.back().header)
      open.pop_back();
    if (!open.empty() && open.back().body == kUnknown)
      open.back().body = width;
    std::string_view text = src.substr(start);
    text = text.substr(0, text.find('\n'));
    if (text.substr(0, 6) == "class ") {
      size_t base = text.find('(');
      bool isEnum = base != std::string_view::npos &&
                    text.substr(base + 1, 5) == "Enum)";
      open.push_back({width, kUnknown, isEnum});
      return std::nullopt;
    }
    if (open.empty() || open.back().body != width || open.back().isEnum)
      return std::nullopt;
    size_t end = 0;
    while (end < text.size() && isIdentifierChar(text[end]))
      ++end;
    std::string_view name = text.substr(0, end);
    size_t next = text.find_first_not_of(" \t", end);
    bool untypedAssign = end > 0 && next != std::string_view::npos &&
                         text[next] == '=' &&
                         (next + 1 == text.size() || text[next + 1] != '=');
    if (!untypedAssign || name == "__parameters__" || name == "__buffers__" ||
        name == "__annotations__")
      return std::nullopt;
    return "code assigns class attribute '" + std::string(name) +
           "' without a type";
  }

private:
  static constexpr size_t kUnknown = ~size_t{0};
  struct Class {
    size_t header, body;
    bool isEnum;
  };
  std::vector<Class> open;
};

} // namespace

std::optional<std::string> checkCode(std::string_view src,
                                     const ArchiveLimits &limits) {
  ExpressionDepth expression;
  ClassBodies classes;
  std::vector<size_t> indents{0};
  size_t line = 1, i = 0;
  bool lineStart = true;
  auto where = [&] { return " at line " + std::to_string(line); };
  while (i < src.size()) {
    char c = src[i];
    if (lineStart && expression.openBrackets() == 0) {
      // A logical line: its indentation opens or closes blocks.
      size_t width = 0, j = i;
      while (j < src.size() && (src[j] == ' ' || src[j] == '\t'))
        width += src[j++] == '\t' ? 8 : 1;
      lineStart = false;
      i = j;
      if (j >= src.size() || src[j] == '\n' || src[j] == '#' || src[j] == '\r')
        continue; // blank or comment: no block
      while (width < indents.back())
        indents.pop_back();
      if (width > indents.back())
        indents.push_back(width);
      if (indents.size() - 1 > limits.maxBlockDepth)
        return "code nests blocks more than " +
               std::to_string(limits.maxBlockDepth) + " deep" + where();
      if (auto problem = classes.line(src, j, width))
        return *problem + where();
      continue;
    }
    if (c == '\n') {
      ++line;
      ++i;
      if (expression.openBrackets() == 0) {
        expression.reset();
        lineStart = true;
      }
      continue;
    }
    if (c == '\\' && i + 1 < src.size() && src[i + 1] == '\n') {
      i += 2;
      ++line;
      continue;
    }
    if (c == '#') {
      while (i < src.size() && src[i] != '\n')
        ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      bool triple = i + 2 < src.size() && src[i + 1] == c && src[i + 2] == c;
      size_t quote = triple ? 3 : 1;
      i += quote;
      while (i < src.size()) {
        if (src[i] == '\\') {
          i += 2;
          continue;
        }
        if (src[i] == '\n')
          ++line;
        if (src[i] == c &&
            (!triple || (i + 2 < src.size() && src[i + 1] == c &&
                         src[i + 2] == c))) {
          i += quote;
          break;
        }
        ++i;
      }
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      // A number, exponent sign and all: `1.5e-3` has no operator.
      while (i < src.size() &&
             (isIdentifierChar(src[i]) || src[i] == '.' ||
              ((src[i] == '-' || src[i] == '+') &&
               (src[i - 1] == 'e' || src[i - 1] == 'E'))))
        ++i;
      continue;
    }
    if (isIdentifierChar(c)) {
      size_t start = i;
      while (i < src.size() && isIdentifierChar(src[i]))
        ++i;
      if (isOperatorKeyword(src.substr(start, i - start)))
        expression.op();
    } else if (c == '(' || c == '[' || c == '{') {
      expression.op(); // a call, subscript or display is a level
      expression.open();
      ++i;
    } else if (c == ')' || c == ']' || c == '}') {
      expression.close();
      ++i;
    } else if (c == ',' || c == ':') {
      if (expression.separator() > limits.maxDisplayItems)
        return "code has a display of more than " +
               std::to_string(limits.maxDisplayItems) + " items" + where();
      ++i;
    } else if (c == ';' && expression.openBrackets() == 0) {
      expression.reset();
      ++i;
    } else if (c != '\0' && std::strchr("+-*/%@&|^~<>=!.", c)) {
      ++i;
      while (c != '.' && i < src.size() && src[i] != '\0' &&
             std::strchr("+-*/%@&|^~<>=!", src[i]))
        ++i;
      expression.op();
    } else {
      ++i;
    }
    if (expression.current() > limits.maxExpressionDepth)
      return "code nests an expression more than " +
             std::to_string(limits.maxExpressionDepth) + " deep" + where();
  }
  return std::nullopt;
}

} // namespace staticify
