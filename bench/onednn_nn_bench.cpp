// Loom's own pooling and normalization kernels against oneDNN 2.6's primitives called
// directly, on the main job's shapes (float32, plain NCHW layouts). Prints JSON lines; the
// faster of the two is what Loom should run. One function per op family.
#include <loom/loom.h>
#include <omp.h>

#include "timing.h"

#include <cstdio>
#include <functional>
#include <string>
#include <unordered_map>
#include <oneapi/dnnl/dnnl.hpp>

using namespace loom;

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct Dnnl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
};

double median_seconds(const std::function<void()>& f) { return bench::measure(f).median; }

// oneDNN's primitives run on an OpenMP team of `threads`: set just before timing them, because
// Loom's calls set the calling thread's OpenMP count to 1 (its oneDNN work runs on batch slices).
double onednn_seconds(int threads, const std::function<void()>& f) {
  omp_set_num_threads(threads);
  return median_seconds(f);
}

void print(const char* name, int threads, double s) {
  std::printf("{\"name\": \"%s\", \"threads\": %d, \"seconds\": %.9g}\n", name, threads, s);
  std::fflush(stdout);
}

// One oneDNN pooling geometry (plain NCHW): forward (training form with the workspace when
// `training`) and, on request, the backward primitive.
struct DnnlPool {
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward bwd;
  dnnl::memory src, dst, ws, dsrc, ddst;
  bool has_ws = false;

  DnnlPool(Dnnl& d, dnnl::algorithm alg, bool training, const Tensor& x, const Tensor& y, const Tensor& gx,
           const Tensor& gy, int64_t k, int64_t s, int64_t pad) {
    auto dims = [](const Tensor& t) { return dnnl::memory::dims(t.shape().begin(), t.shape().end()); };
    dnnl::memory::desc xs(dims(x), dt::f32, tag::nchw), ys(dims(y), dt::f32, tag::nchw);
    const int64_t pad_r = (y.shape()[2] - 1) * s + k - x.shape()[2] - pad;
    dnnl::pooling_forward::desc fd(training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference,
                                   alg, xs, ys, {s, s}, {k, k}, {pad, pad}, {pad_r, pad_r});
    dnnl::pooling_forward::primitive_desc fpd(fd, d.eng);
    fwd = dnnl::pooling_forward(fpd);
    src = dnnl::memory(xs, d.eng, x.data_ptr());
    dst = dnnl::memory(ys, d.eng, y.data_ptr());
    has_ws = training && fpd.workspace_desc().get_size() > 0;
    if (has_ws) ws = dnnl::memory(fpd.workspace_desc(), d.eng);
    if (training) {
      dnnl::pooling_backward::desc bd(alg, xs, ys, {s, s}, {k, k}, {pad, pad}, {pad_r, pad_r});
      bwd = dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(bd, d.eng, fpd));
      dsrc = dnnl::memory(xs, d.eng, gx.data_ptr());
      ddst = dnnl::memory(ys, d.eng, gy.data_ptr());
    }
  }
  void forward(Dnnl& d) {
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
    if (has_ws) args.emplace(DNNL_ARG_WORKSPACE, ws);
    fwd.execute(d.strm, args);
    d.strm.wait();
  }
  void forward_backward(Dnnl& d) {
    forward(d);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_SRC, dsrc}};
    if (has_ws) args.emplace(DNNL_ARG_WORKSPACE, ws);
    bwd.execute(d.strm, args);
    d.strm.wait();
  }
};

// Forward (no gradient wanted: values only) and forward + backward of Loom's pooling against
// oneDNN's primitives.
void bench_pool_case(Dnnl& d, int threads, const std::string& name, bool max, int64_t k, int64_t s, int64_t pad,
                     const Shape& shape) {
  Tensor x = uniform(shape);
  auto pool = [&](const Tensor& t) { return max ? max_pool2d(t, k, s, pad) : avg_pool2d(t, k, s, pad); };
  const Tensor y0 = pool(x);
  Tensor y = empty_like(y0), gy = uniform(y0.shape()), gx = empty_like(x);
  const auto alg = max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_include_padding;
  print((name + "_fwd_loom").c_str(), threads, median_seconds([&] { pool(x); }));
  omp_set_num_threads(threads);  // primitives may tune for the team they are created with
  DnnlPool inference(d, alg, false, x, y, gx, gy, k, s, pad);
  print((name + "_fwd_onednn").c_str(), threads, onednn_seconds(threads, [&] { inference.forward(d); }));
  Tensor xg = x.detach().requires_grad_(true);
  print((name + "_fwdbwd_loom").c_str(), threads, median_seconds([&] {
          xg.zero_grad();
          backward(pool(xg), gy);
        }));
  omp_set_num_threads(threads);
  DnnlPool training(d, alg, true, x, y, gx, gy, k, s, pad);
  print((name + "_fwdbwd_onednn").c_str(), threads, onednn_seconds(threads, [&] { training.forward_backward(d); }));
}

void bench_pooling(Dnnl& d, int threads) {
  bench_pool_case(d, threads, "maxpool2x2_n128_c32_28", true, 2, 2, 0, {128, 32, 28, 28});
  bench_pool_case(d, threads, "avgpool2x2_n128_c32_28", false, 2, 2, 0, {128, 32, 28, 28});
  bench_pool_case(d, threads, "maxpool3x3s2p1_n32_c64_56", true, 3, 2, 1, {32, 64, 56, 56});
}

void bench_batch_norm(Dnnl& d, int threads) {
  const int64_t N = 128, C = 32, H = 28, W = 28;
  Tensor x = uniform({N, C, H, W});
  // training statistics, with scale and shift
  Tensor w = ones({C}), b = zeros({C}), rm = zeros({C}), rv = ones({C});
  print("batchnorm_train_n128_c32_28_loom", threads, median_seconds([&] { batch_norm(x, rm, rv, w, b, true); }));
  omp_set_num_threads(threads);
  dnnl::memory::desc src({N, C, H, W}, dt::f32, tag::nchw);
  Tensor out = empty_like(x), mean = empty({C}), var = empty({C}), ss = empty({2, C});
  dnnl::batch_normalization_forward::desc bd(dnnl::prop_kind::forward_training, src, 1e-5f,
                                             dnnl::normalization_flags::use_scale_shift);
  dnnl::batch_normalization_forward bn(dnnl::batch_normalization_forward::primitive_desc(bd, d.eng));
  dnnl::memory::desc cdesc({C}, dt::f32, tag::x), ssdesc({2, C}, dt::f32, tag::nc);
  dnnl::memory msrc(src, d.eng, x.data_ptr()), mo(src, d.eng, out.data_ptr()), mm(cdesc, d.eng, mean.data_ptr()),
      mv(cdesc, d.eng, var.data_ptr()), mss(ssdesc, d.eng, ss.data_ptr());
  print("batchnorm_train_n128_c32_28_onednn", threads, onednn_seconds(threads, [&] {
          bn.execute(d.strm, {{DNNL_ARG_SRC, msrc}, {DNNL_ARG_DST, mo}, {DNNL_ARG_MEAN, mm}, {DNNL_ARG_VARIANCE, mv},
                              {DNNL_ARG_SCALE_SHIFT, mss}});
          d.strm.wait();
        }));
}

// Layer norm over the last axis of (rows, cols), affine, float32: Loom's fused kernels, the
// composite Loom ran before them (written out with the same ops), and oneDNN's
// layer_normalization primitives (forward_training; backward with diff scale / shift).
void bench_layer_norm_case(Dnnl& d, int threads, int64_t rows, int64_t cols) {
  const std::string name = "layernorm_" + std::to_string(rows) + "x" + std::to_string(cols);
  const double eps = 1e-5;
  Tensor x = normal({rows, cols}), w = normal({cols}, 1.0, 0.1), b = normal({cols}, 0.0, 0.1);
  Tensor gy = uniform({rows, cols});
  auto composite = [&](const Tensor& t, const Tensor& tw, const Tensor& tb) {
    Tensor c = t - mean(t, {1}, true);
    return c * rsqrt(mean(square(c), {1}, true) + eps) * tw + tb;
  };
  print((name + "_fwd_composite").c_str(), threads, median_seconds([&] { composite(x, w, b); }));
  print((name + "_fwd_loom").c_str(), threads, median_seconds([&] { layer_norm(x, {cols}, w, b, eps); }));
  Tensor xg = x.detach().requires_grad_(true), wg = w.detach().requires_grad_(true), bg = b.detach().requires_grad_(true);
  auto zero = [&] {
    xg.zero_grad();
    wg.zero_grad();
    bg.zero_grad();
  };
  print((name + "_fwdbwd_composite").c_str(), threads, median_seconds([&] {
          zero();
          backward(composite(xg, wg, bg), gy);
        }));
  print((name + "_fwdbwd_loom").c_str(), threads, median_seconds([&] {
          zero();
          backward(layer_norm(xg, {cols}, wg, bg, eps), gy);
        }));
  omp_set_num_threads(threads);
  dnnl::memory::desc data({rows, cols}, dt::f32, tag::ab), stat({rows}, dt::f32, tag::a), cvec({cols}, dt::f32, tag::a);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  dnnl::layer_normalization_forward::primitive_desc fpd(
      dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_training, data, stat, static_cast<float>(eps), flags),
      d.eng);
  dnnl::layer_normalization_backward::primitive_desc bpd(
      dnnl::layer_normalization_backward::desc(dnnl::prop_kind::backward, data, data, stat, static_cast<float>(eps), flags),
      d.eng, fpd);
  dnnl::layer_normalization_forward fwd(fpd);
  dnnl::layer_normalization_backward bwd(bpd);
  Tensor y = empty_like(x), mu = empty({rows}), var = empty({rows}), gx = empty_like(x), gw = empty({cols}),
         gb = empty({cols});
  auto mem = [&](const dnnl::memory::desc& md, const Tensor& t) { return dnnl::memory(md, d.eng, t.data_ptr()); };
  dnnl::memory mx = mem(data, x), my = mem(data, y), mm = mem(stat, mu), mv = mem(stat, var), mw = mem(cvec, w),
               mb = mem(cvec, b), mgy = mem(data, gy), mgx = mem(data, gx), mgw = mem(cvec, gw), mgb = mem(cvec, gb);
  auto forward = [&] {
    fwd.execute(d.strm, {{DNNL_ARG_SRC, mx}, {DNNL_ARG_DST, my}, {DNNL_ARG_MEAN, mm}, {DNNL_ARG_VARIANCE, mv},
                         {DNNL_ARG_SCALE, mw}, {DNNL_ARG_SHIFT, mb}});
    d.strm.wait();
  };
  print((name + "_fwd_onednn").c_str(), threads, onednn_seconds(threads, forward));
  print((name + "_fwdbwd_onednn").c_str(), threads, onednn_seconds(threads, [&] {
          forward();
          bwd.execute(d.strm, {{DNNL_ARG_SRC, mx}, {DNNL_ARG_MEAN, mm}, {DNNL_ARG_VARIANCE, mv}, {DNNL_ARG_DIFF_DST, mgy},
                               {DNNL_ARG_SCALE, mw}, {DNNL_ARG_SHIFT, mb},  // 2.6 wants the shift too
                               {DNNL_ARG_DIFF_SRC, mgx}, {DNNL_ARG_DIFF_SCALE, mgw}, {DNNL_ARG_DIFF_SHIFT, mgb}});
          d.strm.wait();
        }));
}

void bench_layer_norm(Dnnl& d, int threads) {
  bench_layer_norm_case(d, threads, 4096, 512);  // batch 32 x sequence 128, d_model 512
  bench_layer_norm_case(d, threads, 128, 64);
}

}  // namespace

int main() {
  Dnnl d;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    omp_set_num_threads(threads);
    bench_pooling(d, threads);
    bench_batch_norm(d, threads);
    bench_layer_norm(d, threads);
  }
  return 0;
}
