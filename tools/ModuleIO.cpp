//===- ModuleIO.cpp - Loading and saving TorchScript modules safely
//--------===//

#include "tools/ModuleIO.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/import.h>

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

namespace staticify {

namespace {

const char *const kExportHint =
    "export it with torch.jit.script(model).save(path)";

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

namespace {

std::string parentDirectory(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string readTail(std::ifstream &in, std::streamoff size, size_t n) {
  std::streamoff start = std::max<std::streamoff>(0, size - (std::streamoff)n);
  in.seekg(start);
  std::string tail(static_cast<size_t>(size - start), '\0');
  in.read(tail.data(), (std::streamsize)tail.size());
  return tail;
}

} // namespace

void loadLibrary(const std::string &path) {
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    const char *why = dlerror();
    throw UserError("cannot load library '" + path +
                    "': " + (why ? why : "unknown error") +
                    "; check the path given to --load-library");
  }
}

void checkTorchScriptArchive(const std::string &path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    throw UserError("cannot open '" + path + "': " + std::strerror(errno) +
                    "; check the path");
  if (S_ISDIR(st.st_mode))
    throw UserError(
        "'" + path +
        "' is a directory; give the path of a TorchScript .pt file");
  std::ifstream in(path, std::ios::binary);
  if (!in || access(path.c_str(), R_OK) != 0)
    throw UserError("cannot read '" + path + "': " + std::strerror(EACCES) +
                    "; check its permissions");

  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() < 4 || std::memcmp(magic, "PK\x03\x04", 4) != 0) {
    bool pickle =
        in.gcount() >= 1 && static_cast<unsigned char>(magic[0]) == 0x80;
    throw UserError("'" + path + "' is not a TorchScript archive (" +
                    (pickle ? "a legacy torch.save pickle" : "not a zip file") +
                    "); " + kExportHint);
  }
  // The end-of-central-directory record sits in the last 64 KiB + 22 bytes;
  // a truncated archive has lost it.
  std::string tail = readTail(in, st.st_size, 65536 + 22);
  if (tail.find("PK\x05\x06") == std::string::npos)
    throw UserError("'" + path +
                    "' is truncated or corrupt (its zip directory is missing); "
                    "copy or export it again");

  std::vector<std::string> records;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    records = reader.getAllRecords();
  } catch (const std::exception &e) {
    throw UserError("'" + path + "' is a corrupt archive (" +
                    firstLine(e.what()) + "); copy or export it again");
  }
  bool hasCode = std::any_of(records.begin(), records.end(),
                             [](auto &r) { return r.rfind("code/", 0) == 0; });
  bool hasConstants = std::find(records.begin(), records.end(),
                                "constants.pkl") != records.end();
  if (!hasCode || !hasConstants) {
    bool checkpoint =
        std::find(records.begin(), records.end(), "data.pkl") != records.end();
    throw UserError(
        "'" + path + "' is a zip archive but not a TorchScript module" +
        (checkpoint ? " (it looks like a torch.save checkpoint)" : "") + "; " +
        kExportHint);
  }
}

LoadedModule loadModule(const std::string &path) {
  checkTorchScriptArchive(path);
  LoadedModule loaded;
  {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const std::string &record : reader.getAllRecords())
      if (record.rfind("extra/", 0) == 0)
        loaded.extraFiles.emplace(record.substr(6), "");
  }
  try {
    loaded.module = torch::jit::load(path, /*device=*/{}, loaded.extraFiles);
  } catch (const std::exception &e) {
    // c10::Error and the frontend's ErrorReport both land here.
    auto *c10Error = dynamic_cast<const c10::Error *>(&e);
    std::string what = c10Error ? c10Error->what_without_backtrace() : e.what();
    std::smatch m;
    static const std::regex unknownOp(
        R"(Unknown (?:builtin )?op: ([A-Za-z_0-9]+::[A-Za-z_0-9]+))");
    if (std::regex_search(what, m, unknownOp))
      throw UserError("'" + path + "' uses the unknown custom op '" +
                      m[1].str() +
                      "'; load the library that registers it with "
                      "--load-library PATH (for torchvision ops: torchvision's "
                      "_C.so)");
    throw UserError("cannot load '" + path +
                    "' as TorchScript: " + firstLine(what));
  }
  return loaded;
}

void checkOutputPath(const std::string &output, const std::string &input) {
  std::string dir = parentDirectory(output);
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw UserError("cannot write '" + output + "': directory '" + dir +
                    "' does not exist; create it first");
  struct stat out, in;
  if (stat(output.c_str(), &out) == 0) {
    if (S_ISDIR(out.st_mode))
      throw UserError("cannot write '" + output +
                      "': it is a directory; give a file path to -o");
    if (stat(input.c_str(), &in) == 0 && in.st_dev == out.st_dev &&
        in.st_ino == out.st_ino)
      throw UserError("refusing to overwrite the input '" + input +
                      "'; give -o a different path");
  }
}

/// A temporary path next to \p path, so that rename() stays on one
/// filesystem and is atomic.
static std::string temporaryPathFor(const std::string &path) {
  return path + ".tmp." + std::to_string(getpid());
}

static void commit(const std::string &tmp, const std::string &path) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw UserError("cannot write '" + path + "': " + why);
  }
}

void writeFileAtomically(const std::string &path, const std::string &contents) {
  std::string tmp = temporaryPathFor(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << contents;
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw UserError("cannot write '" + path + "': " + std::strerror(errno));
    }
  }
  commit(tmp, path);
}

void saveModuleAtomically(const torch::jit::Module &module,
                          const std::string &path,
                          const torch::jit::ExtraFilesMap &extraFiles) {
  std::string tmp = temporaryPathFor(path);
  try {
    module.save(tmp, extraFiles);
  } catch (const std::exception &e) {
    std::remove(tmp.c_str());
    throw UserError("cannot save '" + path + "': " + firstLine(e.what()));
  }
  commit(tmp, path);
}

std::vector<std::string> methodNames(const torch::jit::Module &module) {
  std::vector<std::string> names;
  for (const auto &method : module.get_methods())
    names.push_back(method.name());
  return names;
}

} // namespace staticify
