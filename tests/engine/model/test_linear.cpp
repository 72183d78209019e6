// project(): the project's GEMV under every kernel choice against at::linear (libtorch's BF16 path),
// with and without bias, for 1-D/2-D/3-D activations; and the cases that must stay at::linear
// exactly (more rows than kMaxGemvRows, fp32, a transposed weight); the per-head product; and
// decoding's fused SwiGLU (gatedMlpGemv) and rmsNorm (rmsNormRows) against the compositions they
// replace.
// libtorch before Qt: Qt's `slots` macro would rewrite a libtorch method of that name.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "kernels/amx_gemm.h"
#include "kernels/bf16_gemv.h"
#include "kernels/compute_pool.h"
#include "model/linear.h"
#include "model/moe_model_ops.h"

#include <QtTest>
#include <atomic>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "test_support.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/exponent_codec.h"
#include "zipmoe/model/model.h"
#include "zipmoe/format/nibble_shard.h"

using namespace zipmoe;

namespace {

// Largest |a − b| relative to the typical magnitude of b's entries.
double relativeError(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor af = a.to(at::kFloat), bf = b.to(at::kFloat);
  return (af - bf).abs().max().item<double>() / (bf.abs().mean().item<double>() + 1e-12);
}

}  // namespace

class TestLinear : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void everyKernelAgreesWithLibtorch() {
    at::manual_seed(1);
    for (const MatmulKernel kernel : {MatmulKernel::Auto, MatmulKernel::Scalar, MatmulKernel::Avx2,
                                      MatmulKernel::Avx512Bf16}) {
      if (!matmulKernelSupported(kernel)) continue;
      for (const int64_t rows : {1, 2, 8}) {
        const at::Tensor w = (at::randn({301, 517}) * 0.05).to(at::kBFloat16);
        const at::Tensor b = at::randn({301}).to(at::kBFloat16);
        const at::Tensor x = at::randn({rows, 517}).to(at::kBFloat16);
        const at::Tensor reference = at::linear(x, w), referenceBias = at::linear(x, w, b);
        const MatmulScope scope(kernel);
        const at::Tensor y = project(x, w), yb = project(x, w, b);
        QCOMPARE(y.scalar_type(), at::kBFloat16);
        QCOMPARE(y.sizes(), reference.sizes());
        // Both round an fp32 sum to BF16: at most one BF16 step (2⁻⁸ relative) apart.
        QVERIFY2(relativeError(y, reference) < 1e-2, matmulKernelName(kernel));
        QVERIFY2(relativeError(yb, referenceBias) < 1e-2, matmulKernelName(kernel));
      }
      const MatmulScope scope(kernel);
      const at::Tensor w = at::randn({64, 40}).to(at::kBFloat16);
      const at::Tensor x3 = at::randn({2, 3, 40}).to(at::kBFloat16), x1 = at::randn({40}).to(at::kBFloat16);
      QCOMPARE(project(x3, w).sizes(), at::linear(x3, w).sizes());
      QVERIFY(relativeError(project(x3, w), at::linear(x3, w)) < 1e-2);
      QCOMPARE(project(x1, w).sizes(), at::linear(x1, w).sizes());
      QVERIFY(relativeError(project(x1, w), at::linear(x1, w)) < 1e-2);
    }
  }

  void whatTheGemvDoesNotTakeIsAtLinearExactly() {
    at::manual_seed(2);
    const MatmulScope scope(MatmulKernel::Auto);
    const at::Tensor w = at::randn({96, 80}).to(at::kBFloat16);
    const at::Tensor prefill = at::randn({kMaxGemvRows + 1, 80}).to(at::kBFloat16);
    QVERIFY(at::equal(project(prefill, w), at::linear(prefill, w)));
    const at::Tensor x32 = at::randn({1, 80}), w32 = at::randn({96, 80});
    QVERIFY(at::equal(project(x32, w32), at::linear(x32, w32)));
    const at::Tensor wt = at::randn({80, 96}).to(at::kBFloat16).t();  // not contiguous
    const at::Tensor x = at::randn({1, 80}).to(at::kBFloat16);
    QVERIFY(at::equal(project(x, wt), at::linear(x, wt)));
    const MatmulScope torchOnly(MatmulKernel::Libtorch);
    QVERIFY(at::equal(project(x, w), at::linear(x, w)));
  }

  // Prefill's rows on AMX tiles: project() takes them there for BF16 weights of a fitting shape, within a
  // BF16 step of libtorch's product; every form of W gives the same words, and a step's rows give the
  // same result alone as inside a longer product.
  void prefillRunsOnTilesInEveryForm() {
    if (!kernels::amxSupported()) QSKIP("this CPU or kernel runs no AMX-BF16 tiles");
    at::manual_seed(4);
    const MatmulScope scope(MatmulKernel::Auto);
    const at::Tensor w = (at::randn({64, 128}) * 0.05).to(at::kBFloat16), b = at::randn({64}).to(at::kBFloat16);
    const at::Tensor x = at::randn({41, 128}).to(at::kBFloat16);
    QVERIFY(amxProjects(x, 64, 128));
    QVERIFY(!amxProjects(x.narrow(0, 0, kMaxGemvRows), 64, 128));
    QVERIFY(!amxProjects(x, 60, 128) && !amxProjects(x.to(at::kFloat), 64, 128));
    const at::Tensor y = project(x, w), yb = project(x, w, b);
    QVERIFY(relativeError(y, at::linear(x, w)) < 1e-2);
    QVERIFY(relativeError(yb, at::linear(x, w, b)) < 1e-2);
    const auto* words = reinterpret_cast<const uint16_t*>(w.data_ptr<at::BFloat16>());
    std::vector<uint8_t> e(64 * 128), sm(64 * 128);
    bf16::split(words, e.size(), e.data(), sm.data());
    QVERIFY(at::equal(projectTiles(x, {.words = words, .rows = 64, .cols = 128}), y));
    QVERIFY(at::equal(projectTiles(x, {.exponents = e.data(), .signMantissa = sm.data(), .rows = 64, .cols = 128}), y));
    QVERIFY(at::equal(project(x.narrow(0, 0, 20).clone(), w), y.narrow(0, 0, 20)));
    {
      const MatmulScope torchOnly(MatmulKernel::Libtorch);
      QVERIFY(!amxProjects(x, 64, 128));
      QVERIFY(at::equal(project(x, w), at::linear(x, w)));
    }
    try {
      (void)projectTiles(x, {.words = words, .rows = 64, .cols = 100});
      QFAIL("a shape the tiles do not take was accepted");
    } catch (const Error& error) {
      QVERIFY2(QString(error.what()).contains("64 × 100"), error.what());
    }
  }

  void scopesNest() {
    at::manual_seed(3);
    const at::Tensor w = at::randn({33, 70}).to(at::kBFloat16), x = at::randn({1, 70}).to(at::kBFloat16);
    const MatmulScope outer(MatmulKernel::Libtorch);
    {
      const MatmulScope inner(MatmulKernel::Scalar);
      QVERIFY(relativeError(project(x, w), at::linear(x, w)) < 1e-2);
    }
    QVERIFY(at::equal(project(x, w), at::linear(x, w)));
  }

  // The GEMV path rounds in its pool items, not with libtorch's conversion: bit for bit what libtorch
  // makes of the same fp32 products (plus the fp32 bias), at every level, with one compute thread and
  // with two, and with more intra-op threads than decoding uses (a caller outside its scope).
  void projectRoundsItsFp32ProductsAsLibtorch() {
    at::manual_seed(11);
    const int64_t rowsOut = 1000, cols = 96;  // 1000 rows: several pool items, one not a multiple of 4
    const at::Tensor w = (at::randn({rowsOut, cols}) * 0.05).to(at::kBFloat16);
    const at::Tensor b = at::randn({rowsOut}).to(at::kBFloat16);
    struct RestoreThreads {  // also when an assertion returns early
      int threads = kernels::ComputePool::instance().threads();
      ~RestoreThreads() { setComputeThreads(threads); }
    } restore;
    for (const int threads : {1, 2}) {
      setComputeThreads(threads);
      for (const kernels::GemvLevel level : kernels::supportedGemvLevels()) {
        const MatmulScope scope(level == kernels::GemvLevel::Scalar ? MatmulKernel::Scalar
                                : level == kernels::GemvLevel::Avx2 ? MatmulKernel::Avx2
                                                                    : MatmulKernel::Avx512Bf16);
        for (const int64_t n : {1, 5}) {
          const at::Tensor x = at::randn({n, cols}).to(at::kBFloat16);
          at::Tensor products = at::empty({n, rowsOut}, at::kFloat);
          kernels::gemvBf16(level, reinterpret_cast<const uint16_t*>(w.data_ptr<at::BFloat16>()), cols, 0, rowsOut,
                            reinterpret_cast<const uint16_t*>(x.data_ptr<at::BFloat16>()), static_cast<size_t>(n),
                            products.data_ptr<float>(), rowsOut);
          const QString what = QString("%1, n %2, %3 threads").arg(kernels::gemvLevelName(level)).arg(n).arg(threads);
          QVERIFY2(at::equal(project(x, w), products.to(at::kBFloat16)), qPrintable(what));
          QVERIFY2(at::equal(project(x, w, b), (products + b.to(at::kFloat)).to(at::kBFloat16)), qPrintable(what));
          const at::Tensor heads = at::stack({w, w.flip(0)}), xh = at::stack({x, x.flip(0)});
          const at::Tensor perHead = projectPerHead(xh, heads);
          QVERIFY2(at::equal(perHead[0], project(x, w)) && at::equal(perHead[1], project(x.flip(0), w.flip(0))),
                   qPrintable(what));
        }
      }
    }
  }

  // Each head's product is project() on that head, bit for bit: the same kernel computes each row
  // from the same inputs whatever item it falls in. What the GEMV does not take is at::matmul exactly.
  void projectPerHeadIsEachHeadsProject() {
    at::manual_seed(4);
    const at::Tensor w = (at::randn({5, 72, 40}) * 0.05).to(at::kBFloat16);
    for (const MatmulKernel kernel : {MatmulKernel::Auto, MatmulKernel::Scalar, MatmulKernel::Avx2,
                                      MatmulKernel::Avx512Bf16}) {
      if (!matmulKernelSupported(kernel)) continue;
      const MatmulScope scope(kernel);
      for (const int64_t n : {1, 3, 8}) {
        // x as the MLA passes it: a strided view ([n, heads, d] transposed, then narrowed).
        const at::Tensor x = at::randn({n, 5, 48}).to(at::kBFloat16).transpose(0, 1).narrow(-1, 0, 40);
        takeWeightBytesRead();
        const at::Tensor y = projectPerHead(x, w);
        QCOMPARE(takeWeightBytesRead(), uint64_t{5 * 72 * 40 * 2});
        QCOMPARE(y.scalar_type(), at::kBFloat16);
        QCOMPARE(y.sizes(), (at::IntArrayRef{5, n, 72}));
        for (int64_t h = 0; h < 5; ++h)
          QVERIFY2(at::equal(y[h], project(x[h], w[h])), qPrintable(QString("%1, n %2, head %3")
                                                                        .arg(matmulKernelName(kernel))
                                                                        .arg(n)
                                                                        .arg(h)));
        QVERIFY(relativeError(y, at::matmul(x, w.transpose(1, 2))) < 1e-2);
      }
    }
    const MatmulScope scope(MatmulKernel::Auto);
    const at::Tensor many = at::randn({5, kMaxGemvRows + 1, 40}).to(at::kBFloat16);
    QVERIFY(at::equal(projectPerHead(many, w), at::matmul(many, w.transpose(1, 2))));
    const at::Tensor x32 = at::randn({5, 1, 40}), w32 = at::randn({5, 72, 40});
    QVERIFY(at::equal(projectPerHead(x32, w32), at::matmul(x32, w32.transpose(1, 2))));
    ZIPMOE_EXPECT_ERROR(projectPerHead(at::randn({4, 1, 40}).to(at::kBFloat16), w), "[4, 1, 40]", "[5, 72, 40]");
    ZIPMOE_EXPECT_ERROR(projectPerHead(at::randn({5, 40}).to(at::kBFloat16), w), "[5, 40]");
  }

  // Decoding's fused SwiGLU: bit-identical to project()'s products composed with the silu and the
  // roundings linear.h states, from BF16 words, split planes and nibble codes, at every kernel
  // level; its weight bytes counted.
  void gatedMlpGemvIsTheRoundedComposition() {
    at::manual_seed(5);
    const int64_t cols = 96, width = 200;
    const at::Tensor gate = (at::randn({width, cols}) * 0.1).to(at::kBFloat16);
    const at::Tensor up = (at::randn({width, cols}) * 0.1).to(at::kBFloat16);
    const at::Tensor down = (at::randn({cols, width}) * 0.1).to(at::kBFloat16);
    // Each weight in its three forms; the nibble codes from the real codec, indexed as the runtime does.
    struct Forms {
      std::vector<uint8_t> exponents, signMantissa, chunk;
      std::vector<uint32_t> positions;
      std::vector<NibbleShard> shards;
      GemvWeight words, split, nibble;
    };
    const auto formsOf = [](const at::Tensor& t) {
      auto f = std::make_unique<Forms>();
      const auto n = static_cast<size_t>(t.numel());
      const auto* w = reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>());
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
      for (GemvWeight* g : {&f->words, &f->split, &f->nibble}) {
        g->rows = t.size(0);
        g->cols = t.size(1);
      }
      return f;
    };
    const auto g = formsOf(gate), u = formsOf(up), d = formsOf(down);
    for (const MatmulKernel kernel : {MatmulKernel::Auto, MatmulKernel::Scalar, MatmulKernel::Avx2,
                                      MatmulKernel::Avx512Bf16}) {
      if (!matmulKernelSupported(kernel)) continue;
      const MatmulScope scope(kernel);
      for (const int64_t n : {1, 3, 8}) {
        const at::Tensor x = at::randn({n, cols}).to(at::kBFloat16);
        const at::Tensor scale = at::rand({n});
        // The reference: project()'s products; silu in fp32 with std::exp, element by element.
        const at::Tensor gx = project(x, gate).to(at::kFloat).contiguous(), ux = project(x, up).to(at::kFloat);
        at::Tensor silu = at::empty_like(gx);
        for (int64_t i = 0; i < gx.numel(); ++i) {
          const float v = gx.data_ptr<float>()[i];
          silu.data_ptr<float>()[i] = v / (1.0f + std::exp(-v));
        }
        const at::Tensor h = (silu.to(at::kBFloat16).to(at::kFloat) * ux).to(at::kBFloat16);
        // The unfused path's silu (libtorch's vectorised exp in fp32) rounds to the same BF16 values
        // but where the two exps differ in the last fp32 bit across a rounding boundary.
        const at::Tensor unfused = fp32Silu(project(x, gate)), fused = silu.to(at::kBFloat16);
        QVERIFY((unfused.view(at::kShort).to(at::kInt) - fused.view(at::kShort).to(at::kInt)).abs().max().item<int>() <= 1);
        const at::Tensor y = project(h, down);
        const at::Tensor reference = (y.to(at::kFloat) * scale.unsqueeze(1)).to(at::kBFloat16);
        for (const auto form : {&Forms::words, &Forms::split, &Forms::nibble}) {
          const GemvWeight &gw = (*g).*form, &uw = (*u).*form, &dw = (*d).*form;
          at::Tensor out = at::full({n, cols}, 7.0).to(at::kBFloat16), plain = out.clone();
          std::vector<uint16_t*> rows, plainRows;
          for (int64_t i = 0; i < n; ++i) {
            rows.push_back(reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>()) + i * cols);
            plainRows.push_back(reinterpret_cast<uint16_t*>(plain.data_ptr<at::BFloat16>()) + i * cols);
          }
          const auto* xs = reinterpret_cast<const uint16_t*>(x.data_ptr<at::BFloat16>());
          takeWeightBytesRead();
          gatedMlpGemv(xs, n, gw, uw, dw, scale.data_ptr<float>(), rows.data());
          const uint64_t perWeight2 = form == &Forms::nibble ? 3 : 4;  // twice the bytes per weight
          QCOMPARE(takeWeightBytesRead(), uint64_t(3 * width * cols) * perWeight2 / 2);
          gatedMlpGemv(xs, n, gw, uw, dw, nullptr, plainRows.data());
          const QString where = QString("%1, n %2, form %3")
                                    .arg(matmulKernelName(kernel))
                                    .arg(n)
                                    .arg(form == &Forms::words ? "words" : form == &Forms::split ? "split" : "nibble");
          QVERIFY2(at::equal(out, reference), qPrintable(where));
          QVERIFY2(at::equal(plain, y), qPrintable(where));
        }
        // On tensors, through gatedMlp: the same values.
        QVERIFY(at::equal(gatedMlpProject(x, gate, up, down).value(), y));
      }
    }
  }

  // What the fused form does not take stays the unfused composition (nullopt); its errors name shapes.
  void gatedMlpProjectTakesOnlyDecoding() {
    at::manual_seed(6);
    const at::Tensor gate = at::randn({40, 24}).to(at::kBFloat16), up = at::randn({40, 24}).to(at::kBFloat16);
    const at::Tensor down = at::randn({24, 40}).to(at::kBFloat16);
    const at::Tensor x = at::randn({2, 24}).to(at::kBFloat16);
    const MatmulScope scope(MatmulKernel::Auto);
    QVERIFY(gatedMlpProject(x, gate, up, down).has_value());
    QVERIFY(gatedMlpProject(at::randn({2, 3, 24}).to(at::kBFloat16), gate, up, down).has_value());
    QCOMPARE(gatedMlpProject(at::randn({2, 3, 24}).to(at::kBFloat16), gate, up, down)->sizes(),
             (at::IntArrayRef{2, 3, 24}));
    QVERIFY(!gatedMlpProject(at::randn({kMaxGemvRows + 1, 24}).to(at::kBFloat16), gate, up, down));
    QVERIFY(!gatedMlpProject(x.to(at::kFloat), gate.to(at::kFloat), up.to(at::kFloat), down.to(at::kFloat)));
    QVERIFY(!gatedMlpProject(x, gate, up, down.t().contiguous().t()));
    QVERIFY(!gatedMlpProject(x, gate, up.narrow(0, 0, 39), down));
    {
      const MatmulScope torchOnly(MatmulKernel::Libtorch);
      QVERIFY(!gatedMlpProject(x, gate, up, down));
    }
    GemvWeight g, u, d;
    g.words = u.words = d.words = reinterpret_cast<const uint16_t*>(gate.data_ptr<at::BFloat16>());
    g.rows = u.rows = 40;
    g.cols = u.cols = 24;
    d.rows = 24;
    d.cols = 39;
    std::vector<uint16_t> out(24);
    uint16_t* rows[] = {out.data()};
    const auto* xs = reinterpret_cast<const uint16_t*>(x.data_ptr<at::BFloat16>());
    ZIPMOE_EXPECT_ERROR(gatedMlpGemv(xs, 1, g, u, d, nullptr, rows), "24 × 39", "[cols × width]");
    d.cols = 40;
    ZIPMOE_EXPECT_ERROR(gatedMlpGemv(xs, kGemvPassRows + 1, g, u, d, nullptr, rows), "33 rows");
    GemvWeight planeless = g;
    planeless.words = nullptr;
    ZIPMOE_EXPECT_ERROR(gatedMlpGemv(xs, 1, planeless, u, d, nullptr, rows), "40 × 24");
  }

  // A decoding forward runs libtorch's operators on one thread, a prefill on the compute threads,
  // and the count comes back after either; on a fresh thread too, whose first parallel operator
  // would otherwise apply libtorch's process-wide count over the scope's.
  void intraOpThreadsScopeSetsThisThreadsCount() {
    const int before = at::get_num_threads();
    setComputeThreads(2);
    int decoding = 0, team = 0, after = 0, prefill = 0, afterPrefill = 0;
    std::thread([&] {
      {
        const IntraOpThreadsScope scope(1);
        decoding = at::get_num_threads();
        std::atomic<int> largest{0};
        at::parallel_for(0, 4096, 1, [&](int64_t, int64_t) {
          int seen = largest.load();
          while (at::get_thread_num() + 1 > seen && !largest.compare_exchange_weak(seen, at::get_thread_num() + 1)) {
          }
        });
        team = largest.load();
      }
      after = at::get_num_threads();
      {
        const IntraOpThreadsScope scope(kMaxGemvRows + 1);
        prefill = at::get_num_threads();
      }
      afterPrefill = at::get_num_threads();
    }).join();
    QCOMPARE(decoding, 1);
    QCOMPARE(team, 1);
    QCOMPARE(after, 2);
    QCOMPARE(prefill, 2);
    QCOMPARE(afterPrefill, 2);
    setComputeThreads(before);
  }

  // Decoding's rmsNorm of a few BF16 rows against libtorch's operators doing the same steps: the
  // same BF16 values but where the two sums of squares round differently (one BF16 step at most,
  // rarely); a row-strided input read in place; what it does not take left to libtorch (nullopt).
  void rmsNormRowsIsLibtorchsRmsNorm() {
    at::manual_seed(7);
    const auto viaLibtorch = [](const at::Tensor& x, const at::Tensor& w, double eps) {
      const at::Tensor h = x.to(at::kFloat);
      return w * (h * at::rsqrt(h.pow(2).mean(-1, true) + eps)).to(x.scalar_type());
    };
    int64_t values = 0, differing = 0;
    for (const int64_t d : {64, 512, 2048, 2050}) {
      const at::Tensor w = (1 + 0.1 * at::randn({d})).to(at::kBFloat16);
      for (const double scale : {1e-3, 1.0, 300.0}) {
        const at::Tensor x = (at::randn({3, d}) * scale).to(at::kBFloat16);
        const at::Tensor y = rmsNormRows(x, w, 1e-6).value(), reference = viaLibtorch(x, w, 1e-6);
        QCOMPARE(y.sizes(), reference.sizes());
        const at::Tensor steps = (y.view(at::kShort).to(at::kInt) - reference.view(at::kShort).to(at::kInt)).abs();
        QVERIFY2(steps.max().item<int>() <= 1, qPrintable(QString("d %1, scale %2").arg(d).arg(scale)));
        values += y.numel();
        differing += steps.gt(0).sum().item<int64_t>();
      }
    }
    qInfo("%lld of %lld values one BF16 step from libtorch's", static_cast<long long>(differing),
          static_cast<long long>(values));
    QVERIFY2(differing * 100 < values, qPrintable(QString("%1 of %2 values differ").arg(differing).arg(values)));
    // [n, heads, d] (per-head norms) and a narrowed projection (MLA's latent) read in place.
    const at::Tensor w = (1 + 0.1 * at::randn({40})).to(at::kBFloat16);
    const at::Tensor heads = at::randn({2, 3, 40}).to(at::kBFloat16);
    QCOMPARE(rmsNormRows(heads, w, 1e-5)->sizes(), heads.sizes());
    QVERIFY(at::equal(*rmsNormRows(heads, w, 1e-5), rmsNormRows(heads.reshape({6, 40}), w, 1e-5)->view({2, 3, 40})));
    const at::Tensor wide = at::randn({4, 56}).to(at::kBFloat16), narrowed = wide.narrow(-1, 0, 40);
    QVERIFY(at::equal(*rmsNormRows(narrowed, w, 1e-5), *rmsNormRows(narrowed.contiguous(), w, 1e-5)));
    QVERIFY(!rmsNormRows(heads.to(at::kFloat), w, 1e-5));
    QVERIFY(!rmsNormRows(heads, w.to(at::kFloat), 1e-5));
    QVERIFY(!rmsNormRows(at::randn({kMaxNormElements / 40 + 1, 40}).to(at::kBFloat16), w, 1e-5));
    QVERIFY(!rmsNormRows(at::randn({2, 41}).to(at::kBFloat16), w, 1e-5));
  }

  void kernelNames() {
    QCOMPARE(QString(matmulKernelName(MatmulKernel::Auto)), QString("auto"));
    QCOMPARE(QString(matmulKernelName(MatmulKernel::Libtorch)), QString("libtorch"));
    QCOMPARE(QString(matmulKernelName(MatmulKernel::Avx512Bf16)), QString("avx512-bf16"));
    QVERIFY(matmulKernelSupported(MatmulKernel::Scalar));
  }
};

QTEST_APPLESS_MAIN(TestLinear)
#include "test_linear.moc"
