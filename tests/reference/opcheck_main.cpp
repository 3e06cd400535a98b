// loom_opcheck OUTDIR: runs every case of the op table and writes, per case, the inputs, the
// output, a random cotangent and Loom's autograd gradients of the differentiable inputs as
// .npy files, plus OUTDIR/manifest.json for tests/reference/check_ops.py to replay in PyTorch.
// Exits non-zero when a registry op has no case, or a differentiable op has no case with a
// differentiable input.
#include <loom/data/npy.h>
#include <loom/loom.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "reference/json_util.h"
#include "reference/op_cases.h"

using namespace loom;
using namespace loom::reftest;

namespace {

// Through Loom's NPY writer, which tests/data checks against NumPy itself.
void write_npy(const std::filesystem::path& path, const Tensor& t) { data::save_npy(path.string(), t.detach()); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: loom_opcheck OUTDIR\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);

  int status = 0;
  for (const auto& op : ops_without_cases()) {
    std::cerr << "loom_opcheck: registry op '" << op << "' has no test case\n";
    status = 1;
  }
  for (const auto& op : differentiable_ops_without_grad_cases(false)) {
    std::cerr << "loom_opcheck: differentiable op '" << op << "' has no case with a differentiable input\n";
    status = 1;
  }

  const auto& cases = op_cases();
  std::string m = "{\n\"registry\": [";
  for (size_t i = 0; i < op_registry().size(); ++i) {
    const auto& op = op_registry()[i];
    m += (i ? ",\n  " : "\n  ") + std::string("{\"name\": ") + json_str(op.name) +
         ", \"differentiable\": " + (op.differentiable ? "true" : "false") + "}";
  }
  m += "],\n\"cases\": [";
  int errors = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const OpCase& c = cases[ci];
    const std::string pre = "c" + std::to_string(ci);
    std::string entry = "{\"op\": " + json_str(c.op) + ", \"label\": " + json_str(c.label) + ", \"attrs\": " + c.attrs;
    std::string error;
    std::string inputs = "[", out_json = "null", cot_json = "null", grads = "[";
    try {
      std::vector<Tensor> in = make_inputs(c, ci + 1);
      std::vector<Tensor> diff;
      for (size_t k = 0; k < in.size(); ++k) {
        const std::string f = pre + "_in" + std::to_string(k) + ".npy";
        write_npy(dir / f, in[k]);
        inputs += std::string(k ? ", " : "") + "{\"file\": " + json_str(f) + ", \"dtype\": " + json_str(dtype_name(in[k].dtype())) +
                  ", \"shape\": " + json_shape(in[k].shape()) + ", \"diff\": " + (in[k].requires_grad() ? "true" : "false") + "}";
        if (in[k].requires_grad()) diff.push_back(in[k]);
      }
      Tensor out = c.fn(in);
      const std::string of = pre + "_out.npy";
      write_npy(dir / of, out);
      out_json = "{\"file\": " + json_str(of) + ", \"dtype\": " + json_str(dtype_name(out.dtype())) +
                 ", \"shape\": " + json_shape(out.shape()) + "}";
      std::vector<Tensor> g;
      if (!diff.empty()) {
        if (!is_floating(out.dtype())) throw Error("a differentiable case produced a non-floating output");
        Tensor cot = random_cotangent(out.shape(), out.dtype(), ci + 1);
        const std::string cf = pre + "_cot.npy";
        write_npy(dir / cf, cot);
        cot_json = json_str(cf);
        g = loom::grad(out, diff, cot);
        // backward() with the cotangent as seed must accumulate the same gradients into .grad()
        loom::backward(out, cot);
        for (size_t k = 0; k < diff.size(); ++k) {
          const Tensor acc = diff[k].grad();
          NoGrad off;
          if (!acc.defined() ? !array_equal(g[k], zeros_like(g[k]))
                             : !(acc.shape() == g[k].shape() && allclose(acc, g[k], 1e-6, 1e-12, true)))
            throw Error("backward() and grad() disagree on the gradient of differentiable input " + std::to_string(k));
        }
      }
      size_t gi = 0;
      for (size_t k = 0; k < in.size(); ++k) {
        grads += k ? ", " : "";
        if (!in[k].requires_grad()) {
          grads += "null";
          continue;
        }
        const std::string gf = pre + "_grad" + std::to_string(k) + ".npy";
        const Tensor& gk = g.at(gi++);
        if (gk.shape() != in[k].shape() || gk.dtype() != in[k].dtype())
          throw Error("gradient of input " + std::to_string(k) + " has " + dtype_name(gk.dtype()) + " " +
                      shape_str(gk.shape()) + ", the input " + dtype_name(in[k].dtype()) + " " + shape_str(in[k].shape()));
        write_npy(dir / gf, gk);
        grads += json_str(gf);
      }
    } catch (const std::exception& e) {
      error = e.what();
      ++errors;
      std::cerr << "loom_opcheck: " << c.op << " [" << c.label << "] threw: " << e.what() << "\n";
    }
    entry += ", \"inputs\": " + inputs + "], \"output\": " + out_json + ", \"cotangent\": " + cot_json +
             ", \"grads\": " + grads + "], \"error\": " + (error.empty() ? "null" : json_str(error)) + "}";
    m += (ci ? ",\n  " : "\n  ") + entry;
  }
  m += "]\n}\n";
  std::ofstream(dir / "manifest.json") << m;
  std::cout << "loom_opcheck: wrote " << cases.size() << " cases (" << errors << " raised) to " << dir.string() << "\n";
  return status;
}
