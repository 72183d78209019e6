// project(): the project's GEMV under every kernel choice against at::linear (libtorch's BF16 path),
// with and without bias, for 1-D/2-D/3-D activations; and the cases that must stay at::linear
// exactly (more rows than kMaxGemvRows, fp32, a transposed weight).
// libtorch before Qt: Qt's `slots` macro would rewrite a libtorch method of that name.
#include <ATen/ATen.h>

#include "model/linear.h"

#include <QtTest>
#include "test_support.h"
#include "zipmoe/error.h"
#include "zipmoe/model.h"

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

  void kernelNames() {
    QCOMPARE(QString(matmulKernelName(MatmulKernel::Auto)), QString("auto"));
    QCOMPARE(QString(matmulKernelName(MatmulKernel::Libtorch)), QString("libtorch"));
    QCOMPARE(QString(matmulKernelName(MatmulKernel::Avx512Bf16)), QString("avx512-bf16"));
    QVERIFY(matmulKernelSupported(MatmulKernel::Scalar));
  }
};

QTEST_APPLESS_MAIN(TestLinear)
#include "test_linear.moc"
