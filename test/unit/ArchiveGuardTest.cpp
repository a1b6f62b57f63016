//===- ArchiveGuardTest.cpp - The checks an archive passes before libtorch ===//
//
// Valid inputs come from libtorch's own writers (the zip writer, the
// pickler), so the guard is checked against what torch.jit.save really
// writes; hostile ones are made by hand, each of a class that crashed or
// hung libtorch 1.13 before the guard (docs/reliability.md).
//
//===----------------------------------------------------------------------===//

#include "tools/ArchiveGuard.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

using namespace staticify;
using namespace std::string_literals;

namespace {

std::string
zipOf(const std::vector<std::pair<std::string, std::string>> &records) {
  std::string bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void *d, size_t n) {
    bytes.append(static_cast<const char *>(d), n);
    return n;
  });
  for (const auto &[name, data] : records)
    writer.writeRecord(name, data.data(), data.size());
  writer.writeEndOfFile();
  return bytes;
}

std::vector<ArchiveRecord> directoryOf(const std::string &bytes,
                                       const ArchiveLimits &limits = {}) {
  return readArchiveDirectory(
      [&](uint64_t offset, size_t n, char *out) -> size_t {
        if (offset >= bytes.size())
          return 0;
        n = std::min<size_t>(n, bytes.size() - offset);
        std::memcpy(out, bytes.data() + offset, n);
        return n;
      },
      bytes.size(), limits);
}

/// The offset of the central directory entry of the first record.
size_t centralEntry(const std::string &bytes) {
  size_t at = bytes.find(std::string("PK\x01\x02", 4));
  EXPECT_NE(at, std::string::npos);
  return at;
}

void put32(std::string &bytes, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    bytes[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

std::string pickled(const c10::IValue &value) {
  std::vector<at::Tensor> tensors;
  std::vector<char> data = torch::jit::pickle(value, &tensors);
  return std::string(data.begin(), data.end());
}

c10::IValue nestedList(int depth) {
  c10::impl::GenericList list(c10::AnyType::get());
  c10::IValue v = list;
  for (int i = 1; i < depth; ++i) {
    c10::impl::GenericList outer(c10::AnyType::get());
    outer.push_back(v);
    v = outer;
  }
  return v;
}

std::string repeat(const std::string &s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i)
    out += s;
  return out;
}

} // namespace

TEST(ArchiveGuardTest, ReadsWhatTheWriterWrites) {
  std::string bytes = zipOf({{"code/__torch__.py", "x = 1\n"},
                             {"constants.pkl", pickled(c10::IValue(3))},
                             {"data/0", std::string(1000, '\7')}});
  std::vector<ArchiveRecord> records = directoryOf(bytes);
  // Ours in order, then the writer's own (version; from 2.x also byteorder
  // and .data/serialization_id).
  ASSERT_GE(records.size(), 4u);
  EXPECT_EQ(records[0].name, "code/__torch__.py");
  EXPECT_EQ(records[1].name, "constants.pkl");
  EXPECT_TRUE(
      std::any_of(records.begin() + 3, records.end(),
                  [](const ArchiveRecord &r) { return r.name == "version"; }));
  EXPECT_EQ(records[0].size, 6u);
  EXPECT_EQ(bytes.substr(records[0].dataOffset, 6), "x = 1\n");
  EXPECT_EQ(records[0].crc, 0x8bf6893bu); // zlib.crc32(b"x = 1\n")
  EXPECT_EQ(records[2].name, "data/0");
  EXPECT_EQ(records[2].method, 0);
}

TEST(ArchiveGuardTest, RefusesTruncatedAndLyingArchives) {
  std::string bytes = zipOf({{"code/a.py", "x = 1\n"}});
  EXPECT_THROW(directoryOf(bytes.substr(0, bytes.size() / 2)), ArchiveProblem);
  EXPECT_THROW(directoryOf(bytes.substr(0, 10)), ArchiveProblem);
  // A record whose size runs past the end of the file.
  std::string lying = bytes;
  size_t entry = centralEntry(lying);
  put32(lying, entry + 20, 1u << 30);
  put32(lying, entry + 24, 1u << 30);
  try {
    directoryOf(lying);
    FAIL() << "a record past the end was accepted";
  } catch (const ArchiveProblem &p) {
    EXPECT_FALSE(p.exceedsLimit());
    EXPECT_NE(std::string(p.what()).find("past the end"), std::string::npos);
  }
}

TEST(ArchiveGuardTest, RefusesZipBombs) {
  std::string bytes = zipOf({{"data/0", std::string(100, 'a')}});
  size_t entry = centralEntry(bytes);
  // Say it is deflated from 100 bytes to 1 GiB.
  bytes[entry + 10] = 8;
  put32(bytes, entry + 24, 1u << 30);
  try {
    directoryOf(bytes);
    FAIL() << "a zip bomb was accepted";
  } catch (const ArchiveProblem &p) {
    EXPECT_TRUE(p.exceedsLimit());
    EXPECT_NE(std::string(p.what()).find("zip bomb"), std::string::npos);
  }
  // A modest ratio is fine.
  put32(bytes, entry + 24, 1000);
  EXPECT_NO_THROW(directoryOf(bytes));
}

TEST(ArchiveGuardTest, PicklesLibtorchWritesPass) {
  ArchiveLimits limits;
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("a", nestedList(50));
  dict.insert("b", c10::ivalue::Tuple::create({c10::IValue(1.5), "s"}));
  EXPECT_EQ(checkPickle(pickled(dict), limits), std::nullopt);
  EXPECT_EQ(checkPickle(pickled(at::ones({2, 3})), limits), std::nullopt);
  // A typed list is a list in a (list, type) tuple: two levels each.
  EXPECT_EQ(
      checkPickle(pickled(nestedList(limits.maxPickleDepth / 2 - 1)), limits),
      std::nullopt);
}

TEST(ArchiveGuardTest, PicklesThatCrashLibtorchAreRefused) {
  ArchiveLimits limits;
  auto problem = [&](const std::string &p) {
    return checkPickle(p, limits).value_or("");
  };
  EXPECT_NE(
      problem(pickled(nestedList(limits.maxPickleDepth + 1))).find("deep"),
      std::string::npos);
  EXPECT_NE(
      problem(pickled(nestedList(limits.maxPickleDepth / 2 + 1))).find("deep"),
      std::string::npos);
  // The same by hand, as a mutated archive has it: ](](...e e.
  std::string deep =
      "\x80\x02" + repeat("](", 100000) + repeat("e", 100000) + ".";
  EXPECT_NE(problem(deep).find("deep"), std::string::npos);
  EXPECT_NE(problem("\x80\x02R.").find("REDUCE"), std::string::npos);
  EXPECT_NE(problem("\x80\x02N\x86.").find("TUPLE"), std::string::npos);
  EXPECT_NE(problem("\x80\x02]q\x00(h\x00"
                    "e."s)
                .find("itself"),
            std::string::npos);
  EXPECT_NE(problem("\x80\x02Nr\xff\xff\xff\xff."s).find("memo"),
            std::string::npos);
  EXPECT_NE(problem("\x80\x02h\x05."s).find("never written"),
            std::string::npos);
  EXPECT_NE(problem("\x80\x02(K\x01"s).find("truncated"), std::string::npos);
  EXPECT_NE(problem("\x80\x02(J\x01"s).find("cut short"), std::string::npos);
  EXPECT_NE(problem("\x80\x02\x8a\x06\x00\x00\x00\x00\x00\x00."s).find("LONG1"),
            std::string::npos);
  EXPECT_NE(problem("\x80\x02]").find("STOP"), std::string::npos);
  EXPECT_NE(problem("\x80\x02}(K\x01u.").find("without a value"),
            std::string::npos);
  EXPECT_NE(problem("not a pickle").find("protocol"), std::string::npos);
}

TEST(ArchiveGuardTest, PicklesNameTheStoragesTheyRead) {
  // What torch.jit.save writes for a float tensor of 4 elements: a
  // persistent id ('storage', torch.FloatStorage, key, device, numel).
  std::string p = "\x80\x02(X\x07\x00\x00\x00storage"s +
                  "ctorch\nFloatStorage\n" +
                  "X\x01\x00\x00\x00"
                  "0X\x03\x00\x00\x00"
                  "cpuK\x04tQ."s;
  std::vector<StorageRef> storages;
  EXPECT_EQ(checkPickle(p, ArchiveLimits{}, &storages), std::nullopt);
  ASSERT_EQ(storages.size(), 1u);
  EXPECT_EQ(storages[0].key, "0");
  EXPECT_EQ(storages[0].numel, 4u);
  EXPECT_EQ(storages[0].itemSize, 4u);
}

TEST(ArchiveGuardTest, CodeDepth) {
  ArchiveLimits limits;
  auto ok = [&](const std::string &src) {
    return checkCode(src, limits) == std::nullopt;
  };
  EXPECT_TRUE(
      ok("class M(Module):\n  __parameters__ = []\n  training : bool\n"
         "  def forward(self: __torch__.M, x: Tensor) -> Tensor:\n"
         "    _0 = torch.gt(x, 0)\n    return torch.sum(x[_0]) * 1.5e-3\n"));
  // Long but flat: a list of negative numbers, a long string of brackets.
  std::string flat = "x = [";
  for (int i = 0; i < 5000; ++i)
    flat += "-" + std::to_string(i) + ", ";
  EXPECT_TRUE(ok(flat + "]\ny = \"" + repeat("((((", 5000) + "\"\n"));
  // What overflowed libtorch's parser or emitter at 20,000.
  EXPECT_FALSE(ok("x = " + repeat("(", 2000) + "1" + repeat(")", 2000) + "\n"));
  EXPECT_FALSE(ok("x = y" + repeat(" + y", 2000) + "\n"));
  EXPECT_FALSE(ok("x = " + repeat("not ", 2000) + "y\n"));
  EXPECT_FALSE(ok("x = y" + repeat("[0]", 2000) + "\n"));
  EXPECT_FALSE(ok("x = y" + repeat(".T", 2000) + "\n"));
  std::string blocks;
  for (int i = 0; i < 200; ++i)
    blocks += std::string(i, ' ') + "if x:\n";
  EXPECT_NE(checkCode(blocks, limits).value_or("").find("blocks"),
            std::string::npos);
  // A display of 600,000 literals (minutes in libtorch and the pipeline).
  std::string huge = "x = [";
  for (int i = 0; i < 20000; ++i)
    huge += "1, ";
  EXPECT_NE(checkCode(huge + "]\n", limits).value_or("").find("items"),
            std::string::npos);
  // Each statement is measured on its own.
  std::string many;
  for (int i = 0; i < 3000; ++i)
    many += "x = x + 1\n";
  EXPECT_TRUE(ok(many));
}

// libtorch 1.13 dereferences the missing type of an untyped class-body
// assignment (CLI campaign seed 2, case 4218: a duplicated `__buffers__`
// token). What torch.jit.save itself writes must still pass.
TEST(ArchiveGuardTest, UntypedClassAttributes) {
  ArchiveLimits limits;
  auto problem = [&](const std::string &src) {
    return checkCode(src, limits).value_or("");
  };
  std::string module =
      "class M(Module):\n"
      "  __parameters__ = [\"weight\", ]\n"
      "  __buffers__ = []\n"
      "  weight : Tensor\n"
      "  C : Final[int] = 3\n"
      "  __annotations__[\"0\"] = __torch__.Sub\n"
      "  def forward(self: __torch__.M, x: Tensor) -> Tensor:\n"
      "    y = x\n"
      "    return y\n";
  EXPECT_EQ(problem(module), "");
  EXPECT_EQ(problem("class Color(Enum):\n  RED = 1\n  GREEN = 2\n"), "");
  // What torch.jit.save writes for an nn.ParameterList (torch 1.13).
  EXPECT_EQ(problem("class ParameterList(Module):\n"
                    "  __parameters__ = [\"0\", \"1\", ]\n"
                    "  __buffers__ = []\n"
                    "  __annotations__ = []\n"
                    "  __annotations__[\"0\"] = Tensor\n"
                    "  __annotations__[\"1\"] = Tensor\n"
                    "  training : bool\n"),
            "");
  // Assignments in methods and at module level are not class attributes.
  EXPECT_EQ(problem(module + "x = 1\nclass N(Module):\n  def f(self):\n"
                             "    z = 2\n    return z\n"),
            "");
  EXPECT_EQ(problem("class M(Module):\n  __parameters__ = []\n"
                    "  __buffers____buffers__ = [\"offset\", ]\n"),
            "code assigns class attribute '__buffers____buffers__' without a "
            "type at line 3");
  EXPECT_NE(problem(module + "class N(Module):\n  limit = 3\n"), "");
  // A comparison is not an assignment; a class after an Enum is checked.
  EXPECT_EQ(problem("class M(Module):\n  x == 1\n"), "");
  EXPECT_NE(problem("class Color(Enum):\n  RED = 1\nclass M(Module):\n"
                    "  RED = 1\n"),
            "");
}

TEST(ArchiveGuardTest, RecordKinds) {
  EXPECT_EQ(recordKind("code/__torch__.py"), RecordKind::Code);
  EXPECT_EQ(recordKind("code/__torch__/m.py.debug_pkl"),
            RecordKind::DebugPickle);
  EXPECT_EQ(recordKind("data.pkl"), RecordKind::Pickle);
  EXPECT_EQ(recordKind("data/0"), RecordKind::Other);
  EXPECT_EQ(recordKind("extra/notes.py"), RecordKind::Other);
}
