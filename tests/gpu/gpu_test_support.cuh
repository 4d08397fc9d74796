//! @file tests/gpu/gpu_test_support.cuh
//! What every GPU test file needs: skip cleanly without a usable device, and check CUDA calls
//! with the error's name, the call and the line.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace toga::test {
//! Empty when a CUDA device is usable, else why not (and the CUDA error is cleared).
inline std::string no_cuda_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  }
  return n == 0 ? "cudaGetDeviceCount returned 0" : "";
}

//! Owning device buffer of n T's (freed on destruction); fill `ptr` and `n` with cudaMalloc.
template <class T>
struct device_buffer {
  T* ptr = nullptr;
  std::size_t n = 0;
  device_buffer() = default;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() {
    if (ptr != nullptr) (void)cudaFree(ptr);
  }
  std::size_t bytes() const { return n * sizeof(T); }
};
}  // namespace toga::test

//! First statement of a GPU test: GTEST_SKIP (not a failure) without a usable device.
#define TOGA_TEST_REQUIRE_GPU()                                                    \
  do {                                                                             \
    const std::string toga_why_ = ::toga::test::no_cuda_device_reason();           \
    if (!toga_why_.empty()) GTEST_SKIP() << "no CUDA device: " << toga_why_;       \
  } while (0)

//! Fails the test (returning from it) unless `call` returns cudaSuccess.
#define TOGA_TEST_CUDA(call)                                                                         \
  do {                                                                                               \
    const cudaError_t toga_e_ = (call);                                                              \
    ASSERT_EQ(toga_e_, cudaSuccess) << #call << ": " << cudaGetErrorName(toga_e_) << " ("            \
                                    << cudaGetErrorString(toga_e_) << ") at " << __FILE__ << ":" << __LINE__; \
  } while (0)
