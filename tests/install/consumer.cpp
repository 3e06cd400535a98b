#include <loom/loom.h>

#include <cstdio>

int main() {
  loom::Tensor x = loom::arange(0, 6, 1).reshape({2, 3}).requires_grad_();
  loom::Tensor y = loom::sum(loom::square(x));
  y.backward();
  // d/dx sum(x^2) = 2x, so the gradient sums to 2 * (0 + 1 + ... + 5) = 30
  const float total = loom::sum(x.grad()).item<float>();
  std::printf("%s\n", total == 30.0f ? "ok" : "wrong");
  return total == 30.0f ? 0 : 1;
}
