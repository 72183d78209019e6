// The CPU compute backend (backend/cpu_backend.h) against the free functions it delegates to, bit for
// bit: recover against bf16::merge; project from BF16 words against project(), from split planes
// against projectSplit, from nibble codes against projectNibble (decoding) and against project() of
// the merged words (prefill); the gated MLP against gatedMlpGemv (decoding) and against gatedMlp's
// composition (prefill), with and without routing weights. And its buffers: 4 KiB-aligned as O_DIRECT
// requires, zero-filled; the registry by name; a buffer adopted from another allocator cannot grow.
// libtorch before Qt: Qt's `slots` macro would rewrite a libtorch method of that name.
#include <ATen/ATen.h>

#include "backend/backend_registry.h"
#include "backend/cpu_backend.h"
#include "backend/host_memory.h"
#include "io/page_pool.h"
#include "model/linear.h"
#include "model/moe_model_ops.h"

#include <QtTest>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "test_support.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/exponent_codec.h"
#include "zipmoe/model/model.h"
#include "zipmoe/format/nibble_shard.h"

using namespace zipmoe;
using backend::Weight;

namespace {

// A BF16 weight in the three forms the runtime hands over; the nibble codes from the real codec,
// indexed as the runtime indexes them.
struct Forms {
  at::Tensor tensor;
  std::vector<uint8_t> exponents, signMantissa, chunk;
  std::vector<uint32_t> positions;
  std::vector<NibbleShard> shards;
  Weight words, split, nibble;
};

std::unique_ptr<Forms> formsOf(const at::Tensor& t) {
  auto f = std::make_unique<Forms>();
  f->tensor = t.contiguous();
  const auto n = static_cast<size_t>(t.numel());
  const auto* w = reinterpret_cast<const uint16_t*>(f->tensor.data_ptr<at::BFloat16>());
  f->exponents.resize(n);
  f->signMantissa.resize(n);
  bf16::split(w, n, f->exponents.data(), f->signMantissa.data());
  const auto codec = makeCodec(parseCodecSpec("nibble"));
  f->chunk.resize(codec->maxCompressedSize(n));
  f->chunk.resize(codec->compress(f->exponents.data(), n, f->chunk.data(), f->chunk.size()));
  f->positions.resize(n);
  auto shard = indexNibbleChunk(f->chunk.data(), f->chunk.size(), n, f->positions.data(), n);
  if (!shard) throw std::runtime_error("the nibble codec stored these exponents raw");
  shard->rowEnd = static_cast<size_t>(t.size(0));
  f->shards.push_back(*shard);
  f->words.words = w;
  f->split.exponents = f->exponents.data();
  f->nibble.nibble = f->shards;
  f->split.signMantissa = f->nibble.signMantissa = f->signMantissa.data();
  for (Weight* g : {&f->words, &f->split, &f->nibble}) {
    g->rows = t.size(0);
    g->cols = t.size(1);
  }
  return f;
}

const uint16_t* wordsOf(const at::Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>()); }

bool sameWords(const std::vector<uint16_t>& got, const at::Tensor& expected) {
  const at::Tensor e = expected.contiguous();
  return static_cast<int64_t>(got.size()) == e.numel() &&
         std::memcmp(got.data(), e.data_ptr(), got.size() * sizeof(uint16_t)) == 0;
}

std::vector<uint16_t*> rowPointers(std::vector<uint16_t>& out, int64_t n, int64_t cols) {
  std::vector<uint16_t*> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(i)] = out.data() + i * cols;
  return rows;
}

void releaseWithFree(uint8_t* p) { std::free(p); }

}  // namespace

class TestCpuBackend : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void recoverIsTheMerge() {
    const backend::CpuBackend cpu;
    for (const size_t count : {size_t{0}, size_t{1}, size_t{17}, size_t{65536}, (size_t{1} << 20) + 3}) {
      std::vector<uint8_t> e(count), sm(count);
      for (size_t i = 0; i < count; ++i) {
        e[i] = static_cast<uint8_t>(i * 7 + 3);
        sm[i] = static_cast<uint8_t>(i >> 8 ^ i);
      }
      std::vector<uint16_t> expected(count), got(count);
      bf16::merge(e.data(), sm.data(), count, expected.data());
      cpu.recover(e.data(), sm.data(), count, got.data());
      QVERIFY2(got == expected, qPrintable(QString("%1 words").arg(count)));
      std::vector<uint16_t> viaDefault(count);
      backend::defaultMemory().recover(e.data(), sm.data(), count, viaDefault.data());
      QVERIFY(viaDefault == expected);
    }
  }

  // Every form, every row count on both sides of the GEMV's limit, under every kernel this CPU has.
  void projectIsTheFreeFunctions() {
    at::manual_seed(44);
    const backend::CpuBackend cpu;
    const auto w = formsOf((at::randn({301, 518}) * 0.05).to(at::kBFloat16));
    for (const MatmulKernel kernel : {MatmulKernel::Auto, MatmulKernel::Scalar, MatmulKernel::Avx2,
                                      MatmulKernel::Avx512Bf16, MatmulKernel::Libtorch}) {
      if (!matmulKernelSupported(kernel)) continue;
      const MatmulScope scope(kernel);
      for (const int64_t n : {1, 3, 8, 20}) {
        const at::Tensor x = at::randn({n, 518}).to(at::kBFloat16);
        const auto label = [&](const char* form) {
          return qPrintable(QString("%1, %2 rows, %3").arg(matmulKernelName(kernel)).arg(n).arg(form));
        };
        std::vector<uint16_t> y(static_cast<size_t>(n * 301));
        const at::Tensor expected = project(x, w->tensor);
        cpu.project(wordsOf(x), n, w->words, y.data());
        QVERIFY2(sameWords(y, expected), label("words"));
        cpu.project(wordsOf(x), n, w->split, y.data());
        QVERIFY2(sameWords(y, gemvProjects(n) ? projectSplit(x, w->exponents.data(), w->signMantissa.data(), 301, 518)
                                              : expected),
                 label("split"));
        cpu.project(wordsOf(x), n, w->nibble, y.data());
        QVERIFY2(sameWords(y, gemvProjects(n) ? projectNibble(x, w->shards, w->signMantissa.data(), 301, 518)
                                              : expected),
                 label("nibble"));
      }
    }
  }

  void gatedMlpIsTheFreeFunctions() {
    at::manual_seed(45);
    const backend::CpuBackend cpu;
    const int64_t cols = 96, width = 200;
    const auto g = formsOf((at::randn({width, cols}) * 0.1).to(at::kBFloat16));
    const auto u = formsOf((at::randn({width, cols}) * 0.1).to(at::kBFloat16));
    const auto d = formsOf((at::randn({cols, width}) * 0.1).to(at::kBFloat16));
    for (const MatmulKernel kernel : {MatmulKernel::Auto, MatmulKernel::Scalar, MatmulKernel::Libtorch}) {
      if (!matmulKernelSupported(kernel)) continue;
      const MatmulScope scope(kernel);
      for (const int64_t n : {1, 5, 8, 12}) {
        const at::Tensor x = at::randn({n, cols}).to(at::kBFloat16);
        const at::Tensor scale = at::rand({n}) + 0.05;
        // The prefill reference: gatedMlp's composition on the words, scaled in fp32 and rounded.
        const at::Tensor composed = gatedMlp(x, g->tensor, u->tensor, d->tensor);
        const at::Tensor composedScaled = (composed.to(at::kFloat) * scale.unsqueeze(1)).to(at::kBFloat16);
        for (const auto form : {&Forms::words, &Forms::split, &Forms::nibble}) {
          for (const bool scaled : {false, true}) {
            const float* s = scaled ? scale.data_ptr<float>() : nullptr;
            std::vector<uint16_t> got(static_cast<size_t>(n * cols)), expected(got.size());
            cpu.gatedMlp(wordsOf(x), n, (*g).*form, (*u).*form, (*d).*form, s, rowPointers(got, n, cols).data());
            const QString label = QString("%1, %2 rows, %3%4")
                                      .arg(matmulKernelName(kernel))
                                      .arg(n)
                                      .arg(form == &Forms::words ? "words" : form == &Forms::split ? "split" : "nibble")
                                      .arg(scaled ? ", scaled" : "");
            if (gemvProjects(n)) {
              gatedMlpGemv(wordsOf(x), n, (*g).*form, (*u).*form,
                           (*d).*form, s,
                           rowPointers(expected, n, cols).data());
              QVERIFY2(got == expected, qPrintable(label));
            } else {
              QVERIFY2(sameWords(got, scaled ? composedScaled : composed), qPrintable(label));
            }
          }
        }
      }
    }
  }

  void shapesThatDoNotFitAreErrors() {
    const backend::CpuBackend cpu;
    const std::vector<uint16_t> words(64 * 64);
    const std::vector<uint16_t> x(64);
    std::vector<uint16_t> y(64);
    uint16_t* rows[1] = {y.data()};
    const Weight square{words.data(), nullptr, nullptr, {}, 64, 64};
    const Weight narrow{words.data(), nullptr, nullptr, {}, 32, 64};
    ZIPMOE_EXPECT_ERROR(cpu.gatedMlp(x.data(), 1, square, narrow, square, nullptr, rows), "up 32 × 64",
                        "[width × cols]");
    const Weight formless{nullptr, nullptr, nullptr, {}, 64, 64};
    ZIPMOE_EXPECT_ERROR(cpu.project(x.data(), 1, formless, y.data()), "exactly one form");
  }

  // O_DIRECT needs the start and the length of a read in whole 4 KiB blocks.
  void buffersAreAlignedForDirectReads() {
    const backend::CpuBackend cpu;
    for (const auto where : {backend::Placement::Host, backend::Placement::Device}) {
      for (const size_t bytes : {size_t{1}, size_t{4096}, size_t{5000}, size_t{3} << 20}) {
        const io::AlignedBuffer b = cpu.allocate(bytes, where);
        QVERIFY(b.size() >= bytes);
        QCOMPARE(b.size() % 4096, size_t{0});
        QCOMPARE(reinterpret_cast<uintptr_t>(b.data()) % 4096, uintptr_t{0});
        QCOMPARE(b.alignment(), size_t{4096});
        QVERIFY(std::all_of(b.data(), b.data() + b.size(), [](uint8_t v) { return v == 0; }));
      }
    }
    const io::AlignedBuffer viaDefault = backend::defaultMemory().allocate(10000, backend::Placement::Host);
    QCOMPARE(reinterpret_cast<uintptr_t>(viaDefault.data()) % 4096, uintptr_t{0});

    // The expert caches' buffers (RuntimeOptions::recyclePages) come from the CPU's recycling pool:
    // page-aligned, and a freed buffer's pages serve the next one.
    const std::shared_ptr<io::PagePool> pool = cpu.recyclingPool();
    QVERIFY(pool != nullptr);
    if (!pool) return;
    QVERIFY(backend::hostMemory().recyclingPool() != pool);  // one pool per runtime
    QVERIFY(backend::defaultMemory().recyclingPool());
    {
      const io::AlignedBuffer b = pool->allocate(5000);
      QVERIFY(b.size() >= 5000);
      QCOMPARE(reinterpret_cast<uintptr_t>(b.data()) % 4096, uintptr_t{0});
    }
    QVERIFY(pool->pooledBytes() >= 8192);
    const io::AlignedBuffer again = pool->allocate(8192);
    QCOMPARE(reinterpret_cast<uintptr_t>(again.data()) % 4096, uintptr_t{0});
  }

  void adoptedBuffersDoNotGrow() {
    void* p = nullptr;
    QCOMPARE(::posix_memalign(&p, 4096, 8192), 0);
    io::AlignedBuffer adopted(static_cast<uint8_t*>(p), 8192, 4096, releaseWithFree);
    adopted.reserve(4096);  // no growth: nothing to do
    QCOMPARE(adopted.size(), size_t{8192});
    ZIPMOE_EXPECT_ERROR(adopted.reserve(16384), "cannot grow", "another allocator");
    io::AlignedBuffer moved = std::move(adopted);  // freed once, through releaseWithFree
    QCOMPARE(moved.size(), size_t{8192});
  }

  void registryByName() {
    QCOMPARE(backend::backendNames().front(), std::string("cpu"));
    backend::ComputeBackend& cpu = backend::backendNamed("cpu");
    QVERIFY(cpu.kind() == backend::DeviceKind::Cpu);
    QCOMPARE(cpu.name(), std::string("cpu"));
    QCOMPARE(&backend::backendNamed("cpu"), &cpu);  // created once
    QCOMPARE(&backend::defaultBackend(), &cpu);
    ZIPMOE_EXPECT_ERROR(backend::backendNamed("tpu"), "'tpu'", "cpu");
    backend::setDefaultBackend("cpu");
    QCOMPARE(&backend::defaultMemory(), static_cast<const backend::DeviceMemory*>(&cpu));
    backend::setDefaultMemory(nullptr);
    QCOMPARE(&backend::defaultMemory(), static_cast<const backend::DeviceMemory*>(&backend::hostMemory()));
  }
};

QTEST_APPLESS_MAIN(TestCpuBackend)
#include "test_cpu_backend.moc"
