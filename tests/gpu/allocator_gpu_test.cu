//! @file tests/gpu/allocator_gpu_test.cu
//! toga's allocator (`toga::allocator<toga::cuda::platform>`: UAlloc for <= 1 KiB, TBuddy
//! above) in real kernels with up to 2^16 threads, checked at quiescence on a host copy of the
//! heap and its metadata with the heap walk (toga/heap_walk.hpp: design.md §16.2 invariants
//! G6, S5, T1-T3, T7, U1-U3, R4, and the statistics):
//!
//!  1. every size class and more (1 B .. 64 KiB): allocate in one kernel, write a per-thread
//!     pattern in a second, verify and free in a third whose blocks run mostly on other SMs;
//!     blocks are non-null, disjoint, inside the heap and aligned as documented;
//!  2. the same through allocate_coalesced with partial warps;
//!  3. frees by other threads in another kernel (a permutation of the owners);
//!  4. exhaustion of a 64 MiB heap with 4 KiB blocks (nullptr, no hang, no trap), then
//!     recovery: everything freed, quiescent, the quiescent merge makes the root AVAILABLE;
//!  5. mixed churn (allocate / write / verify / free, 16 rounds, one kernel) with a device-side
//!     deadline and a host-side timeout; throughput.
//!
//! Set-up (as the CUDA backend does it): metadata of layout.bytes from cudaMalloc, zeroed,
//! `init_after_zero` in a one-thread kernel; heap from cudaMalloc(heap_bytes + 4096), aligned up
//! to 4 KiB; the view `toga::allocator<toga::cuda::platform>` made on the host over the device
//! pointers and passed by value to every kernel; one arena per SM
//! (cudaDevAttrMultiProcessorCount).
//!
//! Hangs. A spin inside the core cannot be bounded from outside: every kernel runs on its own
//! stream and the host polls it (cudaStreamQuery) for at most AGPU_KERNEL_DEADLINE_S seconds
//! (default 60); past that it reports the failure, prints what it can read through a second
//! stream, and exits the process (the device cannot be recovered from a kernel that never ends).
//! The churn kernel also checks a device-side deadline (%globaltimer) between rounds.
//!
//! Sizes (tests 1 and 2): 2^16 threads (2^12 for 64 KiB), halved until the served bytes fit in
//! half the 256 MiB heap (2^15 for 2048 and 4096 B, 2^14 for 8192 B, 2^11 for 64 KiB): 2^16 x 4 KiB
//! would fill the heap exactly, but bins that a racing free could not retire keep their chunks
//! at quiescence (seen on an H200: 256 chunks = 128 MiB after the 1 KiB sizes), so an exact fill
//! would fail on a correct allocator; exhaustion is test 4's subject.
//!
//! Build: the core compiles without --expt-relaxed-constexpr, but with nvcc 13.0 toga/bits.hpp's
//! std::is_constant_evaluated() (a __host__ function) makes device code of ctz/clz/popc constant
//! (32/64, 64, 0); every test first checks the bit operations on the device and fails at once,
//! without launching allocator kernels, when they are wrong.
//!
//! Without a CUDA device (CI) every test skips cleanly via GTEST_SKIP.
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

namespace {

using P = toga::cuda::platform;
using alloc_view = toga::allocator<P>;

// The view is what every thread gets: it must be copyable into kernel parameters bit for bit.
static_assert(std::is_trivially_copyable_v<alloc_view>, "toga::allocator must be passed by value to kernels");

// -----------------------------------------------------------------------------------------
// Harness (same conventions as platform_gpu_test.cu / primitives_gpu_test.cu; names distinct,
// all three files link into one executable)
// -----------------------------------------------------------------------------------------

constexpr unsigned kBlock = 256;  //!< threads per block in every kernel

//! Empty when a CUDA device is usable, else why not.
std::string agpu_no_device_reason() { return ::toga::test::no_cuda_device_reason(); }

__global__ void agpu_nsmid_kernel(unsigned* out) { *out = P::num_sms(); }

//! Prints the device once per process (name, SMs, %nsmid), for the logs.
void agpu_print_device_once() {
  static bool done = false;
  if (done) return;
  done = true;
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return;
  unsigned nsmid = 0;
  unsigned* d = nullptr;
  if (cudaMalloc(&d, sizeof(unsigned)) == cudaSuccess) {
    agpu_nsmid_kernel<<<1, 1>>>(d);
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
#define AGPU_REQUIRE_CUDA_DEVICE()                                                   \
  do {                                                                               \
    const std::string agpu_reason_ = agpu_no_device_reason();                        \
    if (!agpu_reason_.empty()) GTEST_SKIP() << "no CUDA device: " << agpu_reason_;   \
    agpu_print_device_once();                                                        \
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
std::string agpu_bits_mismatch() {
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
  agpu_bits_kernel<<<1, 1>>>(x, d);
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
#define AGPU_REQUIRE_WORKING_BITS()                                                                        \
  do {                                                                                                     \
    const std::string agpu_bits_ = agpu_bits_mismatch();                                                   \
    if (!agpu_bits_.empty())                                                                               \
      FAIL() << "toga/bits.hpp gives wrong results in device code on this build (" << agpu_bits_          \
             << "); not launching allocator kernels. Seen with nvcc 13.0 without --expt-relaxed-constexpr: " \
                "std::is_constant_evaluated() is a __host__ function, and device code that calls it is "   \
                "compiled as if that path were unreachable (ctz -> 32/64, clz -> 64, popc -> 0).";         \
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
std::chrono::seconds agpu_kernel_deadline() {
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

//! Copies n T's from the device on stream `s` while a kernel may still run (post-mortem).
template <class T>
std::vector<T> agpu_peek(const T* dev, std::size_t n, cudaStream_t s) {
  std::vector<T> h(n);
  if (cudaMemcpyAsync(h.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost, s) != cudaSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess)
    std::printf("allocator_gpu_test: post-mortem copy failed\n");
  return h;
}

__device__ __forceinline__ std::uint64_t agpu_globaltimer() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
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
std::uint64_t agpu_sb_max(const agpu_heap& h) { return h.layout.sb_classes ? toga::geom::sb_class_bytes(h.layout.sb_classes - 1) : 0; }

//! Builds a heap of `bytes` (a power of two >= 512 KiB) with one arena per SM; `sb_shift` as
//! heap_layout::make's (-1: toga's automatic choice).
void agpu_make_heap(agpu_heap& h, std::uint64_t bytes, std::uint64_t limit_bytes = 0, int sb_shift = -1) {
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
  agpu_init_kernel<<<1, 1>>>(h.view, limit_bytes);
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

void agpu_snapshot(const agpu_heap& h, agpu_host_copy& c) {
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

std::uint64_t agpu_total_bins(const toga::heap_statistics& s) {
  std::uint64_t n = 0;
  for (unsigned c = 0; c < toga::geom::num_classes; ++c) n += s.bins[c];
  return n;
}

void agpu_print_state(const char* what, const toga::heap_quality& q, const toga::heap_statistics& s) {
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
void agpu_check_quiescent(const agpu_heap& h, agpu_host_copy& c, const char* what, toga::heap_quality& q,
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
std::string agpu_check_blocks(std::vector<agpu_block>& v, std::uint64_t heap_bytes) {
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

// -----------------------------------------------------------------------------------------
// Kernels for tests 1-3
// -----------------------------------------------------------------------------------------

//! Test 2's partial warps: only these lanes take part.
__host__ __device__ constexpr bool agpu_takes_part(unsigned lane, unsigned block) { return (lane * 5 + block) % 3 != 0; }

enum agpu_mode : int { agpu_plain = 0, agpu_coalesced_partial = 1 };

//! Thread i allocates `bytes` (or sizes[i % nsizes] when sizes != nullptr).
__global__ void agpu_alloc_kernel(alloc_view a, unsigned n, std::uint64_t bytes, const std::uint32_t* sizes, int mode,
                                  char** out, std::uint32_t* sm) {
  const unsigned i = agpu_gtid();
  if (i >= n) return;
  const std::uint64_t s = sizes != nullptr ? sizes[i] : bytes;
  char* p = nullptr;
  if (mode == agpu_plain) {
    p = static_cast<char*>(a.allocate(s));
  } else if (agpu_takes_part(threadIdx.x % 32, blockIdx.x)) {
    p = static_cast<char*>(a.allocate_coalesced(s));
  }
  out[i] = p;
  sm[i] = P::sm_id();
}

//! Writes the owner's pattern into every 8-byte word of the requested bytes (rounded up to 8,
//! within the served size since that is >= 16 and a power of two).
__global__ void agpu_write_kernel(char* const* ptrs, unsigned n, std::uint64_t bytes, const std::uint32_t* sizes,
                                  std::uint32_t salt) {
  const unsigned i = agpu_gtid();
  if (i >= n) return;
  char* p = ptrs[i];
  if (p == nullptr) return;
  const std::uint64_t s = sizes != nullptr ? sizes[i] : bytes;
  auto* w = reinterpret_cast<std::uint64_t*>(p);
  const unsigned words = static_cast<unsigned>((s + 7) / 8);
  for (unsigned k = 0; k < words; ++k) w[k] = agpu_pattern(i, k, salt);
}

//! Verifies and frees the blocks. Thread t of this grid handles block index map(t): with
//! block_shift, the CUDA block b handles the blocks of block (b + shift) % grid (so frees run
//! mostly on other SMs than the allocations); with multiplier, thread t handles (t * mul) % n.
__global__ void agpu_verify_free_kernel(alloc_view a, char* const* ptrs, unsigned n, std::uint64_t bytes,
                                        const std::uint32_t* sizes, std::uint32_t salt, unsigned block_shift,
                                        unsigned mul, int mode, std::uint32_t* sm_free,
                                        unsigned long long* bad_blocks) {
  const unsigned t = agpu_gtid();
  if (t >= n) return;
  unsigned i = ((blockIdx.x + block_shift) % gridDim.x) * blockDim.x + threadIdx.x;
  if (mul != 1) i = static_cast<unsigned>((static_cast<std::uint64_t>(t) * mul) % n);
  char* p = ptrs[i];
  if (p == nullptr) return;
  const std::uint64_t s = sizes != nullptr ? sizes[i] : bytes;
  const auto* w = reinterpret_cast<const std::uint64_t*>(p);
  const unsigned words = static_cast<unsigned>((s + 7) / 8);
  unsigned wrong = 0;
  for (unsigned k = 0; k < words; ++k) wrong += w[k] != agpu_pattern(i, k, salt);
  if (wrong) atomicAdd(bad_blocks, 1ull);
  sm_free[i] = P::sm_id();
  if (mode == agpu_coalesced_partial) a.deallocate_coalesced(p);
  else a.deallocate(p);
}

//! Results of one allocate / write / verify+free cycle.
struct agpu_cycle_result {
  unsigned requested = 0;      //!< threads that called allocate
  unsigned obtained = 0;       //!< non-null results
  unsigned other_sm_frees = 0; //!< blocks freed on another SM than allocated
  float alloc_ms = 0, write_ms = 0, free_ms = 0;
};

//! One cycle over `n` threads with size `bytes` (or per-thread `sizes_host`); checks every
//! block handed out; frees by block shift (mul == 1) or by permutation (mul != 1).
void agpu_cycle(const agpu_heap& h, unsigned n, std::uint64_t bytes, const std::vector<std::uint32_t>* sizes_host,
                int mode, unsigned mul, std::uint32_t salt, const std::string& label, agpu_cycle_result& r) {
  agpu_buffer<char*> ptrs;
  agpu_buffer<std::uint32_t> sm_alloc, sm_free, sizes;
  agpu_buffer<unsigned long long> bad;
  AGPU_ALLOC(ptrs, n);
  AGPU_ALLOC(sm_alloc, n);
  AGPU_ALLOC(sm_free, n);
  AGPU_ALLOC(bad, 1);
  if (sizes_host != nullptr) {
    ASSERT_EQ(sizes_host->size(), n);
    AGPU_ALLOC(sizes, n);
    AGPU_CUDA_CHECK(cudaMemcpy(sizes.ptr, sizes_host->data(), sizes.bytes(), cudaMemcpyHostToDevice));
  }
  const unsigned grid = (n + kBlock - 1) / kBlock;
  const alloc_view a = h.view;
  const std::string wa = label + ": allocate", ww = label + ": write", wf = label + ": verify + free";
  AGPU_CUDA_CHECK(agpu_run(wa.c_str(), r.alloc_ms, [&](cudaStream_t st) {
    agpu_alloc_kernel<<<grid, kBlock, 0, st>>>(a, n, bytes, sizes.ptr, mode, ptrs.ptr, sm_alloc.ptr);
  }, {}, true));
  std::vector<char*> hp;
  AGPU_TO_HOST(hp, ptrs);
  // every participating thread got a block; all blocks are disjoint, in the heap and aligned
  std::vector<agpu_block> blocks;
  blocks.reserve(n);
  r.requested = 0;
  unsigned nulls = 0, first_null = ~0u;
  for (unsigned i = 0; i < n; ++i) {
    const bool part = mode == agpu_plain || agpu_takes_part(i % 32, i / kBlock);
    if (!part) {
      EXPECT_EQ(hp[i], nullptr) << label << ": thread " << i << " did not allocate";
      continue;
    }
    ++r.requested;
    if (hp[i] == nullptr) {
      if (nulls++ == 0) first_null = i;
      continue;
    }
    const std::uint64_t s = sizes_host != nullptr ? (*sizes_host)[i] : bytes;
    blocks.push_back({static_cast<std::uint64_t>(hp[i] - h.heap), agpu_served(s, agpu_sb_max(h)), i});
  }
  r.obtained = static_cast<unsigned>(blocks.size());
  EXPECT_EQ(nulls, 0u) << label << ": " << nulls << " of " << r.requested << " allocations returned nullptr (first: thread "
                       << first_null << ")";
  const std::string berr = agpu_check_blocks(blocks, h.heap_bytes);
  ASSERT_TRUE(berr.empty()) << label << ": " << berr;  // overlapping blocks: writing would corrupt the heap
  AGPU_CUDA_CHECK(agpu_run(ww.c_str(), r.write_ms, [&](cudaStream_t st) {
    agpu_write_kernel<<<grid, kBlock, 0, st>>>(ptrs.ptr, n, bytes, sizes.ptr, salt);
  }, {}, true));
  AGPU_CUDA_CHECK(agpu_run(wf.c_str(), r.free_ms, [&](cudaStream_t st) {
    agpu_verify_free_kernel<<<grid, kBlock, 0, st>>>(a, ptrs.ptr, n, bytes, sizes.ptr, salt, grid / 2, mul, mode,
                                                     sm_free.ptr, bad.ptr);
  }, {}, true));
  std::vector<unsigned long long> hb;
  AGPU_TO_HOST(hb, bad);
  EXPECT_EQ(hb[0], 0ull) << label << ": " << hb[0] << " blocks lost their pattern between the write and the verify "
                         << "kernel (another thread wrote into them, or the allocator did)";
  std::vector<std::uint32_t> sa, sf;
  AGPU_TO_HOST(sa, sm_alloc);
  AGPU_TO_HOST(sf, sm_free);
  r.other_sm_frees = 0;
  for (unsigned i = 0; i < n; ++i)
    if (hp[i] != nullptr && sa[i] != sf[i]) ++r.other_sm_frees;
}

std::vector<std::uint64_t> agpu_sizes_test1() { return {1, 16, 64, 256, 1000, 1024, 2048, 4096, 8192, 65536}; }

//! Threads for size S in tests 1 and 2: 2^16 (2^12 for 64 KiB), capped so that the served bytes
//! stay within half the heap. (2^16 x 4 KiB fills a 256 MiB heap exactly and 2^16 x 8 KiB is
//! twice that; a full heap is test 4's subject, where chunks UAlloc still holds would make a
//! correct allocator fail.)
unsigned agpu_threads_for(std::uint64_t bytes, std::uint64_t heap_bytes) {
  std::uint64_t n = bytes == 65536 ? (1u << 12) : (1u << 16);
  while (n * agpu_served(bytes) > heap_bytes / 2) n /= 2;
  return static_cast<unsigned>(n);
}

void agpu_every_size(int mode, const char* name) {
  agpu_heap h;
  ASSERT_NO_FATAL_FAILURE(agpu_make_heap(h, std::uint64_t{256} << 20));
  agpu_host_copy c;
  toga::heap_statistics prev{};
  std::uint32_t salt = 1;
  for (const std::uint64_t S : agpu_sizes_test1()) {
    const unsigned n = agpu_threads_for(S, h.heap_bytes);
    const std::string label = std::string(name) + " S=" + std::to_string(S);
    agpu_cycle_result r;
    ASSERT_NO_FATAL_FAILURE(agpu_cycle(h, n, S, nullptr, mode, 1, salt++, label, r));
    toga::heap_quality q;
    toga::heap_statistics s;
    ASSERT_NO_FATAL_FAILURE(agpu_check_quiescent(h, c, label.c_str(), q, s));
    std::printf("[  figure  ] %s: %u threads, %u allocating, served %llu B; allocate %.3f ms (%.1f M/s), write %.3f ms, "
                "verify+free %.3f ms (%.1f M/s); %.1f%% freed on another SM\n",
                label.c_str(), n, r.requested, static_cast<unsigned long long>(agpu_served(S)), r.alloc_ms,
                r.requested / (r.alloc_ms * 1e3), r.write_ms, r.free_ms, r.requested / (r.free_ms * 1e3),
                r.obtained ? 100.0 * r.other_sm_frees / r.obtained : 0.0);
    EXPECT_EQ(s.used_bytes, 0u) << label;
    EXPECT_EQ(q.live_blocks, 0u) << label;
    EXPECT_EQ(s.allocations - prev.allocations, r.requested) << label;
    EXPECT_EQ(s.deallocations - prev.deallocations, r.requested) << label;
    EXPECT_EQ(s.failed - prev.failed, 0u) << label;
    prev = s;
    if (::testing::Test::HasFailure()) return;  // later sizes would only repeat the report
  }
}

// -----------------------------------------------------------------------------------------
// Tests
// -----------------------------------------------------------------------------------------

TEST(CudaAllocator, EverySizeClassAllocateWriteVerifyFreeAcrossKernels) {
  AGPU_REQUIRE_CUDA_DEVICE();
  AGPU_REQUIRE_WORKING_BITS();
  AGPU_RUN(agpu_every_size(agpu_plain, "plain"));
}

TEST(CudaAllocator, CoalescedPartialWarpsEverySize) {
  AGPU_REQUIRE_CUDA_DEVICE();
  AGPU_REQUIRE_WORKING_BITS();
  AGPU_RUN(agpu_every_size(agpu_coalesced_partial, "coalesced"));
}

TEST(CudaAllocator, CrossKernelFreesByOtherThreadsPermutation) {
  AGPU_REQUIRE_CUDA_DEVICE();
  AGPU_REQUIRE_WORKING_BITS();
  agpu_heap h;
  AGPU_RUN(agpu_make_heap(h, std::uint64_t{256} << 20));
  agpu_host_copy c;
  constexpr unsigned n = 1u << 16;
  constexpr unsigned mul = 7919;  // odd: i -> i * 7919 mod 2^16 is a permutation
  const std::uint32_t choices[] = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
  toga::heap_statistics prev{};
  for (unsigned iter = 0; iter < 3; ++iter) {
    std::vector<std::uint32_t> sizes(n);
    std::uint64_t demand = 0;
    for (unsigned i = 0; i < n; ++i) {
      const std::uint64_t x = agpu_mix64(i * 0x1000193ull + iter);
      sizes[i] = choices[x % 10] - static_cast<std::uint32_t>((x >> 8) % 3);  // not always a power of two
      demand += agpu_served(sizes[i]);
    }
    const std::string label = "cross-kernel iteration " + std::to_string(iter);
    agpu_cycle_result r;
    AGPU_RUN(agpu_cycle(h, n, 0, &sizes, agpu_plain, mul, 100 + iter, label, r));
    toga::heap_quality q;
    toga::heap_statistics s;
    AGPU_RUN(agpu_check_quiescent(h, c, label.c_str(), q, s));
    std::printf("[  figure  ] %s: %u threads, %.1f MiB served; allocate %.3f ms (%.1f M/s), write %.3f ms, "
                "permuted verify+free %.3f ms (%.1f M/s); %.1f%% freed on another SM\n",
                label.c_str(), n, demand / 1048576.0, r.alloc_ms, n / (r.alloc_ms * 1e3), r.write_ms, r.free_ms,
                n / (r.free_ms * 1e3), 100.0 * r.other_sm_frees / std::max(1u, r.obtained));
    EXPECT_EQ(s.used_bytes, 0u);
    EXPECT_EQ(q.live_blocks, 0u);
    EXPECT_EQ(s.allocations - prev.allocations, n);
    EXPECT_EQ(s.deallocations - prev.deallocations, n);
    prev = s;
    if (HasFailure()) return;
  }
}

// --- 4. Exhaustion and recovery -------------------------------------------------------------

__global__ void agpu_round_kernel(alloc_view a, unsigned n, std::uint64_t bytes, char** out,
                                  unsigned long long* nulls) {
  const unsigned i = agpu_gtid();
  if (i >= n) return;
  char* p = static_cast<char*>(a.allocate(bytes));
  out[i] = p;
  if (p == nullptr) atomicAdd(nulls, 1ull);
  else *reinterpret_cast<std::uint64_t*>(p) = agpu_pattern(i, 0, 7);  // touch it
}

__global__ void agpu_free_all_kernel(alloc_view a, char* const* ptrs, unsigned n) {
  const unsigned t = agpu_gtid();
  if (t >= n) return;
  // reverse block order: frees run on other SMs than the allocations
  const unsigned i = (gridDim.x - 1 - blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && ptrs[i] != nullptr) a.deallocate(ptrs[i]);
}

__global__ void agpu_one_alloc_kernel(alloc_view a, std::uint64_t bytes, char** out, int free_it) {
  char* p = static_cast<char*>(a.allocate(bytes));
  *out = p;
  if (free_it && p != nullptr) a.deallocate(p);
}

TEST(CudaAllocator, ExhaustionReturnsNullThenRecoveryAndQuiescentMerge) {
  AGPU_REQUIRE_CUDA_DEVICE();
  AGPU_REQUIRE_WORKING_BITS();
  agpu_heap h;
  AGPU_RUN(agpu_make_heap(h, std::uint64_t{64} << 20));
  agpu_host_copy c;
  constexpr unsigned per_round = 1u << 14;
  constexpr std::uint64_t bytes = 4096;
  constexpr unsigned max_rounds = 16;
  agpu_buffer<char*> ptrs;
  agpu_buffer<unsigned long long> nulls;
  AGPU_ALLOC(ptrs, std::size_t{per_round} * max_rounds);
  AGPU_ALLOC(nulls, max_rounds);
  const alloc_view a = h.view;
  unsigned rounds = 0;
  bool saw_null = false;
  float total_ms = 0;
  while (rounds < max_rounds && !saw_null) {
    float ms = 0;
    const std::string what = "exhaustion round " + std::to_string(rounds);
    AGPU_CUDA_CHECK(agpu_run(what.c_str(), ms, [&](cudaStream_t st) {
      agpu_round_kernel<<<per_round / kBlock, kBlock, 0, st>>>(a, per_round, bytes, ptrs.ptr + std::size_t{rounds} * per_round,
                                                               nulls.ptr + rounds);
    }));
    total_ms += ms;
    unsigned long long nn = 0;
    AGPU_CUDA_CHECK(cudaMemcpy(&nn, nulls.ptr + rounds, sizeof nn, cudaMemcpyDeviceToHost));
    std::printf("[  figure  ] exhaustion round %u: %llu of %u allocations returned nullptr\n", rounds, nn, per_round);
    saw_null = nn != 0;
    ++rounds;
  }
  ASSERT_TRUE(saw_null) << "no nullptr after " << rounds << " rounds of " << per_round << " x 4 KiB in a 64 MiB heap";
  std::vector<char*> hp;
  AGPU_TO_HOST(hp, ptrs);
  hp.resize(std::size_t{rounds} * per_round);
  std::vector<agpu_block> blocks;
  for (std::size_t i = 0; i < hp.size(); ++i)
    if (hp[i] != nullptr) blocks.push_back({static_cast<std::uint64_t>(hp[i] - h.heap), agpu_served(bytes, agpu_sb_max(h)), static_cast<unsigned>(i)});
  const double obtained = static_cast<double>(blocks.size()) * bytes / static_cast<double>(h.heap_bytes);
  std::printf("[  figure  ] exhaustion: %zu blocks of 4 KiB in %u rounds = %.4f of the heap, %.3f ms of allocation\n",
              blocks.size(), rounds, obtained, total_ms);
  const std::string berr = agpu_check_blocks(blocks, h.heap_bytes);
  ASSERT_TRUE(berr.empty()) << berr;
  EXPECT_GE(obtained, 0.99) << "the heap was reported exhausted while more than 1% of it was free";
  {
    toga::heap_quality q;
    toga::heap_statistics s;
    AGPU_RUN(agpu_check_quiescent(h, c, "exhausted (all live)", q, s));
    EXPECT_EQ(s.used_bytes, blocks.size() * bytes);
    EXPECT_EQ(q.live_blocks, blocks.size());
    EXPECT_EQ(s.allocations, blocks.size());
    EXPECT_EQ(s.failed, std::uint64_t{rounds} * per_round - blocks.size());
  }
  // free everything (every round's pointers; nullptrs are skipped)
  const unsigned total = rounds * per_round;
  float ms = 0;
  AGPU_CUDA_CHECK(agpu_run("exhaustion: free everything", ms, [&](cudaStream_t st) {
    agpu_free_all_kernel<<<total / kBlock, kBlock, 0, st>>>(a, ptrs.ptr, total);
  }));
  toga::heap_quality q;
  toga::heap_statistics s;
  AGPU_RUN(agpu_check_quiescent(h, c, "exhaustion: all freed", q, s));
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_EQ(s.deallocations, blocks.size());
  std::printf("[  figure  ] exhaustion: %llu unmerged buddy pairs after the concurrent frees\n",
              static_cast<unsigned long long>(q.unmerged_pairs));
  // the quiescent merge on the host copy makes the root AVAILABLE again
  const std::uint64_t merges = toga::merge_free_buddies_quiescent(c.view);
  std::printf("[  figure  ] exhaustion: merge_free_buddies_quiescent did %llu merges; root state %u\n",
              static_cast<unsigned long long>(merges), c.view.small.buddy.state[1]);
  EXPECT_EQ(c.view.small.buddy.state[1], static_cast<std::uint32_t>(toga::node_available))
      << "after freeing everything and merging, the root is not AVAILABLE";
  {
    toga::heap_quality q2;
    const std::optional<std::string> err = toga::check_quiescent(c.view, &q2);
    EXPECT_FALSE(err.has_value()) << "after merge_free_buddies_quiescent: " << *err;
    EXPECT_EQ(q2.unmerged_pairs, 0u);
  }
  // recovery 1: the device heap (unmerged) serves a full round of 4 KiB again
  AGPU_CUDA_CHECK(cudaMemset(nulls.ptr, 0, nulls.bytes()));
  AGPU_CUDA_CHECK(agpu_run("recovery round (4 KiB x 2^14)", ms, [&](cudaStream_t st) {
    agpu_round_kernel<<<per_round / kBlock, kBlock, 0, st>>>(a, per_round, bytes, ptrs.ptr, nulls.ptr);
  }));
  unsigned long long nn = 0;
  AGPU_CUDA_CHECK(cudaMemcpy(&nn, nulls.ptr, sizeof nn, cudaMemcpyDeviceToHost));
  EXPECT_EQ(nn, 0ull) << "after recovery, " << nn << " of " << per_round << " 4 KiB allocations failed";
  AGPU_CUDA_CHECK(agpu_run("recovery: free", ms, [&](cudaStream_t st) {
    agpu_free_all_kernel<<<per_round / kBlock, kBlock, 0, st>>>(a, ptrs.ptr, per_round);
  }));
  AGPU_RUN(agpu_check_quiescent(h, c, "recovery: all freed", q, s));
  EXPECT_EQ(s.used_bytes, 0u);
  // recovery 2: with the merged metadata uploaded, the whole heap is one block again
  (void)toga::merge_free_buddies_quiescent(c.view);
  ASSERT_EQ(c.view.small.buddy.state[1], static_cast<std::uint32_t>(toga::node_available));
  AGPU_CUDA_CHECK(cudaMemcpy(h.meta, c.meta, h.layout.bytes, cudaMemcpyHostToDevice));
  agpu_buffer<char*> one;
  AGPU_ALLOC(one, 1);
  AGPU_CUDA_CHECK(agpu_run("recovery: one allocation of the whole heap", ms, [&](cudaStream_t st) {
    agpu_one_alloc_kernel<<<1, 1, 0, st>>>(a, h.heap_bytes, one.ptr, 1);
  }));
  char* whole = nullptr;
  AGPU_CUDA_CHECK(cudaMemcpy(&whole, one.ptr, sizeof whole, cudaMemcpyDeviceToHost));
  EXPECT_EQ(whole, h.heap) << "a whole-heap allocation after the quiescent merge did not return the heap base";
  AGPU_RUN(agpu_check_quiescent(h, c, "recovery: whole heap allocated and freed", q, s));
  EXPECT_EQ(s.used_bytes, 0u);
}

__global__ void agpu_trim_kernel(alloc_view a) { a.trim(); }

// Issue 11: every superbin class (2 KiB .. 64 KiB; 256 KiB superbins in this 1 GiB heap, explicit) returns a
// clean nullptr at exhaustion with at least 99% of the heap handed out, the blocks never overlap,
// and after freeing everything, a trim (hysteresis keeps empty superbins of classes with >= 32
// slots) and the quiescent merge, the heap is one free block again; a recovery round succeeds.
TEST(CudaAllocator, ExhaustionAndRecoveryEverySuperbinClass) {
  AGPU_REQUIRE_CUDA_DEVICE();
  AGPU_REQUIRE_WORKING_BITS();
  for (const std::uint64_t bytes : {2048u, 4096u, 8192u, 16384u, 32768u, 65536u}) {
    SCOPED_TRACE(std::to_string(bytes) + " B");
    agpu_heap h;
    // 256 KiB superbins, given explicitly: the automatic choice serves only the classes with at
    // least 32 slots (2-8 KiB here)
    AGPU_RUN(agpu_make_heap(h, std::uint64_t{1} << 30, 0, 18));
    ASSERT_GE(agpu_sb_max(h), 65536u) << "256 KiB superbins serve every superbin class";
    agpu_host_copy c;
    const unsigned per_round = 1u << 15;
    const unsigned max_rounds = static_cast<unsigned>(h.heap_bytes / bytes / per_round) + 2;
    agpu_buffer<char*> ptrs;
    agpu_buffer<unsigned long long> nulls;
    AGPU_ALLOC(ptrs, std::size_t{per_round} * max_rounds);
    AGPU_ALLOC(nulls, max_rounds);
    const alloc_view a = h.view;
    unsigned rounds = 0;
    bool saw_null = false;
    float ms = 0;
    while (rounds < max_rounds && !saw_null) {
      const std::string what = "exhaustion round " + std::to_string(rounds);
      AGPU_CUDA_CHECK(agpu_run(what.c_str(), ms, [&](cudaStream_t st) {
        agpu_round_kernel<<<per_round / kBlock, kBlock, 0, st>>>(a, per_round, bytes, ptrs.ptr + std::size_t{rounds} * per_round,
                                                                 nulls.ptr + rounds);
      }));
      unsigned long long nn = 0;
      AGPU_CUDA_CHECK(cudaMemcpy(&nn, nulls.ptr + rounds, sizeof nn, cudaMemcpyDeviceToHost));
      saw_null = nn != 0;
      ++rounds;
    }
    ASSERT_TRUE(saw_null) << "no nullptr after " << rounds << " rounds of " << per_round;
    std::vector<char*> hp;
    AGPU_TO_HOST(hp, ptrs);
    hp.resize(std::size_t{rounds} * per_round);
    std::vector<agpu_block> blocks;
    for (std::size_t i = 0; i < hp.size(); ++i)
      if (hp[i] != nullptr) blocks.push_back({static_cast<std::uint64_t>(hp[i] - h.heap), bytes, static_cast<unsigned>(i)});
    const std::string berr = agpu_check_blocks(blocks, h.heap_bytes);
    ASSERT_TRUE(berr.empty()) << berr;
    const double obtained = static_cast<double>(blocks.size()) * bytes / static_cast<double>(h.heap_bytes);
    std::printf("[  figure  ] exhaustion at %llu B: %zu blocks in %u rounds = %.4f of the 1 GiB heap\n",
                static_cast<unsigned long long>(bytes), blocks.size(), rounds, obtained);
    EXPECT_GE(obtained, 0.99) << "the heap was reported exhausted while more than 1% of it was free";
    toga::heap_quality q;
    toga::heap_statistics s;
    AGPU_RUN(agpu_check_quiescent(h, c, "exhausted (all live)", q, s));
    // a slot of its class, or (once no superbin can be had) a TBuddy block of at least 4 KiB
    EXPECT_GE(s.used_bytes, blocks.size() * bytes);
    EXPECT_LE(s.used_bytes, blocks.size() * std::max<std::uint64_t>(bytes, 4096));
    EXPECT_EQ(q.live_blocks, blocks.size());
    const unsigned total = rounds * per_round;
    AGPU_CUDA_CHECK(agpu_run("free everything", ms, [&](cudaStream_t st) {
      agpu_free_all_kernel<<<total / kBlock, kBlock, 0, st>>>(a, ptrs.ptr, total);
    }));
    AGPU_CUDA_CHECK(agpu_run("trim", ms, [&](cudaStream_t st) { agpu_trim_kernel<<<1, 1, 0, st>>>(a); }));
    AGPU_RUN(agpu_check_quiescent(h, c, "all freed and trimmed", q, s));
    EXPECT_EQ(s.used_bytes, 0u);
    EXPECT_EQ(s.superbin_bytes, 0u) << "trim gives back every empty superbin";
    (void)toga::merge_free_buddies_quiescent(c.view);
    EXPECT_EQ(c.view.small.buddy.state[1], static_cast<std::uint32_t>(toga::node_available))
        << "after freeing everything, a trim and merging, the root is not AVAILABLE";
    // recovery: the device heap (unmerged: the merge above ran on the host copy) serves half of
    // what exhaustion handed out again (all of it may need merges that concurrent frees left)
    const unsigned rec = std::min<unsigned>(per_round, static_cast<unsigned>(blocks.size() / 2)) / kBlock * kBlock;
    AGPU_CUDA_CHECK(cudaMemset(nulls.ptr, 0, nulls.bytes()));
    AGPU_CUDA_CHECK(agpu_run("recovery round", ms, [&](cudaStream_t st) {
      agpu_round_kernel<<<rec / kBlock, kBlock, 0, st>>>(a, rec, bytes, ptrs.ptr, nulls.ptr);
    }));
    unsigned long long nn = 0;
    AGPU_CUDA_CHECK(cudaMemcpy(&nn, nulls.ptr, sizeof nn, cudaMemcpyDeviceToHost));
    EXPECT_EQ(nn, 0ull) << "after recovery, " << nn << " of " << rec << " allocations failed";
    AGPU_CUDA_CHECK(agpu_run("recovery: free", ms, [&](cudaStream_t st) {
      agpu_free_all_kernel<<<rec / kBlock, kBlock, 0, st>>>(a, ptrs.ptr, rec);
    }));
    AGPU_RUN(agpu_check_quiescent(h, c, "recovery: all freed", q, s));
    EXPECT_EQ(s.used_bytes, 0u);
  }
}

// --- 5. Mixed churn --------------------------------------------------------------------------

struct agpu_churn_counters {
  unsigned long long pairs;       //!< allocate + free pairs completed
  unsigned long long nulls;       //!< allocations that returned nullptr
  unsigned long long corrupt;     //!< blocks whose pattern changed between write and verify
  unsigned long long timed_out;   //!< threads that stopped at the device-side deadline
  unsigned long long finished;    //!< threads that left the loop (post-mortem progress)
};

__constant__ std::uint32_t agpu_churn_sizes[8] = {16, 32, 64, 128, 256, 512, 1024, 4096};

__global__ void agpu_churn_kernel(alloc_view a, unsigned rounds, std::uint32_t seed, std::uint64_t budget_ns,
                                  agpu_churn_counters* c) {
  const unsigned i = agpu_gtid();
  const std::uint64_t t0 = agpu_globaltimer();
  unsigned long long pairs = 0;
  for (unsigned r = 0; r < rounds; ++r) {
    if (agpu_globaltimer() - t0 > budget_ns) {  // device-side deadline: stop, and say so
      atomicAdd(&c->timed_out, 1ull);
      break;
    }
    const std::uint64_t x = agpu_mix64((std::uint64_t{seed} << 40) ^ (std::uint64_t{i} << 8) ^ r);
    const std::uint32_t s = agpu_churn_sizes[x & 7];
    char* p = static_cast<char*>(a.allocate(s));
    if (p == nullptr) {
      atomicAdd(&c->nulls, 1ull);
      continue;
    }
    // volatile: the compiler may not fold the verify into the write
    volatile std::uint64_t* w = reinterpret_cast<volatile std::uint64_t*>(p);
    const unsigned words = s / 8;
    const std::uint32_t salt = seed * 31u + r;
    for (unsigned k = 0; k < words; ++k) w[k] = agpu_pattern(i, k, salt);
    unsigned wrong = 0;
    for (unsigned k = 0; k < words; ++k) wrong += w[k] != agpu_pattern(i, k, salt);
    if (wrong) atomicAdd(&c->corrupt, 1ull);
    a.deallocate(p);
    ++pairs;
  }
  atomicAdd(&c->pairs, pairs);
  atomicAdd(&c->finished, 1ull);
}

TEST(CudaAllocator, MixedChurnOneKernelWithDeadline) {
  AGPU_REQUIRE_CUDA_DEVICE();
  AGPU_REQUIRE_WORKING_BITS();
  agpu_heap h;
  AGPU_RUN(agpu_make_heap(h, std::uint64_t{256} << 20));
  agpu_host_copy c;
  constexpr unsigned n = 1u << 16;
  constexpr unsigned rounds = 16;
  constexpr std::uint64_t budget_ns = 20ull * 1000 * 1000 * 1000;  // device-side, below the host's 60 s
  agpu_buffer<agpu_churn_counters> ctr;
  AGPU_ALLOC(ctr, 1);
  const alloc_view a = h.view;
  std::vector<float> times;
  std::uint64_t total_pairs = 0;
  for (unsigned run = 0; run < 4; ++run) {  // run 0: warm-up
    AGPU_CUDA_CHECK(cudaMemset(ctr.ptr, 0, ctr.bytes()));
    float ms = 0;
    const std::string what = run == 0 ? "churn warm-up" : "churn run " + std::to_string(run);
    const agpu_dump_fn dump = [&](cudaStream_t side) {
      const auto hc = agpu_peek(ctr.ptr, 1, side);
      std::printf("allocator_gpu_test: churn post-mortem: %llu of %u threads finished (%llu pairs), %llu nulls, "
                  "%llu corrupt, %llu past the device deadline\n",
                  hc[0].finished, n, hc[0].pairs, hc[0].nulls, hc[0].corrupt, hc[0].timed_out);
    };
    AGPU_CUDA_CHECK(agpu_run(what.c_str(), ms, [&](cudaStream_t st) {
      agpu_churn_kernel<<<n / kBlock, kBlock, 0, st>>>(a, rounds, 1000 + run, budget_ns, ctr.ptr);
    }, dump));
    std::vector<agpu_churn_counters> hc;
    AGPU_TO_HOST(hc, ctr);
    EXPECT_EQ(hc[0].timed_out, 0ull) << what << ": " << hc[0].timed_out
                                     << " threads hit the device-side deadline (20 s): the allocator is far too slow "
                                        "or livelocking";
    EXPECT_EQ(hc[0].corrupt, 0ull) << what << ": blocks written by two threads at once (overlapping blocks)";
    EXPECT_EQ(hc[0].nulls, 0ull) << what << ": nullptr from a 256 MiB heap that never holds more than 2^16 blocks";
    EXPECT_EQ(hc[0].pairs + hc[0].nulls, std::uint64_t{n} * rounds) << what;
    total_pairs += hc[0].pairs;
    if (run > 0) times.push_back(ms);
    if (HasFailure()) return;
  }
  std::sort(times.begin(), times.end());
  const double med = times[1];
  const double ops = 2.0 * n * rounds;  // one allocate + one deallocate per round and thread
  std::printf("[  figure  ] churn: %u threads x %u rounds, sizes {16..1024, 4096}: median %.3f ms (runs %.3f / %.3f / "
              "%.3f ms) = %.1f M operations/s (allocate or deallocate, write+verify included), %.1f M pairs/s\n",
              n, rounds, med, times[0], times[1], times[2], ops / (med * 1e3), ops / 2 / (med * 1e3));
  toga::heap_quality q;
  toga::heap_statistics s;
  AGPU_RUN(agpu_check_quiescent(h, c, "churn: after 4 runs", q, s));
  EXPECT_EQ(s.used_bytes, 0u);
  EXPECT_EQ(q.live_blocks, 0u);
  EXPECT_EQ(s.allocations, total_pairs);
  EXPECT_EQ(s.deallocations, total_pairs);
}

}  // namespace
