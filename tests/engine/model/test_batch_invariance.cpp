// Batch invariance of the forward's products (linear.h): under the row segments a forward names
// (RowSegmentsScope), a row's BF16 result from project(), gatedMlp() and rmsNorm() is bit for bit
// its result alone — in batches of 2 … 32 decoding rows, and beside a prefill step, whose rows in
// turn equal that step's product alone. Without segments nothing changes: more than kMaxGemvRows
// rows are one at::linear.
// libtorch before Qt: Qt's `slots` macro would rewrite a libtorch method of that name.
#include <ATen/ATen.h>

#include "model/attention.h"
#include "model/linear.h"
#include "model/moe_model_ops.h"

#include <QtTest>
#include <functional>
#include <vector>

#include "zipmoe/model/model.h"

using namespace zipmoe;

namespace {

using RowFunction = std::function<at::Tensor(const at::Tensor&)>;

// Every one of x's first n rows, computed in one batch of n single-row steps, equals its result alone.
bool decodingRowsEqualAlone(const at::Tensor& x, int64_t n, const RowFunction& f) {
  const RowSegmentsScope steps(std::vector<int64_t>(static_cast<size_t>(n), 1));
  const at::Tensor batched = f(x.narrow(0, 0, n).contiguous());
  for (int64_t i = 0; i < n; ++i) {
    const RowSegmentsScope alone({1});
    if (!at::equal(batched.narrow(0, i, 1), f(x.narrow(0, i, 1).contiguous()))) return false;
  }
  return true;
}

// Steps of 1, 12, 1, 3 and 1 rows in one batch: each step's rows equal the step computed alone.
bool mixedStepsEqualAlone(const at::Tensor& x, const RowFunction& f) {
  const std::vector<int64_t> counts{1, 12, 1, 3, 1};
  int64_t total = 0;
  for (const int64_t c : counts) total += c;
  const RowSegmentsScope steps(counts);
  const at::Tensor batched = f(x.narrow(0, 0, total).contiguous());
  int64_t at = 0;
  for (const int64_t c : counts) {
    const RowSegmentsScope alone({c});
    if (!at::equal(batched.narrow(0, at, c), f(x.narrow(0, at, c).contiguous()))) return false;
    at += c;
  }
  return true;
}

}  // namespace

class TestBatchInvariance : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void projectOfARowIsTheSameInEveryBatch() {
    at::manual_seed(11);
    for (const MatmulKernel kernel : {MatmulKernel::Auto, MatmulKernel::Scalar, MatmulKernel::Avx2,
                                      MatmulKernel::Avx512Bf16}) {
      if (!matmulKernelSupported(kernel)) continue;
      const MatmulScope scope(kernel);
      const at::Tensor w = (at::randn({301, 517}) * 0.05).to(at::kBFloat16);
      const at::Tensor b = at::randn({301}).to(at::kBFloat16);
      const at::Tensor x = at::randn({40, 517}).to(at::kBFloat16);
      const RowFunction plain = [&](const at::Tensor& rows) { return project(rows, w); };
      const RowFunction biased = [&](const at::Tensor& rows) { return project(rows, w, b); };
      for (int64_t n = 2; n <= 32; ++n) {
        QVERIFY2(decodingRowsEqualAlone(x, n, plain), qPrintable(QString("%1 rows, %2").arg(n).arg(matmulKernelName(kernel))));
        QVERIFY2(decodingRowsEqualAlone(x, n, biased), qPrintable(QString("%1 rows with bias").arg(n)));
      }
      QVERIFY(mixedStepsEqualAlone(x, plain));
      QVERIFY(mixedStepsEqualAlone(x, biased));
      // More decoding rows than one GEMV pass takes: several passes, the same rows.
      const at::Tensor many = at::randn({70, 517}).to(at::kBFloat16);
      QVERIFY(decodingRowsEqualAlone(many, 70, plain));
    }
  }

  void aPrefillStepIsAtLinearOnItsOwnRows() {
    at::manual_seed(12);
    const MatmulScope scope(MatmulKernel::Auto);
    const at::Tensor w = at::randn({96, 80}).to(at::kBFloat16);
    const at::Tensor x = at::randn({20, 80}).to(at::kBFloat16);
    {
      const RowSegmentsScope steps({2, 12, 6});
      const at::Tensor y = project(x, w);
      QVERIFY(at::equal(y.narrow(0, 2, 12), at::linear(x.narrow(0, 2, 12).contiguous(), w)));
    }
    // No segments: one step, at::linear on all of x, as before.
    QVERIFY(at::equal(project(x, w), at::linear(x, w)));
    QVERIFY(!gemvProjects(kMaxGemvRows + 1));
    const RowSegmentsScope decoding(std::vector<int64_t>(kMaxGemvRows + 1, 1));
    QVERIFY(gemvProjects(kMaxGemvRows + 1));
    QVERIFY(decodingRows(kMaxGemvRows + 1));
    QVERIFY(!decodingRows(kMaxGemvRows + 2));  // rows the segments do not describe: one step
  }

  void gatedMlpAndRmsNormOfARowAreTheSameInEveryBatch() {
    at::manual_seed(13);
    const MatmulScope scope(MatmulKernel::Auto);
    const at::Tensor gate = (at::randn({96, 64}) * 0.1).to(at::kBFloat16);
    const at::Tensor up = (at::randn({96, 64}) * 0.1).to(at::kBFloat16);
    const at::Tensor down = (at::randn({64, 96}) * 0.1).to(at::kBFloat16);
    const at::Tensor x = at::randn({40, 64}).to(at::kBFloat16);
    const RowFunction mlp = [&](const at::Tensor& rows) { return gatedMlp(rows, gate, up, down); };
    for (const int64_t n : {2, 3, 8, 9, 16, 31, 32}) QVERIFY2(decodingRowsEqualAlone(x, n, mlp), qPrintable(QString::number(n)));
    QVERIFY(mixedStepsEqualAlone(x, mlp));
    // Rows wide enough that a batch of them exceeds kMaxNormElements, a single row does not.
    const at::Tensor normWeight = at::randn({4096}).to(at::kBFloat16);
    const at::Tensor wide = at::randn({40, 4096}).to(at::kBFloat16);
    const RowFunction norm = [&](const at::Tensor& rows) { return rmsNorm(rows, normWeight, 1e-6); };
    for (const int64_t n : {2, 17, 32}) QVERIFY2(decodingRowsEqualAlone(wide, n, norm), qPrintable(QString::number(n)));
    QVERIFY(mixedStepsEqualAlone(wide, norm));
  }

  // Attention of a long step attends kAttentionQueryChunk queries at a time (the bound serving's
  // memory split reserves): the result is still one causal softmax over each query's whole window.
  void causalAttentionInChunksIsTheWholeWindowsSoftmax() {
    at::manual_seed(17);
    const int64_t heads = 4, kvHeads = 2, d = 16, past = 30;
    for (const int64_t n : {int64_t{1}, kAttentionQueryChunk, kAttentionQueryChunk + 1, 3 * kAttentionQueryChunk + 5}) {
      const int64_t total = past + n;
      const at::Tensor q = at::randn({heads, n, d}, at::kDouble), k = at::randn({kvHeads, total, d}, at::kDouble);
      const at::Tensor v = at::randn({kvHeads, total, d}, at::kDouble);
      const at::Tensor got = causalAttention(q, k, v, 0.25);  // [n, heads × d]
      QCOMPARE(got.size(0), n);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t seen = past + i + 1, g = h / (heads / kvHeads);
          const at::Tensor scores = at::mv(k[g].narrow(0, 0, seen), q[h][i]) * 0.25;
          const at::Tensor want = at::mv(v[g].narrow(0, 0, seen).t(), at::softmax(scores, 0));
          QVERIFY2(at::allclose(got[i].narrow(0, h * d, d), want, 1e-5, 1e-6),  // the softmax runs in fp32
                   qPrintable(QString("n %1, query %2, head %3").arg(n).arg(i).arg(h)));
        }
    }
  }
};

QTEST_APPLESS_MAIN(TestBatchInvariance)
#include "test_batch_invariance.moc"
