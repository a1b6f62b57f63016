//===- archive_fuzzer.cpp - libFuzzer target: the loader and the pipeline -===//
//
// Each input is one archive handed to the loader the CLI uses, then, if it
// loads, the default pipeline on every method. The first byte picks how the
// rest is read:
//   0      the rest is a whole archive (seeds: valid archives);
//   1..4   the rest replaces one record of a valid template archive: its code,
//          data.pkl, constants.pkl or debug record. The archive is rebuilt
//          with correct CRCs, so mutations reach libtorch's parsers instead
//          of stopping at the zip checksum.
// The loader may only fail with a UserError, and the pipeline with nothing:
// anything else (another exception, a crash, a sanitizer report) is a bug.
//
//===----------------------------------------------------------------------===//

#include "passes/Pipeline.h"
#include "tools/ModuleIO.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/serialization/export.h>

#include <cstdio>
#include <cstdlib>

using namespace staticify;

namespace {

struct Template {
  std::vector<std::pair<std::string, std::string>> records;
  /// Indices in `records` of the code, data.pkl, constants.pkl and the code's
  /// debug record, the ones modes 1..4 replace.
  size_t replaced[4] = {};
};

Template makeTemplate() {
  torch::jit::Module m("M");
  m.register_attribute("limits", c10::ListType::ofInts(),
                       c10::List<int64_t>({1, 2, 3}));
  m.register_parameter("w", at::ones({3}), /*is_buffer=*/false);
  m.define(R"(
def forward(self, x, t):
    m = t > 0
    if bool(m.any()):
        x = x + self.w.sum()
    return x[m].sum() + len(self.limits)
)");
  std::string bytes;
  torch::jit::ExportModule(m, [&](const void *data, size_t n) {
    bytes.append(static_cast<const char *>(data), n);
    return n;
  });
  std::istringstream in(bytes);
  caffe2::serialize::PyTorchStreamReader reader(&in);
  Template t;
  for (const std::string &name : reader.getAllRecords()) {
    auto [data, size] = reader.getRecord(name);
    t.records.emplace_back(
        name, std::string(static_cast<const char *>(data.get()), size));
    RecordKind kind = recordKind(name);
    size_t i = t.records.size() - 1;
    if (kind == RecordKind::Code)
      t.replaced[0] = i;
    else if (name == "data.pkl")
      t.replaced[1] = i;
    else if (name == "constants.pkl")
      t.replaced[2] = i;
    else if (kind == RecordKind::DebugPickle)
      t.replaced[3] = i;
  }
  return t;
}

std::string archiveWith(const Template &t, size_t which,
                        std::string_view contents) {
  std::string bytes;
  caffe2::serialize::PyTorchStreamWriter writer(
      [&](const void *data, size_t n) {
        bytes.append(static_cast<const char *>(data), n);
        return n;
      });
  for (size_t i = 0; i < t.records.size(); ++i) {
    const auto &[name, data] = t.records[i];
    if (name == "version")
      continue; // the writer adds it
    std::string_view body = i == t.replaced[which] ? contents : data;
    writer.writeRecord(name, body.data(), body.size());
  }
  writer.writeEndOfFile();
  return bytes;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const Template tmpl = makeTemplate();
  if (size == 0)
    return 0;
  std::string_view rest(reinterpret_cast<const char *>(data) + 1, size - 1);
  unsigned mode = data[0] % 5;
  std::string archive =
      mode == 0 ? std::string(rest) : archiveWith(tmpl, mode - 1, rest);
  LoadedModule loaded;
  try {
    loaded = loadModuleFromBytes(std::move(archive), "input");
  } catch (const UserError &) {
    return 0; // refused with a message: what should happen
  }
  for (const auto &method : loaded.module.get_methods()) {
    auto graph = torch::jit::toGraphFunction(method.function()).graph();
    runPipeline(graph, method.name(), defaultPipeline(/*inlineCalls=*/true));
  }
  return 0;
}
