//! @file tests/gpu/platform_gpu_test.cu
//! Tests of `toga::cuda::platform` inside real kernels: atomics (totals, returned old
//! values), warp collectives over a partial mask (against CUDA's documented semantics,
//! computed on the host) and identity.
//!
//! Without a CUDA device (CI) every test skips cleanly via GTEST_SKIP.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "gpu_test_support.cuh"
#include "toga/cuda/platform.cuh"

namespace {

using P = toga::cuda::platform;

// -----------------------------------------------------------------------------------------
// Harness
// -----------------------------------------------------------------------------------------

//! Empty when a CUDA device is usable, else why not.
std::string no_device_reason() { return ::toga::test::no_cuda_device_reason(); }

//! First statement of every test: skips (not fails) without a usable device.
#define TOGA_REQUIRE_CUDA_DEVICE()                                              \
  do {                                                                          \
    const std::string toga_reason_ = no_device_reason();                        \
    if (!toga_reason_.empty()) GTEST_SKIP() << "no CUDA device: " << toga_reason_; \
  } while (0)

//! Fails the test (and returns from the current void function) if `call` is not cudaSuccess.
#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    const cudaError_t toga_err_ = (call);                                             \
    if (toga_err_ != cudaSuccess)                                                     \
      FAIL() << cudaGetErrorName(toga_err_) << " (" << cudaGetErrorString(toga_err_) \
             << ") from `" #call "` at " __FILE__ ":" << __LINE__;                    \
  } while (0)

//! After every kernel launch: launch errors, then execution errors.
#define CUDA_CHECK_LAUNCH()                   \
  do {                                        \
    CUDA_CHECK(cudaGetLastError());           \
    CUDA_CHECK(cudaDeviceSynchronize());      \
  } while (0)

//! Owning device buffer of n T's (allocated with CUDA_CHECK in the test body).
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

#define DEVICE_ALLOC(buf, count)                                                  \
  do {                                                                            \
    (buf).n = (count);                                                            \
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&(buf).ptr), (buf).bytes())); \
  } while (0)

#define TO_DEVICE(buf, host_vec) \
  CUDA_CHECK(cudaMemcpy((buf).ptr, (host_vec).data(), (buf).bytes(), cudaMemcpyHostToDevice))
#define TO_HOST(host_vec, buf)                                                           \
  do {                                                                                   \
    (host_vec).resize((buf).n);                                                          \
    CUDA_CHECK(cudaMemcpy((host_vec).data(), (buf).ptr, (buf).bytes(), cudaMemcpyDeviceToHost)); \
  } while (0)

// -----------------------------------------------------------------------------------------
// (a) fetch_add / fetch_sub totals
// -----------------------------------------------------------------------------------------

constexpr unsigned kAddThreads = 1u << 20;
constexpr std::uint64_t kAdd64 = (std::uint64_t{1} << 32) + 1;  // crosses the 32-bit boundary

__global__ void fetch_add_kernel(std::uint64_t* c64, std::uint32_t* c32, std::uint32_t* down32,
                                 std::uint32_t* old32) {
  const unsigned i = P::block_id() * P::block_dim() + P::thread_id();
  P::fetch_add(c64, kAdd64, toga::relaxed, toga::device_scope);
  old32[i] = P::fetch_add(c32, 1u, toga::acq_rel, toga::device_scope);
  P::fetch_sub(down32, 1u, toga::seq_cst, toga::device_scope);
}

TEST(CudaPlatform, FetchAddExactTotals) {
  TOGA_REQUIRE_CUDA_DEVICE();
  device_buffer<std::uint64_t> c64;
  device_buffer<std::uint32_t> c32, down32, old32;
  DEVICE_ALLOC(c64, 1);
  DEVICE_ALLOC(c32, 1);
  DEVICE_ALLOC(down32, 1);
  DEVICE_ALLOC(old32, kAddThreads);
  const std::vector<std::uint64_t> init64{7};  // non-zero start: totals are start + sum
  const std::vector<std::uint32_t> zero{0}, start_down{kAddThreads + 5};
  TO_DEVICE(c64, init64);
  TO_DEVICE(c32, zero);
  TO_DEVICE(down32, start_down);
  CUDA_CHECK(cudaMemset(old32.ptr, 0xff, old32.bytes()));

  fetch_add_kernel<<<kAddThreads / 256, 256>>>(c64.ptr, c32.ptr, down32.ptr, old32.ptr);
  CUDA_CHECK_LAUNCH();

  std::vector<std::uint64_t> h64;
  std::vector<std::uint32_t> h32, hdown, hold;
  TO_HOST(h64, c64);
  TO_HOST(h32, c32);
  TO_HOST(hdown, down32);
  TO_HOST(hold, old32);
  EXPECT_EQ(h64[0], 7 + std::uint64_t{kAddThreads} * kAdd64);
  EXPECT_EQ(h32[0], kAddThreads);
  EXPECT_EQ(hdown[0], 5u);
  // Every thread saw a distinct previous value: the old values are exactly 0 .. n-1.
  std::sort(hold.begin(), hold.end());
  std::size_t mismatches = 0;
  for (std::uint32_t k = 0; k < kAddThreads; ++k) mismatches += hold[k] != k;
  EXPECT_EQ(mismatches, 0u) << "fetch_add old values are not a permutation of 0..2^20-1";
}

// Block-scope atomics on shared memory: one counter per block.
__global__ void block_scope_add_kernel(std::uint32_t* per_block, std::uint64_t* per_block64) {
  __shared__ std::uint32_t s32;
  __shared__ std::uint64_t s64;
  if (P::thread_id() == 0) {
    P::store(&s32, 0u, toga::relaxed, toga::block_scope);
    P::store(&s64, std::uint64_t{0xffffffffu}, toga::relaxed, toga::block_scope);
  }
  __syncthreads();
  P::fetch_add(&s32, P::thread_id() + 1, toga::relaxed, toga::block_scope);
  P::fetch_add(&s64, 1u, toga::acq_rel, toga::block_scope);
  __syncthreads();
  if (P::thread_id() == 0) {
    per_block[P::block_id()] = P::load(&s32, toga::acquire, toga::block_scope);
    per_block64[P::block_id()] = P::load(&s64, toga::seq_cst, toga::block_scope);
  }
}

TEST(CudaPlatform, BlockScopeFetchAddOnSharedMemory) {
  TOGA_REQUIRE_CUDA_DEVICE();
  constexpr unsigned blocks = 64, threads = 512;
  device_buffer<std::uint32_t> out;
  device_buffer<std::uint64_t> out64;
  DEVICE_ALLOC(out, blocks);
  DEVICE_ALLOC(out64, blocks);
  CUDA_CHECK(cudaMemset(out.ptr, 0, out.bytes()));
  CUDA_CHECK(cudaMemset(out64.ptr, 0, out64.bytes()));
  block_scope_add_kernel<<<blocks, threads>>>(out.ptr, out64.ptr);
  CUDA_CHECK_LAUNCH();
  std::vector<std::uint32_t> h;
  std::vector<std::uint64_t> h64;
  TO_HOST(h, out);
  TO_HOST(h64, out64);
  for (unsigned b = 0; b < blocks; ++b) {
    EXPECT_EQ(h[b], threads * (threads + 1) / 2) << "block " << b;
    EXPECT_EQ(h64[b], std::uint64_t{0xffffffffu} + threads) << "block " << b;
  }
}

// -----------------------------------------------------------------------------------------
// (b) CAS loop with backoff
// -----------------------------------------------------------------------------------------

constexpr unsigned kCasThreads = 1u << 16;
// Starts just below 2^32 so that the increments carry into the high word.
constexpr std::uint64_t kCasStart = (std::uint64_t{1} << 32) - (kCasThreads / 2);

__global__ void cas_increment_kernel(std::uint64_t* counter, std::uint64_t* old,
                                     std::uint32_t* cas32) {
  const unsigned i = P::block_id() * P::block_dim() + P::thread_id();
  std::uint64_t cur = P::load(counter, toga::relaxed, toga::device_scope);
  unsigned attempt = 0;
  while (!P::compare_exchange(counter, cur, cur + 1, toga::acq_rel, toga::device_scope))
    P::backoff(attempt++);  // `cur` now holds the current value
  old[i] = cur;

  std::uint32_t cur32 = P::load(cas32, toga::acquire, toga::device_scope);
  attempt = 0;
  while (!P::compare_exchange(cas32, cur32, cur32 + 3, toga::seq_cst, toga::device_scope))
    P::backoff(attempt++);
}

TEST(CudaPlatform, CasLoopIncrementWithBackoff) {
  TOGA_REQUIRE_CUDA_DEVICE();
  device_buffer<std::uint64_t> counter, old;
  device_buffer<std::uint32_t> c32;
  DEVICE_ALLOC(counter, 1);
  DEVICE_ALLOC(old, kCasThreads);
  DEVICE_ALLOC(c32, 1);
  const std::vector<std::uint64_t> start{kCasStart};
  const std::vector<std::uint32_t> start32{11};
  TO_DEVICE(counter, start);
  TO_DEVICE(c32, start32);
  CUDA_CHECK(cudaMemset(old.ptr, 0, old.bytes()));

  cas_increment_kernel<<<kCasThreads / 128, 128>>>(counter.ptr, old.ptr, c32.ptr);
  CUDA_CHECK_LAUNCH();

  std::vector<std::uint64_t> hc, hold;
  std::vector<std::uint32_t> h32;
  TO_HOST(hc, counter);
  TO_HOST(hold, old);
  TO_HOST(h32, c32);
  EXPECT_EQ(hc[0], kCasStart + kCasThreads);
  EXPECT_EQ(h32[0], 11u + 3u * kCasThreads);
  // Each successful CAS saw a distinct value: the olds are exactly start .. start+n-1.
  std::sort(hold.begin(), hold.end());
  std::size_t mismatches = 0;
  for (std::uint64_t k = 0; k < kCasThreads; ++k) mismatches += hold[k] != kCasStart + k;
  EXPECT_EQ(mismatches, 0u) << "successful CAS old values are not start..start+2^16-1";
}

// -----------------------------------------------------------------------------------------
// (c) exchange / fetch_or / fetch_and
// -----------------------------------------------------------------------------------------

constexpr unsigned kBitThreads = 64;

struct bits_result {
  std::uint64_t or_old[kBitThreads];
  std::uint64_t after_or;
  std::uint64_t and_old[kBitThreads];
  std::uint64_t after_and;
  std::uint32_t xchg_old[kBitThreads];
  std::uint32_t after_xchg;
};

__global__ void bits_kernel(std::uint64_t* word, std::uint32_t* slot, bits_result* r) {
  const unsigned t = P::thread_id();  // one block of 64 threads
  if (t == 0) {
    P::store(word, std::uint64_t{0}, toga::release, toga::device_scope);
    P::store(slot, 0u, toga::seq_cst, toga::device_scope);
  }
  __syncthreads();
  const std::uint64_t bit = std::uint64_t{1} << t;
  r->or_old[t] = P::fetch_or(word, bit, toga::acq_rel, toga::device_scope);
  r->xchg_old[t] = P::exchange(slot, t + 1, toga::acq_rel, toga::device_scope);
  __syncthreads();
  if (t == 0) {
    r->after_or = P::load(word, toga::acquire, toga::device_scope);
    r->after_xchg = P::load(slot, toga::relaxed, toga::device_scope);
  }
  __syncthreads();
  // Only this block touches `word`: block scope suffices.
  r->and_old[t] = P::fetch_and(word, ~bit, toga::release, toga::block_scope);
  P::fence(toga::seq_cst, toga::block_scope);
  __syncthreads();
  if (t == 0) r->after_and = P::load(word, toga::seq_cst, toga::block_scope);
}

TEST(CudaPlatform, FetchOrFetchAndExchangeGiveDistinctOldValues) {
  TOGA_REQUIRE_CUDA_DEVICE();
  device_buffer<std::uint64_t> word;
  device_buffer<std::uint32_t> slot;
  device_buffer<bits_result> res;
  DEVICE_ALLOC(word, 1);
  DEVICE_ALLOC(slot, 1);
  DEVICE_ALLOC(res, 1);
  // Garbage everywhere: the kernel initialises the words itself and writes every result.
  CUDA_CHECK(cudaMemset(word.ptr, 0xa5, word.bytes()));
  CUDA_CHECK(cudaMemset(slot.ptr, 0xa5, slot.bytes()));
  CUDA_CHECK(cudaMemset(res.ptr, 0xa5, res.bytes()));

  bits_kernel<<<1, kBitThreads>>>(word.ptr, slot.ptr, res.ptr);
  CUDA_CHECK_LAUNCH();

  bits_result r;
  CUDA_CHECK(cudaMemcpy(&r, res.ptr, sizeof r, cudaMemcpyDeviceToHost));

  EXPECT_EQ(r.after_or, ~std::uint64_t{0});
  EXPECT_EQ(r.after_and, std::uint64_t{0});

  // fetch_or: each old value lacks the thread's own bit, and the olds form a chain, so their
  // popcounts are exactly 0..63 and the old values are pairwise distinct.
  std::vector<unsigned> or_pop, and_pop;
  std::vector<std::uint64_t> or_olds(r.or_old, r.or_old + kBitThreads);
  for (unsigned t = 0; t < kBitThreads; ++t) {
    EXPECT_EQ(r.or_old[t] & (std::uint64_t{1} << t), 0u) << "thread " << t;
    EXPECT_NE(r.and_old[t] & (std::uint64_t{1} << t), 0u) << "thread " << t;
    or_pop.push_back(std::popcount(r.or_old[t]));
    and_pop.push_back(std::popcount(r.and_old[t]));
  }
  std::sort(or_olds.begin(), or_olds.end());
  EXPECT_EQ(std::adjacent_find(or_olds.begin(), or_olds.end()), or_olds.end())
      << "two threads saw the same fetch_or old value";
  std::sort(or_pop.begin(), or_pop.end());
  std::sort(and_pop.begin(), and_pop.end());
  std::vector<unsigned> expect_or(kBitThreads), expect_and(kBitThreads);
  std::iota(expect_or.begin(), expect_or.end(), 0u);   // 0..63
  std::iota(expect_and.begin(), expect_and.end(), 1u); // 1..64
  EXPECT_EQ(or_pop, expect_or);
  EXPECT_EQ(and_pop, expect_and);

  // exchange: the old values plus the final value are exactly {0, 1, ..., 64}.
  std::vector<std::uint32_t> xs(r.xchg_old, r.xchg_old + kBitThreads);
  xs.push_back(r.after_xchg);
  std::sort(xs.begin(), xs.end());
  std::vector<std::uint32_t> expect_x(kBitThreads + 1);
  std::iota(expect_x.begin(), expect_x.end(), 0u);
  EXPECT_EQ(xs, expect_x);
}

// -----------------------------------------------------------------------------------------
// (d) warp collectives over a partial mask
// -----------------------------------------------------------------------------------------

constexpr std::uint32_t kEvenLanes = 0x55555555u;
constexpr std::uint32_t kSentinel = 0xffffffffu;  // cudaMemset(0xff)

struct warp_result {
  std::uint32_t activemask[32];
  std::uint32_t ballot[32];
  std::uint32_t shfl_bcast[32];
  std::uint32_t shfl_neighbor[32];
  std::uint64_t shfl64[32];
  std::uint32_t match32[32];
  std::uint32_t match64[32];
  std::uint32_t after_sync[32];
  std::uint32_t reduce_or[32];
  std::uint32_t max_old[32];
  std::uint32_t lanemask_lt[32];
  std::uint32_t lane_id[32];
};

__host__ __device__ constexpr std::uint32_t shfl_value(unsigned lane) { return 1000u + 7u * lane; }
__host__ __device__ constexpr std::uint64_t shfl_value64(unsigned lane) {
  return (std::uint64_t{lane + 1} << 40) | (0xabcd0000u + lane);
}
__host__ __device__ constexpr std::uint64_t match_key64(unsigned lane) {
  return std::uint64_t{lane % 3} << 40;  // low 32 bits all equal: a truncating match fails
}
__host__ __device__ constexpr std::uint32_t sync_value(unsigned lane) { return 0x5000u + lane * lane; }

__global__ void warp_kernel(warp_result* r) {
  __shared__ std::uint32_t smem[32];
  __shared__ std::uint32_t maxw;
  const unsigned lane = P::lane_id();
  if (lane == 0) maxw = 0;
  r->lane_id[lane] = lane;
  r->lanemask_lt[lane] = P::lanemask_lt();
  smem[lane] = 0;
  P::syncwarp(toga::full_mask);
  if ((kEvenLanes >> lane) & 1u) {
    r->activemask[lane] = P::activemask();
    r->ballot[lane] = P::ballot(kEvenLanes, lane % 4 == 0);
    r->shfl_bcast[lane] = P::shfl(kEvenLanes, shfl_value(lane), 6);
    r->shfl_neighbor[lane] = P::shfl(kEvenLanes, shfl_value(lane), static_cast<int>((lane + 2) % 32));
    r->shfl64[lane] = P::shfl(kEvenLanes, shfl_value64(lane), static_cast<int>((lane + 30) % 32));
    r->match32[lane] = P::match_any(kEvenLanes, static_cast<std::uint32_t>(lane % 3));
    r->match64[lane] = P::match_any(kEvenLanes, match_key64(lane));
    r->reduce_or[lane] = P::reduce_or(kEvenLanes, 1u << (lane / 2));
    r->max_old[lane] = P::fetch_max(&maxw, 100u + lane, toga::relaxed, toga::block_scope);
    // syncwarp orders the shared-memory writes of the mask's lanes before their reads.
    smem[lane] = sync_value(lane);
    P::syncwarp(kEvenLanes);
    r->after_sync[lane] = smem[(lane + 4) % 32];
  }
}

TEST(CudaPlatform, WarpCollectivesOverPartialMask) {
  TOGA_REQUIRE_CUDA_DEVICE();
  device_buffer<warp_result> res;
  DEVICE_ALLOC(res, 1);
  CUDA_CHECK(cudaMemset(res.ptr, 0xff, res.bytes()));

  warp_kernel<<<1, 32>>>(res.ptr);
  CUDA_CHECK_LAUNCH();

  warp_result r;
  CUDA_CHECK(cudaMemcpy(&r, res.ptr, sizeof r, cudaMemcpyDeviceToHost));

  // Host model of CUDA's documented semantics.
  auto in_mask = [](unsigned l) { return ((kEvenLanes >> l) & 1u) != 0; };
  std::uint32_t expect_ballot = 0;
  for (unsigned l = 0; l < 32; ++l)
    if (in_mask(l) && l % 4 == 0) expect_ballot |= 1u << l;
  ASSERT_EQ(expect_ballot, 0x11111111u);  // sanity of the model itself

  for (unsigned l = 0; l < 32; ++l) {
    SCOPED_TRACE("lane " + std::to_string(l));
    EXPECT_EQ(r.lane_id[l], l);
    EXPECT_EQ(r.lanemask_lt[l], (std::uint32_t{1} << l) - 1u);
    if (!in_mask(l)) {
      // Lanes outside the mask never ran the collectives and wrote nothing.
      EXPECT_EQ(r.ballot[l], kSentinel);
      EXPECT_EQ(r.shfl_bcast[l], kSentinel);
      EXPECT_EQ(r.match32[l], kSentinel);
      EXPECT_EQ(r.after_sync[l], kSentinel);
      continue;
    }
    // activemask is a snapshot: within the even-lane branch it contains the caller and no
    // odd lane (the warp is diverged there).
    EXPECT_NE(r.activemask[l] & (1u << l), 0u);
    EXPECT_EQ(r.activemask[l] & ~kEvenLanes, 0u);
    EXPECT_EQ(r.ballot[l], expect_ballot);
    EXPECT_EQ(r.shfl_bcast[l], shfl_value(6));
    EXPECT_EQ(r.shfl_neighbor[l], shfl_value((l + 2) % 32));
    EXPECT_EQ(r.shfl64[l], shfl_value64((l + 30) % 32));
    std::uint32_t expect_m32 = 0, expect_m64 = 0;
    for (unsigned o = 0; o < 32; ++o) {
      if (!in_mask(o)) continue;
      if (o % 3 == l % 3) expect_m32 |= 1u << o;
      if (match_key64(o) == match_key64(l)) expect_m64 |= 1u << o;
    }
    EXPECT_EQ(r.match32[l], expect_m32);
    EXPECT_EQ(r.match64[l], expect_m64);
    EXPECT_EQ(r.after_sync[l], sync_value((l + 4) % 32));
    EXPECT_EQ(r.reduce_or[l], 0xffffu);
    // fetch_max: every old value is below 100 + 30 (the largest operand) or 0 (the first)
    EXPECT_TRUE(r.max_old[l] == 0 || (r.max_old[l] >= 100u && r.max_old[l] < 130u)) << r.max_old[l];
  }
  // exactly one lane saw the initial 0, and the lane with the largest operand never saw a
  // larger old value than its own
  unsigned zeros = 0;
  for (unsigned l = 0; l < 32; l += 2) zeros += r.max_old[l] == 0;
  EXPECT_EQ(zeros, 1u);
}

// -----------------------------------------------------------------------------------------
// (e) identity
// -----------------------------------------------------------------------------------------

struct identity_record {
  unsigned thread_id, block_id, block_dim, grid_dim, warp_id, lane_id, sm_id, num_sms;
  unsigned tx, ty, tz, bx, by, bz;
};

__global__ void identity_kernel(identity_record* out) {
  const unsigned slot = P::block_id() * P::block_dim() + P::thread_id();
  identity_record rec;
  rec.thread_id = P::thread_id();
  rec.block_id = P::block_id();
  rec.block_dim = P::block_dim();
  rec.grid_dim = P::grid_dim();
  rec.warp_id = P::warp_id();
  rec.lane_id = P::lane_id();
  rec.sm_id = P::sm_id();
  rec.num_sms = P::num_sms();
  rec.tx = threadIdx.x;
  rec.ty = threadIdx.y;
  rec.tz = threadIdx.z;
  rec.bx = blockIdx.x;
  rec.by = blockIdx.y;
  rec.bz = blockIdx.z;
  out[slot] = rec;
}

void check_identity(dim3 grid, dim3 block) {
  const unsigned threads = block.x * block.y * block.z;
  const unsigned blocks = grid.x * grid.y * grid.z;
  const std::size_t n = std::size_t{threads} * blocks;
  device_buffer<identity_record> out;
  DEVICE_ALLOC(out, n);
  CUDA_CHECK(cudaMemset(out.ptr, 0xff, out.bytes()));
  identity_kernel<<<grid, block>>>(out.ptr);
  CUDA_CHECK_LAUNCH();
  std::vector<identity_record> h;
  TO_HOST(h, out);

  int dev = 0, sm_count = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev));

  for (std::size_t s = 0; s < n; ++s) {
    if (::testing::Test::HasFailure()) break;  // report the first bad slot, not thousands
    const identity_record& r = h[s];
    const unsigned tid = static_cast<unsigned>(s % threads);
    const unsigned bid = static_cast<unsigned>(s / threads);
    // The slot index was computed from thread_id/block_id on the device; the recorded
    // threadIdx/blockIdx must linearise (x fastest) to the same values.
    EXPECT_EQ(r.thread_id, tid) << "slot " << s;
    EXPECT_EQ(r.block_id, bid) << "slot " << s;
    EXPECT_EQ(r.tx + block.x * (r.ty + block.y * r.tz), tid) << "slot " << s;
    EXPECT_EQ(r.bx + grid.x * (r.by + grid.y * r.bz), bid) << "slot " << s;
    EXPECT_LT(r.tx, block.x);
    EXPECT_LT(r.ty, block.y);
    EXPECT_LT(r.tz, block.z);
    EXPECT_LT(r.bx, grid.x);
    EXPECT_LT(r.by, grid.y);
    EXPECT_LT(r.bz, grid.z);
    EXPECT_EQ(r.block_dim, threads) << "slot " << s;
    EXPECT_EQ(r.grid_dim, blocks) << "slot " << s;
    // Warps are formed from the linear thread index.
    EXPECT_EQ(r.warp_id, tid / 32) << "slot " << s;
    EXPECT_EQ(r.lane_id, tid % 32) << "slot " << s;
    EXPECT_LT(r.sm_id, r.num_sms) << "slot " << s;
    // %nsmid may exceed the SM count (non-contiguous ids) but never falls below it.
    EXPECT_GE(r.num_sms, static_cast<unsigned>(sm_count)) << "slot " << s;
    EXPECT_EQ(r.num_sms, h[0].num_sms) << "slot " << s;
  }
}

TEST(CudaPlatform, IdentityConsistentWith2DLaunch) {
  TOGA_REQUIRE_CUDA_DEVICE();
  // 12 x 8 threads: rows of 12 do not align with warps, so lane/warp ids test the
  // linearisation, not just threadIdx.x.
  check_identity(dim3(5, 3), dim3(12, 8));
}

TEST(CudaPlatform, IdentityConsistentWith3DLaunch) {
  TOGA_REQUIRE_CUDA_DEVICE();
  check_identity(dim3(2, 3, 4), dim3(8, 4, 3));
}

TEST(CudaPlatform, IdentityCoversManySms) {
  TOGA_REQUIRE_CUDA_DEVICE();
  // Enough blocks to occupy every SM several times over: every recorded sm_id is still below
  // num_sms, and more than one SM shows up.
  int dev = 0, sm_count = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev));
  const unsigned blocks = static_cast<unsigned>(sm_count) * 8;
  device_buffer<identity_record> out;
  DEVICE_ALLOC(out, std::size_t{blocks} * 64);
  identity_kernel<<<blocks, 64>>>(out.ptr);
  CUDA_CHECK_LAUNCH();
  std::vector<identity_record> h;
  TO_HOST(h, out);
  std::vector<bool> seen(h[0].num_sms, false);
  std::size_t out_of_range = 0;
  for (const identity_record& r : h) {
    if (r.sm_id >= r.num_sms || r.num_sms != h[0].num_sms) {
      ++out_of_range;
      continue;
    }
    seen[r.sm_id] = true;
  }
  EXPECT_EQ(out_of_range, 0u);
  const auto distinct = std::count(seen.begin(), seen.end(), true);
  if (sm_count > 1) EXPECT_GT(distinct, 1);
  EXPECT_LE(distinct, sm_count);
}

}  // namespace
