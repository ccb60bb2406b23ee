// Runtime instruction-set dispatch, the library's one mechanism: on x86 with GCC or Clang, hot
// loops are also compiled with function target attributes (AVX2+FMA, AVX-512) and the widest one
// the CPU supports (__builtin_cpu_supports) is picked once. Every other target (aarch64,
// ppc64le, MSVC) builds the portable code only, which the compiler vectorises for its baseline.
#pragma once

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define SC_MULTI_ISA 1
#endif
