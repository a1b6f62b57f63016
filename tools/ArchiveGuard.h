//===- ArchiveGuard.h - Checks an untrusted archive before libtorch reads it ===//
//
// A TorchScript archive is a zip file of pickles (data.pkl, constants.pkl,
// *.debug_pkl), Python-like source (code/**.py) and tensor data. libtorch 1.13
// trusts it: a deeply nested pickle or expression overflows its recursive
// parsers (a crash, not an error), a REDUCE on an empty stack reads out of
// bounds, a memo id of 4 billion allocates 64 GB, and a DEFLATE entry may
// inflate to any size. This file bounds what each record may cost before
// libtorch sees it. It has no libtorch dependency, so the fuzzer builds it
// with full instrumentation and the unit tests run it on plain bytes.
//
// The limits are far above what torch.jit.save writes for any real model
// (docs/reliability.md gives the numbers) and below what crashes libtorch on
// an 8 MiB stack, with a margin for sanitizer builds.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace staticify {

struct ArchiveLimits {
  /// Records in the zip directory.
  uint64_t maxRecords = 1u << 20;
  /// Bytes of one code or pickle record, the ones parsed by recursive code.
  uint64_t maxParsedRecordBytes = 256u << 20;
  /// A DEFLATE record that inflates past minSizeForInflationRatio inflates
  /// to at most this many times its stored size. torch.jit.save deflates
  /// code and debug records: a constant list of 6,000 zeros inflates 150
  /// times, to 18 KB; its debug record 174 KB from 23 KB.
  uint64_t maxInflationRatio = 64;
  uint64_t minSizeForInflationRatio = 16u << 20;
  /// Bytes inflated from all DEFLATE records together.
  uint64_t maxInflatedBytes = 1u << 30;
  /// Nesting of pickled tuples, lists, dicts and objects (real modules:
  /// under 100; libtorch 1.13 loads 30,000 nested lists).
  unsigned maxPickleDepth = 2000;
  /// Depth of one statement's expression tree in code/ (brackets, operator
  /// chains, attribute and subscript chains; real code: under 50).
  unsigned maxExpressionDepth = 1000;
  /// Nested indented blocks in code/ (real code: under 20).
  unsigned maxBlockDepth = 100;
  /// Items of one bracketed display, `[a, b, ...]` (real code: under 100;
  /// a list of 600,000 literals takes libtorch and the pipeline minutes).
  unsigned maxDisplayItems = 10000;
  /// Bytes of all code records together (Faster R-CNN has 210 KB): the
  /// pipeline's time grows with the program.
  uint64_t maxCodeBytes = 8u << 20;
};

/// What is wrong with an archive, in words a user can act on (no file name:
/// the caller adds it).
class ArchiveProblem : public std::runtime_error {
public:
  explicit ArchiveProblem(const std::string &what, bool limit = false)
      : std::runtime_error(what), limit(limit) {}
  /// A safety limit (not corruption) refused the archive.
  bool exceedsLimit() const { return limit; }

private:
  bool limit;
};

/// One record of the zip directory that libtorch reads: one under the top
/// folder of the directory's first record, which `name` drops
/// ("model/code/__torch__.py" -> "code/__torch__.py"), as libtorch does.
struct ArchiveRecord {
  std::string name;
  uint16_t method = 0; // 0: stored, 8: deflate
  uint64_t compressedSize = 0;
  uint64_t size = 0;
  uint64_t dataOffset = 0;
  /// The CRC-32 the zip directory records for the inflated bytes. libtorch
  /// checks none (its miniz reads without CRC checks), and a DEFLATE stream
  /// that fails to inflate hands back the buffer uninitialized: the caller
  /// checks the CRC of every DEFLATE record it reads (crc32 in zlib).
  uint32_t crc = 0;
};

/// Reads \p n bytes at \p offset into \p out; returns the bytes read.
using ReadAt = std::function<size_t(uint64_t offset, size_t n, char *out)>;

/// Parses and checks the zip directory of an archive of \p fileSize bytes:
/// every record lies inside the file, uses a method libtorch reads, has a
/// name no other record has (ignoring case), and no record libtorch reads
/// inflates past the limits. Returns the records libtorch reads. Throws
/// ArchiveProblem.
std::vector<ArchiveRecord> readArchiveDirectory(const ReadAt &read,
                                                uint64_t fileSize,
                                                const ArchiveLimits &limits);

enum class RecordKind { Code, Pickle, DebugPickle, Other };

/// How libtorch parses the record called \p name (as in ArchiveRecord).
RecordKind recordKind(std::string_view name);

/// A tensor storage a pickle refers to: libtorch reads `numel` elements of
/// `itemSize` bytes from record `<pickle's folder>/<key>` without checking
/// that the record holds them.
struct StorageRef {
  std::string key;
  uint64_t numel = 0;
  uint64_t itemSize = 1;
};

/// Checks that a pickle stays within the opcodes, stack discipline, memo and
/// nesting libtorch's unpickler handles without crashing. Returns the problem,
/// or nothing; adds the storages it refers to to \p storages.
std::optional<std::string> checkPickle(std::string_view data,
                                       const ArchiveLimits &limits,
                                       std::vector<StorageRef> *storages = nullptr);

/// Checks that TorchScript source stays within the expression and block depth
/// libtorch's recursive parser and emitter handle, and has no class-body
/// assignment libtorch's class parser crashes on. Returns the problem (with a
/// 1-based line), or nothing.
std::optional<std::string> checkCode(std::string_view source,
                                     const ArchiveLimits &limits);

} // namespace staticify
