// zipmoe::cuda — tensor recovery on the GPU: merges an exponent plane and a sign-mantissa plane into
// BF16 words where the compute will read them (docs/ARCHITECTURE.md, "The path of one chunk").
//
// Word i is rebuilt as  w = ((SM >> 7) << 15) | (E << 7) | (SM & 0x7F)  — the same formula as
// zipmoe::bf16::merge, bit for bit. The kernel is memory-coalesced: each thread loads 16 exponent and
// 16 sign-mantissa bytes with one vector load each, assembles 16 words in registers and writes them
// with two 16-byte stores. It takes that path whenever the three pointers can be brought to 16-byte
// alignment by the same element offset (always true for buffers from cudaMalloc and for equal
// element offsets into them); any other alignment runs a scalar, still coalesced, kernel.
//
// A plain C++ header with no CUDA types, so that code compiled without nvcc can include it; the
// implementation (recover_kernel.cu) needs the CUDA runtime.
// Thread-safety: all functions are re-entrant; recover() only enqueues work on the given stream.
// Cost: memory-bandwidth bound — 4 bytes of traffic per word (2 read, 2 written).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace zipmoe::cuda {

// True when the CUDA runtime finds at least one device. When it finds none (no driver, no GPU, a
// driver too old for this runtime), returns false and, if `reason` is given, stores why.
bool available(std::string* reason = nullptr);

// Enqueues the recovery of `count` words on `stream` (a cudaStream_t; nullptr is the legacy default
// stream) and returns without waiting. Throws zipmoe::Error naming the CUDA call and its error string
// if the launch fails; errors of the kernel itself surface at the next synchronising call.
// REQUIRES: all three are device-accessible pointers to at least `count` elements (when count > 0),
//           outDevice is 2-byte aligned, and the output does not overlap either input.
void recover(const uint8_t* exponentsDevice, const uint8_t* signMantissaDevice, uint16_t* outDevice,
             size_t count, void* stream);

// Host convenience for tests and tools: copies both planes to the device, recovers, copies the words
// back and waits. Throws zipmoe::Error naming the CUDA call and its error string on any failure.
void recoverHost(const uint8_t* exponents, const uint8_t* signMantissa, uint16_t* out, size_t count);

}  // namespace zipmoe::cuda
