/* Makes a patched library see a CPU without AVX-512 (benchmarks only; bench/cpuid_avx2.py).
 *
 * Some peers pick their kernels from the CPUID instruction and offer no switch to cap them
 * (ONNX Runtime's MLAS). bench/cpuid_avx2.py copies such a library and replaces each of its
 * CPUID instructions (0F A2) with INT3 + NOP (CC 90). This file's SIGTRAP handler then stands in
 * for the instruction: it runs the real CPUID for the trapped RAX/RCX and clears the AVX-512
 * feature bits before handing the registers back, so the library takes its AVX2 + FMA kernels
 * as on an AVX2-only machine. The NOP after the trap is executed as is.
 *
 * Built by bench/cpuid_avx2.py with `cc -shared -fPIC`; loaded through ctypes, which runs
 * install() before the patched library is imported.
 */
#define _GNU_SOURCE /* REG_RAX and the other register names of ucontext.h */
#include <cpuid.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

static atomic_long trapped;

/* CPUID.(EAX=7, ECX=0): AVX512F 16, DQ 17, IFMA 21, PF 26, ER 27, CD 28, BW 30, VL 31 (EBX);
 * VBMI 1, VBMI2 6, VNNI 11, BITALG 12, VPOPCNTDQ 14 (ECX); 4VNNIW 2, 4FMAPS 3, VP2INTERSECT 8,
 * FP16 23 (EDX). CPUID.(EAX=7, ECX=1): BF16 5 (EAX). */
static const uint32_t kLeaf7Ebx = (1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) |
                                  (1u << 28) | (1u << 30) | (1u << 31);
static const uint32_t kLeaf7Ecx = (1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14);
static const uint32_t kLeaf7Edx = (1u << 2) | (1u << 3) | (1u << 8) | (1u << 23);
static const uint32_t kLeaf7Sub1Eax = 1u << 5;

static void on_trap(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)info;
  greg_t* r = ((ucontext_t*)context)->uc_mcontext.gregs;
  uint32_t leaf = (uint32_t)r[REG_RAX], sub = (uint32_t)r[REG_RCX];
  uint32_t a, b, c, d;
  __cpuid_count(leaf, sub, a, b, c, d);
  if (leaf == 7 && sub == 0) {
    b &= ~kLeaf7Ebx;
    c &= ~kLeaf7Ecx;
    d &= ~kLeaf7Edx;
  } else if (leaf == 7 && sub == 1) {
    a &= ~kLeaf7Sub1Eax;
  }
  /* CPUID writes the four registers zero-extended to 64 bits. */
  r[REG_RAX] = a;
  r[REG_RBX] = b;
  r[REG_RCX] = c;
  r[REG_RDX] = d;
  atomic_fetch_add(&trapped, 1);
}

int install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_trap;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGTRAP, &sa, 0);
}

/* How many CPUID instructions the handler has answered: 0 after the import means the patch
 * did not take and the caller must not report the run as AVX2. */
long trapped_count(void) { return atomic_load(&trapped); }
