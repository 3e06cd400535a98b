// A fused chain of float32 elementwise ops (the graph compiler's elementwise groups): each block
// of elements runs every step of the chain while it is in L1, so the inputs are read once and
// the output written once, instead of one full pass and one temporary per op. The steps are
// the same vector kernels as the eager ops, so the result is bit for bit the eager one's.
#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/register.h"
#include "ops/cpu/simd/simd.h"

namespace loom::cpu {

namespace {

constexpr int64_t kBlock = 2048;  // floats per block: 8 KiB per stream

using Op = detail::ElementwiseChain::Op;

}  // namespace

void elementwise_chain(const Tensor& out, const detail::ElementwiseChain& chain, const std::vector<Tensor>& inputs) {
  const simd::Table& t = simd::table();
  std::vector<const float*> in;
  in.reserve(inputs.size());
  for (const Tensor& x : inputs) in.push_back(x.data<float>());
  float* o = out.data<float>();
  parallel_range(0, out.numel(), kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t b = i0; b < i1; b += kBlock) {
      const int64_t n = std::min(kBlock, i1 - b);
      const float* acc = in[static_cast<size_t>(chain.start)] + b;
      float* dst = o + b;
      for (const detail::ElementwiseChain::Step& s : chain.steps) {
        const float* other = s.operand >= 0 ? in[static_cast<size_t>(s.operand)] + b : nullptr;
        int bin = -1, un = -1;
        switch (s.op) {
          case Op::Add: bin = simd::kAdd; break;
          case Op::Sub: bin = simd::kSub; break;
          case Op::Mul: bin = simd::kMul; break;
          case Op::Relu: un = simd::kRelu; break;
          case Op::Sigmoid: un = simd::kSigmoid; break;
          case Op::Tanh: un = simd::kTanh; break;
        }
        if (bin >= 0) {
          if (s.acc_first) t.binary_vv[bin](dst, acc, other, n);
          else t.binary_vv[bin](dst, other, acc, n);
        } else {
          t.unary[un](dst, acc, n);
        }
        acc = dst;
      }
    }
  });
}

// This file's kernels in the CPU table (register.cpp), each by the name of the slot its op
// declares (src/ops/fused_elementwise.cpp), with its signature, which the slot checks.
void add_elementwise_chain_kernels(detail::Backend& b) {
  b.kernels.fill("fused.elementwise_chain", &cpu::elementwise_chain);
}

}  // namespace loom::cpu
