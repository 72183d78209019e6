// BF16 matrix products of prefill on Intel AMX tiles: y = x · Wᵀ for a step of many rows, W row-major
// [rows × cols] in BF16 (its words in place, or a 16-row block of words at a time from the split
// planes or nibble codes), x [batch × cols] BF16, accumulated in fp32 and rounded to BF16 once.
//
// Why not libtorch's product: oneDNN compiles a kernel for every shape it has not met in the process
// (2–3 ms each, docs/bench/run36/kernels.txt), and a prefill's experts come with every row count;
// and a compressed expert must first be merged into a whole BF16 tensor for it. Here the weight
// streams through the tiles once per 64 rows of x, with no copy of it; a compressed expert's words
// are made 16 rows at a time in L1/L2, never as a whole tensor. (Once oneDNN has its kernel, its
// product is as fast or faster from about 64 rows: model/linear.h, kMaxTileRows.)
//
// The product is computed as Cᵀ = W · xᵀ: a tile of W (16 rows × 32 columns) is loaded straight
// from its row-major words, and x is packed once per product into the pairs layout tdpbf16ps wants
// for its other operand (packX). For every output (n, m) the fp32 sum runs over the columns in
// blocks of 32, in the same order whatever the batch, the rows' grouping or the thread: a row's
// result does not depend on the other rows of the product (batch invariance, model/linear.h), and
// words, planes and codes give the same result (the same words reach the tiles).
// Thread-safety: pure functions; callers split the 16-row blocks of W between threads.
// Cost: per 64 rows of x, W read once (2 bytes a weight; 1.5 from nibble codes) and
// rows × cols × 64 × 2 flops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace zipmoe::kernels {

// Whether this process can run AMX-BF16 tiles: the CPU has AMX-TILE and AMX-BF16 and the kernel
// granted the tile state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once).
bool amxSupported();

// Whether a product of `rows` × `cols` runs on the tiles: AMX is supported, cols is a multiple of 32
// and rows of 16.
bool amxTakes(size_t rows, size_t cols);

// x [batch × cols] packed for the tiles: batch padded with zero rows to a multiple of 16, each block
// of 16 rows as cols/2 lines of (x[m][2i], x[m][2i+1]) for m = 0..15. REQUIRES: cols is even.
std::vector<uint16_t> packX(const uint16_t* x, size_t batch, size_t cols);

// W's words for rows [rowBegin, rowBegin + 16), row-major, written to out (16 × cols words).
using RowBlockWords = std::function<void(size_t rowBegin, uint16_t* out)>;

// For the 16-row blocks [blockBegin, blockEnd) of W: out[m · ldo + r] = BF16(Σ_c W[r][c] · x[m][c]
// + bias[r]) for m < batch. W from `words` (row-major, rows × cols) when not null, else from
// `rowWords`; bias may be null. `packed` is packX(x, batch, cols).
// REQUIRES: amxTakes(rows, cols); blockEnd ≤ rows / 16; ldo ≥ rows.
void amxProductRows(const uint16_t* words, const RowBlockWords& rowWords, size_t cols, const uint16_t* packed,
                    size_t batch, const float* bias, size_t blockBegin, size_t blockEnd, uint16_t* out, size_t ldo);

}  // namespace zipmoe::kernels
