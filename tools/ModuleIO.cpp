//===- ModuleIO.cpp - Loading and saving TorchScript modules safely -------===//

#include "tools/ModuleIO.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/mobile/type_parser.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <unordered_map>
#include <unordered_set>

namespace staticify {

namespace {

const char *const kExportHint =
    "export it with torch.jit.script(model).save(path)";
const char *const kCopyHint = "copy or export it again";

std::string inQuotes(const std::string &path) { return "'" + path + "'"; }

} // namespace

std::string firstLine(const std::string &text) {
  size_t start = text.find_first_not_of("\n ");
  if (start == std::string::npos)
    return "unknown error";
  std::string line = text.substr(start, text.find('\n', start) - start);
  while (!line.empty() &&
         (line.back() == '.' || line.back() == ' ' || line.back() == ':'))
    line.pop_back();
  return line;
}

std::string printable(const std::string &text, bool keepNewlines) {
  std::string out;
  auto escape = [&](unsigned char c) {
    const char *hex = "0123456789abcdef";
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && !(keepNewlines && c == '\n')) || c == 0x7f)
        escape(c);
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence: a lead byte and its continuation bytes.
    size_t length = c >= 0xf0 && c < 0xf5 ? 4
                    : c >= 0xe0           ? 3
                    : c >= 0xc2           ? 2
                                          : 0;
    bool valid = length > 0 && i + length <= text.size();
    for (size_t k = 1; valid && k < length; ++k)
      valid = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
    if (!valid) {
      escape(c);
      ++i;
      continue;
    }
    out.append(text, i, length);
    i += length;
  }
  return out;
}

std::string libtorchText(const std::exception &e) {
  auto *c10Error = dynamic_cast<const c10::Error *>(&e);
  return c10Error ? c10Error->what_without_backtrace() : e.what();
}

void loadLibrary(const std::string &path, const std::string &fixIfNotFound) {
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    const char *error = dlerror();
    std::string why = error ? error : "unknown error";
    // pip wheels' op libraries (torchvision/_C.so) are Python extensions:
    // they need libtorch_python.so, which needs a Python interpreter.
    std::string fix =
        why.find("libtorch_python") != std::string::npos
            ? "it is a Python extension module, which loads only inside "
              "Python; "
              "give --load-library a C++ build of the ops instead (for "
              "torchvision: libtorchvision.so from its CMake build)"
            : fixIfNotFound;
    throw UserError("cannot load library " + inQuotes(path) + ": " + why +
                    "; " + fix);
  }
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {

/// An archive on disk, read with pread: no stdio buffer, no seek state.
class FileReader final : public caffe2::serialize::ReadAdapterInterface {
public:
  FileReader(int fd, size_t size) : fd(fd), bytes(size) {}
  ~FileReader() override { ::close(fd); }
  size_t size() const override { return bytes; }
  size_t read(uint64_t pos, void *buf, size_t n,
              const char * /*what*/ = "") const override {
    size_t done = 0;
    while (done < n) {
      ssize_t got = ::pread(fd, static_cast<char *>(buf) + done, n - done,
                            static_cast<off_t>(pos + done));
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0)
        break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

private:
  int fd;
  size_t bytes;
};

/// An archive held in memory (the fuzzer's, or one rebuilt without its bad
/// debug records).
class BytesReader final : public caffe2::serialize::ReadAdapterInterface {
public:
  explicit BytesReader(std::string bytes) : bytes(std::move(bytes)) {}
  size_t size() const override { return bytes.size(); }
  size_t read(uint64_t pos, void *buf, size_t n,
              const char * /*what*/ = "") const override {
    if (pos >= bytes.size())
      return 0;
    n = std::min<size_t>(n, bytes.size() - pos);
    std::memcpy(buf, bytes.data() + pos, n);
    return n;
  }

private:
  std::string bytes;
};

using Reader = std::shared_ptr<caffe2::serialize::ReadAdapterInterface>;

/// Opens \p path for reading if it is a regular file. O_NONBLOCK: opening a
/// FIFO must not wait for a writer before it can be refused.
Reader openRegularFile(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw UserError("cannot open " + inQuotes(path) + ": " +
                    std::strerror(errno) + "; check the path");
  if (S_ISDIR(st.st_mode))
    throw UserError(inQuotes(path) +
                    " is a directory; give the path of a TorchScript .pt file");
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw UserError("cannot read " + inQuotes(path) + ": " +
                    std::strerror(errno) + "; check its permissions");
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    const char *kind = S_ISFIFO(st.st_mode)   ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    throw UserError(inQuotes(path) + " is " + kind +
                    "; give the path of a TorchScript .pt file");
  }
  return std::make_shared<FileReader>(fd, static_cast<size_t>(st.st_size));
}

/// "ns::name" from libtorch's "Unknown builtin op: ns::name" (or "Unknown
/// op: ..."). By hand, not std::regex: the text may quote a hostile line.
std::optional<std::string> unknownOp(const std::string &text) {
  for (const char *prefix : {"Unknown builtin op: ", "Unknown op: "}) {
    size_t at = text.find(prefix);
    if (at == std::string::npos)
      continue;
    size_t start = at + std::strlen(prefix), end = start;
    auto opChar = [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
             c == ':';
    };
    while (end < text.size() && end - start < 256 && opChar(text[end]))
      ++end;
    std::string op = text.substr(start, end - start);
    size_t sep = op.find("::");
    if (sep != std::string::npos && sep > 0 && sep + 2 < op.size())
      return op;
  }
  return std::nullopt;
}

/// "ns.Name" from libtorch's "Unknown type name
/// '__torch__.torch.classes.ns.Name'": a custom class no loaded library
/// registers. By hand, as unknownOp.
std::optional<std::string> unknownClass(const std::string &text) {
  const std::string prefix = "Unknown type name '__torch__.torch.classes.";
  size_t at = text.find(prefix);
  if (at == std::string::npos)
    return std::nullopt;
  size_t start = at + prefix.size(), end = start;
  auto nameChar = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  };
  while (end < text.size() && end - start < 256 && nameChar(text[end]))
    ++end;
  if (end == start || end >= text.size() || text[end] != '\'')
    return std::nullopt;
  return text.substr(start, end - start);
}

/// Turns libtorch's failure to load into our words; its own text is printed
/// only with --verbose. Known causes get their own remedy.
[[noreturn]] void failedToLoad(const std::string &name, const std::string &text,
                               const LoadOptions &options) {
  if (options.verbose)
    std::cerr << "staticify: note: libtorch says:\n"
              << printable(text, /*keepNewlines=*/true) << "\n";
  if (auto op = unknownOp(text)) {
    if (op->rfind("aten::", 0) != 0 && op->rfind("prim::", 0) != 0) {
      // The libraries we know by their namespace.
      std::string library =
          op->rfind("staticify::", 0) == 0
              ? "staticify's runtime library, libstaticify_runtime.so"
          : op->rfind("torchvision::", 0) == 0 ? "torchvision's _C.so"
                                                : "the library that registers it";
      throw UserError(inQuotes(name) + " uses the unknown custom op '" + *op +
                      "'; load " + library + " with --load-library PATH");
    }
    throw UserError(inQuotes(name) + " uses the op '" + *op +
                    "', which this libtorch does not have; export it with "
                    "the PyTorch version staticify is built against");
  }
  if (auto cls = unknownClass(text))
    throw UserError(inQuotes(name) + " uses the custom class '" + *cls +
                    "', which no loaded library registers; load the library "
                    "that registers it with --load-library PATH (for "
                    "staticify's own classes: libstaticify_runtime.so)");
  bool archive = text.find("PytorchStreamReader") != std::string::npos ||
                 text.find("inline_container") != std::string::npos ||
                 text.find("crc32") != std::string::npos;
  throw UserError(
      inQuotes(name) +
      (archive ? " is truncated or corrupt (a record cannot be read); "
               : " is not a TorchScript module libtorch can load (its code, "
                 "constants or attributes are malformed); ") +
      kCopyHint + " (--verbose shows libtorch's message)");
}

/// The record \p name, read through libtorch's zip reader (which inflates
/// and checks the CRC).
uint32_t crcOf(const std::string &bytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  // zlib takes at most 4 GiB a call.
  for (size_t at = 0; at < bytes.size();) {
    uInt n = static_cast<uInt>(std::min<size_t>(bytes.size() - at, 1u << 30));
    crc = ::crc32(crc, reinterpret_cast<const Bytef *>(bytes.data() + at), n);
    at += n;
  }
  return static_cast<uint32_t>(crc);
}

std::string readRecord(caffe2::serialize::PyTorchStreamReader &reader,
                       const std::string &archive, const std::string &name,
                       const LoadOptions &options) {
  try {
    auto [data, size] = reader.getRecord(name);
    return std::string(static_cast<const char *>(data.get()), size);
  } catch (const std::exception &e) {
    if (options.verbose)
      std::cerr << "staticify: note: libtorch says:\n"
                << printable(libtorchText(e), /*keepNewlines=*/true) << "\n";
    throw UserError(inQuotes(archive) + " is truncated or corrupt (record '" +
                    name + "' cannot be read); " + kCopyHint);
  }
}

/// What libtorch's source-range reader would index out of bounds in a debug
/// record that parses as a pickle (it checks none of it, and the records are
/// read lazily, when a location is first asked for or the module is saved).
/// Returns the problem, or nothing. Formats: a tuple of (offset, range, tag)
/// records, or ("FORMAT_WITH_STRING_TABLE", texts, records); a range is
/// (source, start, end); a source is (text, file, line) or, with a string
/// table, (line indices, file index, line).
std::optional<std::string> checkSourceRanges(const std::string &bytes) {
  c10::IValue root;
  try {
    root = torch::jit::unpickle(bytes.data(), bytes.size(), nullptr, {},
                                c10::parseType);
  } catch (const std::exception &) {
    return "it does not unpickle";
  }
  auto tupleOf = [](const c10::IValue &v,
                    size_t n) -> const c10::ivalue::TupleElements * {
    if (!v.isTuple())
      return nullptr;
    const auto &e = v.toTupleRef().elements();
    return e.size() >= n ? &e : nullptr;
  };
  const auto *top = tupleOf(root, 1);
  if (!top)
    return "it is not a non-empty tuple";
  std::vector<size_t> textSizes;
  const c10::IValue *records = &root;
  if ((*top)[0].isString() &&
      (*top)[0].toStringRef() == "FORMAT_WITH_STRING_TABLE") {
    const auto *texts = top->size() >= 3 ? tupleOf((*top)[1], 0) : nullptr;
    if (!texts)
      return "its string table is malformed";
    for (const c10::IValue &t : *texts) {
      if (!t.isString())
        return "its string table holds a non-string";
      textSizes.push_back(t.toStringRef().size());
    }
    records = &(*top)[2];
  }
  const auto *entries = tupleOf(*records, 0);
  if (!entries)
    return "its records are not a tuple";
  for (const c10::IValue &entry : *entries) {
    const auto *e = tupleOf(entry, 2);
    const auto *range = e ? tupleOf((*e)[1], 3) : nullptr;
    const auto *source = range ? tupleOf((*range)[0], 3) : nullptr;
    if (!e || !(*e)[0].isInt() || !range || range->size() != 3 ||
        !(*range)[1].isInt() || !(*range)[2].isInt() || !source ||
        source->size() != 3 || !(*source)[2].isInt())
      return "a record is malformed";
    int64_t length = 0;
    if (!textSizes.empty()) {
      if (!(*source)[0].isIntList() || !(*source)[1].isInt())
        return "a source is malformed";
      auto inTable = [&](int64_t i) {
        return i >= 0 && static_cast<size_t>(i) < textSizes.size();
      };
      if (!inTable((*source)[1].toInt()))
        return "a file name is outside the string table";
      for (int64_t i : (*source)[0].toIntList()) {
        if (!inTable(i))
          return "a source line is outside the string table";
        length += static_cast<int64_t>(textSizes[i]);
      }
    } else {
      if (!(*source)[0].isString() ||
          !((*source)[1].isString() || (*source)[1].isNone()))
        return "a source is malformed";
      length = static_cast<int64_t>((*source)[0].toStringRef().size());
    }
    // torch.jit.save itself writes ranges one past a source's end (an empty
    // line's range is 0..1): allow a newline per line and one more.
    int64_t start = (*range)[1].toInt(), end = (*range)[2].toInt();
    int64_t slack =
        1 + (textSizes.empty()
                 ? 0
                 : static_cast<int64_t>((*source)[0].toIntList().size()));
    if (start < 0 || start > end || end > length + slack)
      return "a range lies outside its source";
  }
  return std::nullopt;
}

/// libtorch's zip reader finds records ignoring ASCII case.
std::string lowerCase(std::string name) {
  for (char &c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

bool sameRecordName(const std::string &a, const std::string &b) {
  return lowerCase(a) == lowerCase(b);
}

/// Whether each storage a pickle refers to is in a record that holds it:
/// libtorch reads numel * itemsize bytes from a record of any size.
std::optional<std::string>
checkStorages(const std::string &pickle,
              const std::vector<StorageRef> &storages,
              const std::unordered_map<std::string, uint64_t> &recordSizes) {
  std::string folder = pickle.substr(0, pickle.size() - 4) + "/"; // ".pkl"
  // torch.jit.save (2.x) writes a traced module's example inputs without
  // their data (skip_tensor_data), and libtorch reads them back only when
  // asked to restore shapes, which staticify never does: their records are
  // empty by design.
  bool dataSkipped = sameRecordName(pickle, "traced_inputs.pkl");
  for (const StorageRef &s : storages) {
    std::string name = folder + s.key;
    if (s.numel == 0)
      continue;
    auto it = recordSizes.find(lowerCase(name));
    if (it == recordSizes.end())
      return "record '" + name + "', which holds a tensor, is missing";
    if (dataSkipped && it->second == 0)
      continue;
    if (s.numel > it->second / s.itemSize)
      return "record '" + name + "' holds " + std::to_string(it->second) +
             " bytes, but its tensor needs " + std::to_string(s.numel) + " x " +
             std::to_string(s.itemSize);
  }
  return std::nullopt;
}

/// Whether every tensor reachable from the module (its attributes, and the
/// constants of every function) lies inside its storage, and every list and
/// dict holds values of its declared types. The unpickler sets sizes, strides
/// and offsets from the file without checking them (a tensor past its storage
/// reads memory that is not its own), and builds a typed list from whatever
/// values the pickle names (`build_tensorlist` of ints loads, and libtorch
/// fails on it later, when the module is saved).
std::optional<std::string> checkValues(const torch::jit::Module &module) {
  std::unordered_set<const void *> seen;
  std::optional<std::string> problem;
  std::function<void(const c10::IValue &)> visit = [&](const c10::IValue &v) {
    if (problem)
      return;
    if (v.isTensor()) {
      const at::Tensor &t = v.toTensor();
      // A quantized dtype from the storage's class alone (QInt8Storage for
      // a LongStorage) leaves the tensor without quantization parameters:
      // it loads, and libtorch asserts when it is saved.
      if (t.defined() && t.is_quantized()) {
        try {
          (void)t.qscheme();
        } catch (const std::exception &) {
          problem = "a quantized tensor of dtype " +
                    std::string(c10::toString(t.scalar_type())) +
                    " holds no quantization parameters";
          return;
        }
      }
      if (!t.defined() || t.layout() != at::kStrided || !t.has_storage() ||
          t.numel() == 0)
        return;
      // The last element's offset, in elements, with overflow checked.
      __int128 last = t.storage_offset();
      bool ok = last >= 0;
      for (int64_t d = 0; ok && d < t.dim(); ++d) {
        ok = t.size(d) > 0 && t.stride(d) >= 0;
        last += static_cast<__int128>(t.size(d) - 1) * t.stride(d);
      }
      __int128 bytes = (last + 1) * static_cast<__int128>(t.element_size());
      if (!ok || bytes > static_cast<__int128>(t.storage().nbytes()))
        problem = "a tensor of sizes " + c10::str(t.sizes()) + " and strides " +
                  c10::str(t.strides()) + " reads past its storage of " +
                  std::to_string(t.storage().nbytes()) + " bytes";
      return;
    }
    if (v.isObject() || v.isList() || v.isGenericDict() || v.isTuple()) {
      if (!seen.insert(v.internalToPointer()).second)
        return;
      if (v.isObject())
        for (const c10::IValue &slot : v.toObjectRef().slots())
          visit(slot);
      else if (v.isList()) {
        c10::TypePtr element = v.toList().elementType();
        for (const c10::IValue &item : v.toListRef()) {
          if (!problem && !item.type()->isSubtypeOf(*element))
            problem = "a list of " + element->repr_str() + " holds a value of "
                      "type " + item.type()->repr_str();
          visit(item);
        }
      }
      else if (v.isTuple())
        for (const c10::IValue &item : v.toTupleRef().elements())
          visit(item);
      else {
        c10::Dict<c10::IValue, c10::IValue> dict = v.toGenericDict();
        for (const auto &entry : dict) {
          if (!problem && (!entry.key().type()->isSubtypeOf(*dict.keyType()) ||
                           !entry.value().type()->isSubtypeOf(
                               *dict.valueType())))
            problem = "a dict of " + dict.keyType()->repr_str() + " to " +
                      dict.valueType()->repr_str() + " holds an item of " +
                      entry.key().type()->repr_str() + " to " +
                      entry.value().type()->repr_str();
          visit(entry.key());
          visit(entry.value());
        }
      }
    }
  };
  visit(module._ivalue());
  for (torch::jit::Function *f :
       module._ivalue()->compilation_unit()->get_functions()) {
    if (!f->isGraphFunction())
      continue;
    for (torch::jit::Node *node :
         torch::jit::toGraphFunction(*f).graph()->nodes())
      if (node->kind() == c10::prim::Constant && node->outputs().size() == 1)
        if (auto value = torch::jit::toIValue(node->output()))
          visit(*value);
  }
  return problem;
}

/// The record's bytes, or nothing when libtorch's zip reader cannot read it
/// (inflate it, check its CRC).
std::optional<std::string> tryRead(caffe2::serialize::PyTorchStreamReader &reader,
                                   const std::string &name) {
  try {
    auto [data, size] = reader.getRecord(name);
    return std::string(static_cast<const char *>(data.get()), size);
  } catch (const std::exception &) {
    return std::nullopt;
  }
}

/// A copy of the archive's \p records without those in \p drop. The names
/// come from the guard's directory, not libtorch's getAllRecords(), which
/// throws on an entry outside the archive's folder (one libtorch never reads).
Reader rebuildWithout(caffe2::serialize::PyTorchStreamReader &reader,
                      const std::vector<ArchiveRecord> &records,
                      const std::vector<std::string> &drop) {
  std::string bytes;
  {
    caffe2::serialize::PyTorchStreamWriter writer(
        [&](const void *data, size_t n) {
          bytes.append(static_cast<const char *>(data), n);
          return n;
        });
    writer.setMinVersion(reader.version());
    for (const ArchiveRecord &r : records) {
      const std::string &name = r.name;
      // The writer adds its own version record.
      if (name == "version" ||
          std::find(drop.begin(), drop.end(), name) != drop.end())
        continue;
      // A record that cannot be read is one torch::jit::load never reads
      // (those it reads were read and checked already): left out, as
      // libtorch would leave it.
      std::tuple<at::DataPtr, size_t> record;
      try {
        record = reader.getRecord(name);
      } catch (const std::exception &) {
        continue;
      }
      writer.writeRecord(name, std::get<0>(record).get(), std::get<1>(record));
    }
    writer.writeEndOfFile();
  }
  return std::make_shared<BytesReader>(std::move(bytes));
}

LoadedModule loadArchive(Reader in, const std::string &name,
                         const LoadOptions &options) {
  char magic[4] = {};
  size_t got = in->read(0, magic, 4);
  if (got < 4 || std::memcmp(magic, "PK\x03\x04", 4) != 0) {
    bool pickle = got >= 1 && static_cast<unsigned char>(magic[0]) == 0x80;
    throw UserError(inQuotes(name) + " is not a TorchScript archive (" +
                    (pickle ? "a legacy torch.save pickle" : "not a zip file") +
                    "); " + kExportHint);
  }

  std::vector<ArchiveRecord> records;
  try {
    records = readArchiveDirectory(
        [&](uint64_t offset, size_t n, char *out) {
          return in->read(offset, out, n);
        },
        in->size(), options.limits);
  } catch (const ArchiveProblem &p) {
    if (p.exceedsLimit())
      throw UserError(inQuotes(name) + " exceeds a safety limit (" + p.what() +
                      "); torch.jit.save does not write such archives: "
                      "export it again (docs/reliability.md lists the limits)");
    throw UserError(inQuotes(name) + " is truncated or corrupt (" + p.what() +
                    "); " + kCopyHint);
  }
  auto has = [&](auto predicate) {
    return std::any_of(records.begin(), records.end(), predicate);
  };
  bool hasCode = has([](const ArchiveRecord &r) {
    return recordKind(r.name) == RecordKind::Code;
  });
  bool hasConstants = has([](const ArchiveRecord &r) {
    return sameRecordName(r.name, "constants.pkl");
  });
  if (!hasCode || !hasConstants) {
    bool checkpoint = has([](const ArchiveRecord &r) {
      return sameRecordName(r.name, "data.pkl");
    });
    throw UserError(
        inQuotes(name) + " is a zip archive but not a TorchScript module" +
        (checkpoint ? " (it looks like a torch.save checkpoint)" : "") + "; " +
        kExportHint);
  }

  std::shared_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  try {
    reader = std::make_shared<caffe2::serialize::PyTorchStreamReader>(in);
  } catch (const std::exception &e) {
    failedToLoad(name, libtorchText(e), options);
  }

  // What libtorch parses recursively is checked first. Source locations are
  // a convenience: a bad debug record is dropped with a warning.
  // Record sizes by name, once: every tensor storage is looked up here.
  std::unordered_map<std::string, uint64_t> recordSizes;
  for (const ArchiveRecord &r : records)
    recordSizes.emplace(lowerCase(r.name), r.size);
  LoadedModule loaded;
  std::vector<std::string> badDebugRecords;
  for (const ArchiveRecord &r : records) {
    RecordKind kind = recordKind(r.name);
    if (r.name.rfind("extra/", 0) == 0) {
      std::string extra = r.name.substr(6);
      // A directory entry holds no file (libtorch's writer refuses the
      // name); torch.jit.save never writes one.
      std::optional<std::string> unusable;
      if (extra.empty() || extra.back() == '/')
        unusable = "a directory entry, not an extra file";
      else if (std::optional<std::string> bytes = tryRead(*reader, r.name);
               !bytes)
        unusable = "an extra file that cannot be read";
      else if (r.method == 8 && crcOf(*bytes) != r.crc)
        unusable = "an extra file whose compressed bytes are corrupt";
      if (unusable)
        loaded.warnings.push_back(inQuotes(name) + ": entry '" + r.name +
                                  "' is " + *unusable +
                                  " (torch.jit.load never reads it): it is "
                                  "not copied to the output");
      else
        loaded.extraFiles.emplace(std::move(extra), "");
      continue;
    }
    // libtorch inflates a DEFLATE record without checking the result: a
    // stream that fails leaves its buffer uninitialized, read differently
    // by every reader. Each one is inflated here and checked against its CRC.
    // Of the other records, libtorch reads the tensor storages.
    bool storage = r.name.rfind("data/", 0) == 0 ||
                   r.name.rfind("constants/", 0) == 0;
    bool deflated = r.method == 8;
    if (kind == RecordKind::Other && !(deflated && storage))
      continue;
    std::string bytes = readRecord(*reader, name, r.name, options);
    std::optional<std::string> problem;
    bool corrupt = deflated && crcOf(bytes) != r.crc;
    if (corrupt)
      problem = "its compressed bytes do not inflate to the bytes its zip "
                "directory describes";
    else if (kind == RecordKind::Other)
      continue;
    std::vector<StorageRef> storages;
    if (!problem)
      problem = kind == RecordKind::Code
                    ? checkCode(bytes, options.limits)
                    : checkPickle(bytes, options.limits, &storages);
    if (!problem && kind == RecordKind::Pickle)
      problem = checkStorages(r.name, storages, recordSizes);
    if (!problem && kind == RecordKind::DebugPickle)
      problem = checkSourceRanges(bytes);
    if (!problem)
      continue;
    if (kind == RecordKind::DebugPickle) {
      badDebugRecords.push_back(r.name);
      loaded.warnings.push_back(
          inQuotes(name) + ": record '" + r.name + "' is unusable (" +
          *problem +
          "); findings point into the archive's code, not the Python "
          "source");
      continue;
    }
    if (corrupt)
      throw UserError(inQuotes(name) + " is truncated or corrupt (record '" +
                      r.name + "': " + *problem + "); " + kCopyHint);
    throw UserError(inQuotes(name) + " cannot be loaded safely: record '" +
                    r.name + "': " + *problem +
                    "; torch.jit.save does not write this: " + kCopyHint);
  }
  if (!badDebugRecords.empty()) {
    try {
      in = rebuildWithout(*reader, records, badDebugRecords);
    } catch (const std::exception &e) {
      failedToLoad(name, libtorchText(e), options);
    }
  }
  reader.reset();

  try {
    loaded.module = torch::jit::load(in, /*device=*/{}, loaded.extraFiles);
  } catch (const std::bad_alloc &) {
    throw UserError("not enough memory to load " + inQuotes(name));
  } catch (const std::exception &e) {
    // c10::Error and the frontend's ErrorReport both land here.
    failedToLoad(name, libtorchText(e), options);
  }
  if (auto problem = checkValues(loaded.module))
    throw UserError(inQuotes(name) + " is truncated or corrupt (" + *problem +
                    "); " + kCopyHint);
  return loaded;
}

} // namespace

LoadedModule loadModule(const std::string &path, const LoadOptions &options) {
  return loadArchive(openRegularFile(path), path, options);
}

LoadedModule loadModuleFromBytes(std::string bytes, const std::string &name,
                                 const LoadOptions &options) {
  return loadArchive(std::make_shared<BytesReader>(std::move(bytes)), name,
                     options);
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {

std::string parentDirectory(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// A file written through write(2), every error kept: libtorch's writer
/// throws from its destructor on a short write (std::terminate), so the
/// callback it gets always accepts and the error is read afterwards.
class TemporaryFile {
public:
  TemporaryFile(const std::string &temporary, const std::string &path)
      : path(path) {
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                0666);
    if (fd < 0)
      throw UserError("cannot write " + inQuotes(path) + ": " +
                      std::strerror(errno));
  }
  ~TemporaryFile() {
    if (fd >= 0)
      ::close(fd);
  }

  size_t write(const void *data, size_t n) {
    const char *p = static_cast<const char *>(data);
    for (size_t left = n; left > 0 && error == 0;) {
      ssize_t done = ::write(fd, p, left);
      if (done < 0 && errno == EINTR)
        continue;
      if (done <= 0) {
        error = done < 0 ? errno : ENOSPC;
        break;
      }
      p += done;
      left -= static_cast<size_t>(done);
    }
    return n;
  }

  /// Flushes to disk and closes; throws UserError on any error seen.
  void finish() {
    if (error == 0 && ::fsync(fd) != 0 && errno != EINVAL)
      error = errno;
    if (::close(fd) != 0 && error == 0)
      error = errno;
    fd = -1;
    if (error != 0)
      throw UserError("cannot write " + inQuotes(path) + ": " +
                      std::strerror(error) +
                      "; free space or choose another place (nothing was "
                      "written)");
  }

private:
  std::string path;
  int fd = -1;
  int error = 0;
};

} // namespace

void checkOutputPath(const std::string &output, const std::string &input,
                     const std::string &option) {
  std::string dir = parentDirectory(output);
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    throw UserError("cannot write " + inQuotes(output) + " (" + option +
                    "): '" + dir + "' is a file, not a directory; give " +
                    option + " a path in a directory");
  if (::stat(dir.c_str(), &st) != 0)
    throw UserError("cannot write " + inQuotes(output) + " (" + option +
                    "): directory '" + dir +
                    "' does not exist; create it "
                    "first");
  struct stat out, in;
  if (::stat(output.c_str(), &out) == 0) {
    if (S_ISDIR(out.st_mode))
      throw UserError("cannot write " + inQuotes(output) +
                      ": it is a "
                      "directory; give a file path to " +
                      option);
    if (!S_ISREG(out.st_mode))
      throw UserError("cannot write " + inQuotes(output) +
                      ": it is not a "
                      "regular file; give a file path to " +
                      option);
    if (::stat(input.c_str(), &in) == 0 && in.st_dev == out.st_dev &&
        in.st_ino == out.st_ino)
      throw UserError("refusing to overwrite the input " + inQuotes(input) +
                      "; give " + option + " a different path");
  }
}

std::string OutputFiles::temporaryPath(const std::string &path, long pid) {
  // Next to the file, so that rename() stays on one filesystem.
  return path + ".tmp." + std::to_string(pid);
}

OutputFiles::~OutputFiles() {
  for (const Pending &p : pending)
    std::remove(p.temporary.c_str());
}

void OutputFiles::addText(const std::string &path,
                          const std::string &contents) {
  std::string temporary = temporaryPath(path, ::getpid());
  TemporaryFile file(temporary, path);
  pending.push_back({temporary, path});
  file.write(contents.data(), contents.size());
  file.finish();
}

void OutputFiles::addModule(const std::string &path,
                            const torch::jit::Module &module,
                            const torch::jit::ExtraFilesMap &extraFiles) {
  std::string temporary = temporaryPath(path, ::getpid());
  TemporaryFile file(temporary, path);
  pending.push_back({temporary, path});
  try {
    torch::jit::ExportModule(
        module, [&](const void *data, size_t n) { return file.write(data, n); },
        extraFiles);
  } catch (const std::exception &e) {
    if (verbose)
      std::cerr << "staticify: note: libtorch says:\n"
                << printable(libtorchText(e), /*keepNewlines=*/true) << "\n";
    throw UserError("cannot save " + inQuotes(path) +
                    ": libtorch could not serialize the module (--verbose "
                    "shows its message)");
  }
  file.finish();
}

void OutputFiles::commit() {
  // The renames are one step: the terminal's signals wait until it is done,
  // and a failed rename puts back what the earlier ones replaced.
  sigset_t interrupts, previous;
  sigemptyset(&interrupts);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    sigaddset(&interrupts, sig);
  ::sigprocmask(SIG_BLOCK, &interrupts, &previous);
  struct Renamed {
    std::string path, backup; // backup: the file it replaced, or empty
  };
  std::vector<Renamed> renamed;
  std::string failedPath, why;
  for (const Pending &p : pending) {
    std::string backup = p.temporary + ".old";
    bool kept = ::link(p.path.c_str(), backup.c_str()) == 0;
    if (!kept && errno != ENOENT) {
      failedPath = p.path;
      why = std::strerror(errno);
      break;
    }
    if (std::rename(p.temporary.c_str(), p.path.c_str()) != 0) {
      why = std::strerror(errno);
      failedPath = p.path;
      if (kept)
        ::unlink(backup.c_str());
      break;
    }
    renamed.push_back({p.path, kept ? backup : std::string()});
  }
  for (const Renamed &r : renamed) {
    if (failedPath.empty()) {
      if (!r.backup.empty())
        ::unlink(r.backup.c_str());
    } else if (!r.backup.empty()) {
      std::rename(r.backup.c_str(), r.path.c_str());
    } else {
      ::unlink(r.path.c_str());
    }
  }
  if (failedPath.empty())
    pending.clear(); // else the destructor removes every temporary left
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  if (!failedPath.empty())
    throw UserError("cannot write " + inQuotes(failedPath) + ": " + why +
                    "; nothing was written");
}

std::vector<std::string> methodNames(const torch::jit::Module &module) {
  std::vector<std::string> names;
  for (const auto &method : module.get_methods())
    names.push_back(method.name());
  return names;
}

} // namespace staticify
