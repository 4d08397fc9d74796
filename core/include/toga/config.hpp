//! @file toga/config.hpp
//! Attribute macros shared by the core and every backend.
//!
//! The core is plain C++20 and is compiled by g++ (simulator, native threads) and by nvcc
//! (CUDA backend). These macros expand to CUDA attributes only under nvcc, so that no core
//! header ever needs `#ifdef __CUDACC__` in its logic (the CCCL practice).
#pragma once

#if defined(__CUDACC__)
#define TOGA_HOST_DEVICE __host__ __device__
#define TOGA_DEVICE __device__
#define TOGA_FORCEINLINE __forceinline__
#define TOGA_NOINLINE __noinline__
#else
#define TOGA_HOST_DEVICE
#define TOGA_DEVICE
#define TOGA_FORCEINLINE inline __attribute__((always_inline))
#define TOGA_NOINLINE __attribute__((noinline))
#endif
// TOGA_NOINLINE keeps cold paths (reclamation under memory pressure, making new bins) out of the
// hot path's register allocation on the GPU.

//! `noexcept` for core operations, conditional on the platform.
//!
//! Device code is `noexcept`. The simulator, however, stops the lanes of an aborted schedule
//! (deadlock, failed invariant, ...) by unwinding their fibers with an exception, which must
//! not meet a `noexcept` frame. Core functions therefore write `TOGA_NOEXCEPT(P)`, which is
//! `noexcept` exactly when `P::noexcept_ops` is true (CUDA, native threads) and not in the
//! simulator.
#define TOGA_NOEXCEPT(P) noexcept(P::noexcept_ops)
