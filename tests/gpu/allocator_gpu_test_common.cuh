//! The harness of the allocator GPU tests, shared by their three units (split from allocator_gpu_test.cu for build time).
//!
//! allocator_gpu_test.cu, allocator_gpu_test_2.cu and allocator_gpu_test_3.cu include it.
//! Everything here is defined once for the whole executable: inline functions, templates, and the
//! kernels as templates (a plain __global__ defined in a header that two units include would be
//! two definitions of one symbol; a template is instantiated once, and `<>` launches it). The
//! units use it through `using namespace ::toga::test::agpu;` in their anonymous namespace. The
//! file comment of allocator_gpu_test.cu describes the tests, the set-up and the hang handling.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>

#include "gpu_test_support.cuh"
#include "toga/allocator.hpp"
#include "toga/cuda/platform.cuh"
#include "toga/heap_walk.hpp"

namespace toga::test::agpu {

using P = toga::cuda::platform;
using alloc_view = toga::allocator<P>;

// The view is what every thread gets: it must be copyable into kernel parameters bit for bit.
static_assert(std::is_trivially_copyable_v<alloc_view>, "toga::allocator must be passed by value to kernels");

// -----------------------------------------------------------------------------------------
// Harness (same conventions as platform_gpu_test.cu / primitives_gpu_test.cu; names distinct,
// all three files link into one executable)
// -----------------------------------------------------------------------------------------

inline constexpr unsigned kBlock = 256;  //!< threads per block in every kernel

//! Empty when a CUDA device is usable, else why not.
inline std::string agpu_no_device_reason() { return ::toga::test::no_cuda_device_reason(); }

template <class = void>  // (a template: this header is in several units; see the file comment)
__global__ void agpu_nsmid_kernel(unsigned* out) { *out = P::num_sms(); }

//! Prints the device once per process (name, SMs, %nsmid), for the logs.
inline void agpu_print_device_once() {
  static bool done = false;
  if (done) return;
  done = true;
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return;
  unsigned nsmid = 0;
  unsigned* d = nullptr;
  if (cudaMalloc(&d, sizeof(unsigned)) == cudaSuccess) {
    agpu_nsmid_kernel<><<<1, 1>>>(d);
    if (cudaMemcpy(&nsmid, d, sizeof nsmid, cudaMemcpyDeviceToHost) != cudaSuccess) nsmid = 0;
    (void)cudaFree(d);
  }
  (void)cudaGetLastError();
  std::printf("[   info   ] device %d: %s, %d SMs (%%nsmid %u), sm_%d%d, %.1f GiB\n", dev, prop.name,
              prop.multiProcessorCount, nsmid, prop.major, prop.minor,
              static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024 * 1024));
  if (nsmid > static_cast<unsigned>(prop.multiProcessorCount))
    std::printf("[   info   ] note: %%nsmid > SM count, so sm_id() %% arenas maps some SMs onto one arena\n");
}

//! First statement of every test: skips (not fails) without a usable device.
#define AGPU_REQUIRE_CUDA_DEVICE()                                                 \
  do {                                                                             \
    const std::string agpu_reason_ = ::toga::test::agpu::agpu_no_device_reason();  \
    if (!agpu_reason_.empty()) GTEST_SKIP() << "no CUDA device: " << agpu_reason_; \
    ::toga::test::agpu::agpu_print_device_once();                                  \
  } while (0)

//! Fails the test (and returns from the current void function) if `call` is not cudaSuccess.
#define AGPU_CUDA_CHECK(call)                                                          \
  do {                                                                                 \
    const cudaError_t agpu_err_ = (call);                                              \
    if (agpu_err_ != cudaSuccess)                                                      \
      FAIL() << cudaGetErrorName(agpu_err_) << " (" << cudaGetErrorString(agpu_err_)  \
             << ") from `" #call "` at " __FILE__ ":" << __LINE__;                     \
  } while (0)

//! Device-side results of the bit operations the whole core rests on (sizes, classes, bitmaps,
//! groups), for a value the compiler cannot see.
template <class = void>
__global__ void agpu_bits_kernel(std::uint64_t x, std::uint64_t* out) {
  out[0] = toga::bits::ctz(static_cast<std::uint32_t>(x));
  out[1] = toga::bits::ctz(x << 32);
  out[2] = toga::bits::clz(x);
  out[3] = toga::bits::popc(x);
  out[4] = toga::bits::popc(static_cast<std::uint32_t>(x));
  out[5] = toga::bits::cto(x);
  out[6] = toga::geom::round_up(x + 1);
  out[7] = toga::geom::class_of(toga::geom::round_up(x + 1));
  out[8] = toga::bits::select(x << 32, 1);  // (the upper half: select's second step)
  out[9] = toga::bits::lowest(x << 32, 1);
}

//! Empty when toga/bits.hpp computes on the device what it computes on the host, else the
//! first difference. Run once per process.
inline std::string agpu_bits_mismatch() {
  static std::optional<std::string> cached;
  if (cached) return *cached;
  constexpr std::uint64_t x = 0x50;  // ctz 4, clz 57, popc 2, cto 0, round_up(0x51) 128, class 3; select(x << 32, 1) 38, lowest(x << 32, 1) 2^36
  const std::uint64_t want[10] = {toga::bits::ctz(static_cast<std::uint32_t>(x)), toga::bits::ctz(x << 32), toga::bits::clz(x),
                                  toga::bits::popc(x), toga::bits::popc(static_cast<std::uint32_t>(x)), toga::bits::cto(x),
                                  toga::geom::round_up(x + 1), toga::geom::class_of(toga::geom::round_up(x + 1)),
                                  toga::bits::select(x << 32, 1), toga::bits::lowest(x << 32, 1)};
  const char* names[10] = {"ctz(u32)", "ctz(u64)", "clz(u64)", "popc(u64)", "popc(u32)", "cto(u64)", "round_up", "class_of", "select", "lowest"};
  std::uint64_t got[10] = {};
  std::uint64_t* d = nullptr;
  std::string r;
  if (cudaMalloc(&d, sizeof got) != cudaSuccess) return "cudaMalloc failed";
  agpu_bits_kernel<><<<1, 1>>>(x, d);
  const cudaError_t e = cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost);
  (void)cudaFree(d);
  if (e != cudaSuccess) return std::string("bits kernel: ") + cudaGetErrorName(e);
  for (unsigned k = 0; k < 10 && r.empty(); ++k)
    if (got[k] != want[k])
      r = std::string(names[k]) + " is " + std::to_string(got[k]) + " on the device, " + std::to_string(want[k]) + " on the host";
  cached = r;
  return r;
}

//! Second statement of every test: the allocator kernels are not launched when the core's bit
//! operations are miscompiled for the device; they would corrupt the metadata and trap
//! (P::fail), which poisons the CUDA context for every later test of the process.
#define AGPU_REQUIRE_WORKING_BITS()                                                                          \
  do {                                                                                                       \
    const std::string agpu_bits_ = ::toga::test::agpu::agpu_bits_mismatch();                                 \
    if (!agpu_bits_.empty())                                                                                 \
      FAIL() << "toga/bits.hpp gives wrong results in device code on this build (" << agpu_bits_             \
             << "); not launching allocator kernels. Seen with nvcc 13.0 without --expt-relaxed-constexpr: " \
                "std::is_constant_evaluated() is a __host__ function, and device code that calls it is "     \
                "compiled as if that path were unreachable (ctz -> 32/64, clz -> 64, popc -> 0).";           \
  } while (0)

//! Returns from the test body if a helper recorded a fatal failure.
#define AGPU_RUN(stmt)                      \
  do {                                      \
    ASSERT_NO_FATAL_FAILURE(stmt);          \
    if (HasFatalFailure()) return;          \
  } while (0)

template <class T>
using agpu_buffer = ::toga::test::device_buffer<T>;

#define AGPU_ALLOC(buf, count)                                                         \
  do {                                                                                 \
    (buf).n = (count);                                                                 \
    AGPU_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&(buf).ptr), (buf).bytes())); \
    AGPU_CUDA_CHECK(cudaMemset((buf).ptr, 0, (buf).bytes()));                         \
  } while (0)
#define AGPU_TO_HOST(host_vec, buf)                                                        \
  do {                                                                                     \
    (host_vec).resize((buf).n);                                                            \
    AGPU_CUDA_CHECK(                                                                       \
        cudaMemcpy((host_vec).data(), (buf).ptr, (buf).bytes(), cudaMemcpyDeviceToHost));  \
  } while (0)

//! The longest the host waits for one kernel (seconds; AGPU_KERNEL_DEADLINE_S overrides).
inline std::chrono::seconds agpu_kernel_deadline() {
  const char* env = std::getenv("AGPU_KERNEL_DEADLINE_S");
  const long v = env != nullptr ? std::strtol(env, nullptr, 10) : 0;
  return std::chrono::seconds(v > 0 ? v : 60);
}

using agpu_dump_fn = std::function<void(cudaStream_t)>;

//! Runs one kernel on its own non-blocking stream, timed by events, and polls it
//! (cudaStreamQuery) with a deadline. A kernel still running at the deadline is stuck in a spin
//! inside the core: the failure is reported, `dump` (if any) prints state read through a second
//! stream, and the process exits (the device cannot be recovered). Returns the first error.
template <class Launch>
cudaError_t agpu_run(const char* what, float& ms, Launch launch, const agpu_dump_fn& dump = {}, bool quiet = false) {
  cudaError_t e;
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return e;  // order earlier default-stream work
  cudaStream_t stream{}, side{};
  cudaEvent_t start{}, stop{};
  if ((e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess) return e;
  if ((e = cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking)) != cudaSuccess) return e;
  (void)cudaEventCreate(&start);
  (void)cudaEventCreate(&stop);
  (void)cudaEventRecord(start, stream);
  launch(stream);
  e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaEventRecord(stop, stream);
  if (e == cudaSuccess) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto deadline = agpu_kernel_deadline();
    while ((e = cudaStreamQuery(stream)) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() - t0 > deadline) {
        ADD_FAILURE() << "kernel `" << what << "` still running after " << deadline.count()
                      << " s: a spin inside the allocator never ends (lost wake-up, deadlock or livelock)";
        if (dump) dump(side);
        std::printf("allocator_gpu_test: aborting the process (the device cannot be recovered)\n");
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(3);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, start, stop);
  if (e == cudaSuccess && !quiet) std::printf("[   time   ] %s: %.3f ms\n", what, ms);
  const cudaError_t sync = cudaDeviceSynchronize();
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  (void)cudaStreamDestroy(stream);
  (void)cudaStreamDestroy(side);
  return e != cudaSuccess ? e : sync;
}


__device__ __forceinline__ unsigned agpu_gtid() { return blockIdx.x * blockDim.x + threadIdx.x; }

__host__ __device__ constexpr std::uint64_t agpu_mix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

//! Word w of the pattern of owner i (the same owner writes all the words of its block; the word
//! index is mixed in so that a block shifted onto another is caught too).
__host__ __device__ constexpr std::uint64_t agpu_pattern(std::uint32_t owner, std::uint32_t w, std::uint32_t salt) {
  return agpu_mix64((std::uint64_t{owner} << 32 | w) ^ (std::uint64_t{salt} * 0x9e3779b97f4a7c15ull)) | 1u;
}

//! Bytes `allocate(bytes)` serves: next_pow2(max(bytes, 16)); superbin classes (2 KiB up to
//! sb_max_bytes, the heap's) at that size; above, a TBuddy block of at least 4 KiB (allocator.hpp).
//! sb_max_bytes 0 (the default) gives the largest a size may be served with (a TBuddy block): an
//! upper bound for sizing; block checks pass the heap's (agpu_sb_max).
constexpr std::uint64_t agpu_served(std::uint64_t bytes, std::uint64_t sb_max_bytes = 0) {
  const std::uint64_t s = toga::geom::round_up(bytes ? bytes : 1);
  if (s <= toga::geom::max_class_bytes || s <= sb_max_bytes) return s;
  return s < toga::geom::page_bytes ? toga::geom::page_bytes : s;
}

// -----------------------------------------------------------------------------------------
// The heap: device set-up and host snapshots
// -----------------------------------------------------------------------------------------

template <class = void>
__global__ void agpu_init_kernel(alloc_view a, std::uint64_t limit_bytes) { a.init_after_zero(limit_bytes); }

//! A heap on the device and its view.
struct agpu_heap {
  char* raw = nullptr;   //!< cudaMalloc(heap_bytes + 4096)
  char* heap = nullptr;  //!< raw aligned up to 4 KiB
  char* meta = nullptr;
  std::uint64_t heap_bytes = 0;
  unsigned arenas = 0;
  toga::heap_layout layout{};
  alloc_view view{};
  agpu_heap() = default;
  agpu_heap(const agpu_heap&) = delete;
  agpu_heap& operator=(const agpu_heap&) = delete;
  ~agpu_heap() {
    if (raw != nullptr) (void)cudaFree(raw);
    if (meta != nullptr) (void)cudaFree(meta);
  }
};

//! The largest size the heap serves from superbins (0: none).
inline std::uint64_t agpu_sb_max(const agpu_heap& h) { return h.layout.sb_classes ? toga::geom::sb_class_bytes(h.layout.sb_classes - 1) : 0; }

//! Builds a heap of `bytes` (a power of two >= 512 KiB) with one arena per SM; `sb_shift` as
//! heap_layout::make's (-1: toga's automatic choice).
inline void agpu_make_heap(agpu_heap& h, std::uint64_t bytes, std::uint64_t limit_bytes = 0, int sb_shift = -1) {
  int dev = 0, sms = 0;
  AGPU_CUDA_CHECK(cudaGetDevice(&dev));
  AGPU_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  ASSERT_GT(sms, 0);
  h.arenas = static_cast<unsigned>(sms);
  h.layout = toga::heap_layout::make<P>(toga::heap_layout::levels_for(bytes), h.arenas, sb_shift);
  h.heap_bytes = toga::geom::page_bytes << (h.layout.levels - 1);
  ASSERT_EQ(h.heap_bytes, bytes) << "tests use power-of-two heaps";
  AGPU_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&h.meta), h.layout.bytes));
  AGPU_CUDA_CHECK(cudaMemset(h.meta, 0, h.layout.bytes));
  AGPU_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&h.raw), h.heap_bytes + 4096));
  h.heap = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(h.raw) + 4095) & ~std::uintptr_t{4095});
  h.view = alloc_view::make(h.heap, h.meta, h.layout);
  AGPU_CUDA_CHECK(cudaDeviceSynchronize());
  agpu_init_kernel<><<<1, 1>>>(h.view, limit_bytes);
  AGPU_CUDA_CHECK(cudaGetLastError());
  AGPU_CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("[   info   ] heap %llu MiB, %u levels, %u arenas, metadata %llu KiB (arena %zu B)\n",
              static_cast<unsigned long long>(h.heap_bytes >> 20), h.layout.levels, h.arenas,
              static_cast<unsigned long long>(h.layout.bytes >> 10), sizeof(toga::arena<P>));
}

//! A host copy of heap and metadata (heap 4 KiB aligned, as the view requires) and its view.
struct agpu_host_copy {
  char* heap = nullptr;
  char* meta = nullptr;
  std::uint64_t heap_bytes = 0, meta_bytes = 0;
  alloc_view view{};
  agpu_host_copy() = default;
  agpu_host_copy(const agpu_host_copy&) = delete;
  agpu_host_copy& operator=(const agpu_host_copy&) = delete;
  ~agpu_host_copy() {
    std::free(heap);
    std::free(meta);
  }
};

inline void agpu_snapshot(const agpu_heap& h, agpu_host_copy& c) {
  if (c.heap == nullptr) {
    c.heap_bytes = h.heap_bytes;
    c.meta_bytes = (h.layout.bytes + 4095) & ~std::uint64_t{4095};
    c.heap = static_cast<char*>(std::aligned_alloc(4096, c.heap_bytes));
    c.meta = static_cast<char*>(std::aligned_alloc(4096, c.meta_bytes));
    ASSERT_NE(c.heap, nullptr);
    ASSERT_NE(c.meta, nullptr);
  }
  ASSERT_EQ(c.heap_bytes, h.heap_bytes);
  AGPU_CUDA_CHECK(cudaDeviceSynchronize());
  AGPU_CUDA_CHECK(cudaMemcpy(c.meta, h.meta, h.layout.bytes, cudaMemcpyDeviceToHost));
  AGPU_CUDA_CHECK(cudaMemcpy(c.heap, h.heap, h.heap_bytes, cudaMemcpyDeviceToHost));
  c.view = alloc_view::make(c.heap, c.meta, h.layout);
}

inline std::uint64_t agpu_total_bins(const toga::heap_statistics& s) {
  std::uint64_t n = 0;
  for (unsigned c = 0; c < toga::geom::num_classes; ++c) n += s.bins[c];
  return n;
}

inline void agpu_print_state(const char* what, const toga::heap_quality& q, const toga::heap_statistics& s) {
  std::printf("[ quality  ] %s: unmerged buddy pairs %llu, bins %llu, chunks %llu, live blocks %llu (%llu B); "
              "stats: used %lld B, peak<=%llu B, allocations %llu, deallocations %llu, failed %llu, bins %lld, "
              "chunks %lld, errors %u\n",
              what, static_cast<unsigned long long>(q.unmerged_pairs), static_cast<unsigned long long>(q.bins),
              static_cast<unsigned long long>(q.chunks), static_cast<unsigned long long>(q.live_blocks),
              static_cast<unsigned long long>(q.live_bytes), static_cast<long long>(s.used_bytes),
              static_cast<unsigned long long>(s.peak_used_bytes), static_cast<unsigned long long>(s.allocations),
              static_cast<unsigned long long>(s.deallocations), static_cast<unsigned long long>(s.failed),
              static_cast<long long>(agpu_total_bins(s)), static_cast<long long>(s.chunks), s.errors);
}

//! Copies the heap back, runs check_quiescent (must pass), returns quality and statistics.
inline void agpu_check_quiescent(const agpu_heap& h, agpu_host_copy& c, const char* what, toga::heap_quality& q,
                          toga::heap_statistics& s) {
  ASSERT_NO_FATAL_FAILURE(agpu_snapshot(h, c));
  q = toga::heap_quality{};
  const std::optional<std::string> err = toga::check_quiescent(c.view, &q);
  s = toga::collect_statistics(c.view);
  agpu_print_state(what, q, s);
  ASSERT_FALSE(err.has_value()) << what << ": check_quiescent: " << *err;
  // the statistics' bin and chunk counts agree with the walk
  EXPECT_EQ(agpu_total_bins(s), q.bins) << what;
  EXPECT_EQ(s.chunks, q.chunks) << what;
  EXPECT_EQ(s.errors, 0u) << what;
}

// -----------------------------------------------------------------------------------------
// Host checks on a set of blocks
// -----------------------------------------------------------------------------------------

struct agpu_block {
  std::uint64_t off;     //!< from the heap base
  std::uint64_t served;  //!< rounded size
  unsigned owner;        //!< thread that got it
};

//! Disjointness, bounds and alignment of blocks handed out (empty string: all fine).
//! Alignment: >= 16 B always; min(served, 128) for UAlloc slots (allocator.hpp's file comment);
//! the served size for TBuddy blocks (> 1 KiB), relative to the heap base.
inline std::string agpu_check_blocks(std::vector<agpu_block>& v, std::uint64_t heap_bytes) {
  std::sort(v.begin(), v.end(), [](const agpu_block& a, const agpu_block& b) { return a.off < b.off; });
  for (std::size_t k = 0; k < v.size(); ++k) {
    const agpu_block& b = v[k];
    const std::string who = "block of thread " + std::to_string(b.owner) + " at offset " + std::to_string(b.off) +
                            " (served " + std::to_string(b.served) + " B)";
    if (b.off >= heap_bytes || b.off + b.served > heap_bytes) return who + " lies outside the heap";
    if (b.off % 16 != 0) return who + " is not 16 B aligned";
    if (b.served <= toga::geom::max_class_bytes) {
      const std::uint64_t al = std::min<std::uint64_t>(b.served, 128);
      if (b.off % al != 0) return who + " is not aligned to min(served, 128) = " + std::to_string(al);
      // (1 KiB: a superbin slot, which may start on a 4 KiB boundary, when the heap has superbins)
      if (b.served <= toga::geom::ualloc_always_max_bytes && b.off % toga::geom::page_bytes == 0)
        return who + " is a UAlloc slot on a 4 KiB boundary (ownership rule)";
    } else if (b.off % b.served != 0) {
      return who + " is not aligned to its served size";
    }
    if (k + 1 < v.size() && b.off + b.served > v[k + 1].off)
      return who + " overlaps the block of thread " + std::to_string(v[k + 1].owner) + " at offset " +
             std::to_string(v[k + 1].off) + " (served " + std::to_string(v[k + 1].served) + " B)";
  }
  return {};
}

}  // namespace toga::test::agpu
