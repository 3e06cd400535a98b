#pragma once
// The CPU backend's kernels (one file per family); each file puts its own into the table
// (its add_<file>_kernels, ops/cpu/register.h).
#include "ops/backend.h"

namespace loom::cpu {
using detail::BinaryOp;
using detail::RandomKind;
using detail::ReduceOp;
using detail::UnaryOp;

void copy(const Tensor& dst, const Tensor& src);
void fill(const Tensor& dst, Scalar value);
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void unary(UnaryOp op, const Tensor& out, const Tensor& x);
void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
void reduce(ReduceOp op, const Tensor& out, const Tensor& x, const std::vector<bool>& reduced);
double sum_squares_f32(const Tensor& x);
void cumsum(const Tensor& out, const Tensor& x, int64_t axis);
void matmul(const Tensor& out, const Tensor& a, const Tensor& b);
bool matmul_bias(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias);
void matmul_int8(const Tensor& out, const Tensor& x, const Tensor& q, const Tensor& scales, int64_t group, const Tensor& bias);
void take(const Tensor& out, const Tensor& x, int64_t axis, const Tensor& index);
void index_add(const Tensor& dst, int64_t axis, const Tensor& index, const Tensor& src);
void take_along(const Tensor& out, const Tensor& x, int64_t axis, const Tensor& index);
void scatter_add_along(const Tensor& dst, int64_t axis, const Tensor& index, const Tensor& src);
void put(const Tensor& dst_flat, const Tensor& index, const Tensor& src);
Tensor nonzero(const Tensor& x);
void random(RandomKind kind, const Tensor& out, uint64_t key, double a, double b);
void elementwise_chain(const Tensor& out, const detail::ElementwiseChain& chain, const std::vector<Tensor>& inputs);
void init_blas_threads();
// fused fast paths of composite ops (softmax.cpp, gelu.cpp, cross_entropy.cpp): see Backend
void softmax_lastdim_f32(const Tensor& out, const Tensor& x, bool log);
void gelu_tanh_f32(const Tensor& out, const Tensor& x);
void gelu_tanh_backward_f32(const Tensor& gx, const Tensor& g, const Tensor& x);
void cross_entropy_rows_f32(const Tensor& loss, const Tensor& m, const Tensor& ls, const Tensor& x, const Tensor& t,
                            int64_t ignore_index);
void cross_entropy_rows_backward_f32(const Tensor& gx, const Tensor& g, const Tensor& x, const Tensor& m, const Tensor& ls,
                                     const Tensor& t, int64_t ignore_index);
// the optimizers' fused updates (optimizers.cpp): see Backend
void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const detail::SGDStep& s,
                int64_t begin, int64_t end);
void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& max_exp_avg_sq, const detail::AdamStep& s, int64_t begin, int64_t end);
void rmsprop_update(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                    const Tensor& momentum_buffer, const detail::RMSPropStep& s, int64_t begin, int64_t end);
void adagrad_update(const Tensor& param, const Tensor& grad, const Tensor& sum, const detail::AdagradStep& s,
                    int64_t begin, int64_t end);
// (dense linear algebra, linalg.cpp: its kernels are that file's own, filled into slots
// declared beside their ops)

}  // namespace loom::cpu
