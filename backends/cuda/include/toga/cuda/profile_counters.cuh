//! @file toga/cuda/profile_counters.cuh
//! Profiling builds only (never in the library): counters for config.hpp's profiling events in
//! a `__device__ unsigned long long toga_prof[64]` that this header defines, and phase times
//! (clock64 cycles, summed over the threads that ran the phase) in the same array. Include it
//! before any toga header, in one translation unit of a profiling tool or test (tbuddy-profile,
//! the growth service's GPU test built with -DSVC_PROFILE). A file that wants more per event
//! (per-thread event bits) defines TOGA_PROFILE_COUNT itself before including this header.
//! The counters are atomics: a profiling build's timings are not the figures.
#pragma once

__device__ unsigned long long toga_prof[64];  // (config.hpp's events: fewer than 64)
#ifndef TOGA_PROFILE_COUNT
#define TOGA_PROFILE_COUNT(e) atomicAdd(&toga_prof[(e)], 1ull)
#endif
#define TOGA_PROFILE_START long long toga_t0 = clock64()
#define TOGA_PROFILE_PHASE(e)                                         \
  do {                                                                \
    const long long now_ = clock64();                                 \
    atomicAdd(&toga_prof[(e)], (unsigned long long)(now_ - toga_t0)); \
    toga_t0 = now_;                                                   \
  } while (0)
