//! @file tests/gpu/primitives_gpu_test.cu
//! The core synchronisation primitives (coalesced groups, bulk semaphore, collective mutex,
//! pop-k, SRCU with delegated reclamation) instantiated with `toga::cuda::platform` and run
//! inside real kernels, with up to 2^16 threads contending. The simulator scenarios in
//! sim/src/scenarios_primitives.cpp explore interleavings of a few lanes; these tests check the
//! same properties (design.md §2.3: S1-S7, M1-M4, R1-R4) at GPU scale:
//!
//!  * coalesced groups over partial warps with 1-3 keys per warp: leader, rank, size,
//!    broadcast, from_rank, exclusive_scan (checked against the mask each lane recorded);
//!  * bulk semaphore, one thread per wait: every thread gets a distinct item (or reports
//!    out-of-memory when the backing store is too small: exactly threads - capacity * B do),
//!    and at quiescence E == R == 0 and C == the items still published;
//!  * bulk semaphore, collective waits over partial and full warps, one or two semaphores per
//!    warp (so one or two groups per warp): GROW(m) shared by m producers, leftovers signalled
//!    per batch (batch_leftover), every taking-part lane gets a distinct item;
//!  * collective mutex and pop-k: distinct elements, the rest of the list intact, no lost
//!    update of a non-atomic counter updated by each group's leader inside the lock;
//!  * RCU: readers inside read-side critical sections never reach a reclaimed node, every
//!    retired node is reclaimed exactly once, retires are delegated, the domain is quiescent.
//!
//! Field widths. `arena_semaphore` (C:31 | E:21 | R:12) is specified for per-SM semaphores,
//! waited on by at most 2048 threads at once (design.md §3.1: R <= 2048 * N). The
//! arena tests therefore give each semaphore at most 2048 threads (8 blocks of 256: the
//! threads one SM can hold). Device-wide semaphores with 2^16 waiters use the global widths
//! (`tbuddy_semaphore`, R:19) and print the largest R they sampled.
//!
//! Hangs. Every spin loop written here gives up after 2^24 backoff attempts or 10 s
//! (device-side watchdog: it sets an error flag, so a lost wake-up fails the test instead of
//! hanging). Spins inside the core cannot be bounded from outside: each kernel runs on its own
//! stream, the host waits at most PRIM_KERNEL_DEADLINE_S (default 60) seconds, then prints a
//! post-mortem (semaphore fields, where each lane is) read through a second stream, and exits.
//!
//! Build notes (nvcc 13.0, libstdc++ 12):
//!  * bulk_semaphore.hpp and group.hpp call constexpr host functions (`pack`/`unpack`,
//!    `std::popcount`, `std::countr_zero`) from device code, so this file needs
//!    `--expt-relaxed-constexpr`.
//!  * With that flag, `std::countr_zero(std::uint32_t)` compiles to the constant 32 in device
//!    code (`std::countl_zero`/`std::popcount` on 64-bit words are wrong as well; the 32-bit
//!    `std::popcount` is fine), so `coalesced_group::leader` and `from_rank` name the wrong
//!    lane. CoalescedGroupLeaderRankBroadcastFromRankScan catches it, and the collective
//!    semaphore tests then fail at once instead of launching a kernel that would hang.
//!
//! Without a CUDA device (CI) every test skips cleanly via GTEST_SKIP.
#include <gtest/gtest.h>

#include "gpu_test_support.cuh"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>

#include "toga/bulk_semaphore.hpp"
#include "toga/cuda/platform.cuh"
#include "toga/group.hpp"
#include "toga/rcu.hpp"

namespace {

using P = toga::cuda::platform;

// -----------------------------------------------------------------------------------------
// Harness (same conventions as platform_gpu_test.cu; names distinct, both files link into one
// executable)
// -----------------------------------------------------------------------------------------

//! Empty when a CUDA device is usable, else why not.
std::string prim_no_device_reason() { return ::toga::test::no_cuda_device_reason(); }

//! Prints the device once per process (name, SMs), for the logs.
void prim_print_device_once() {
  static bool done = false;
  if (done) return;
  done = true;
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
    std::printf("[   info   ] device %d: %s, %d SMs, sm_%d%d\n", dev, prop.name, prop.multiProcessorCount,
                prop.major, prop.minor);
}

//! First statement of every test: skips (not fails) without a usable device.
#define PRIM_REQUIRE_CUDA_DEVICE()                                                        \
  do {                                                                                    \
    const std::string prim_reason_ = prim_no_device_reason();                             \
    if (!prim_reason_.empty()) GTEST_SKIP() << "no CUDA device: " << prim_reason_;        \
    prim_print_device_once();                                                             \
  } while (0)

//! Fails the test (and returns from the current void function) if `call` is not cudaSuccess.
#define PRIM_CUDA_CHECK(call)                                                             \
  do {                                                                                    \
    const cudaError_t prim_err_ = (call);                                                 \
    if (prim_err_ != cudaSuccess)                                                         \
      FAIL() << cudaGetErrorName(prim_err_) << " (" << cudaGetErrorString(prim_err_)     \
             << ") from `" #call "` at " __FILE__ ":" << __LINE__;                        \
  } while (0)

template <class T>
using prim_buffer = ::toga::test::device_buffer<T>;

#define PRIM_ALLOC(buf, count)                                                             \
  do {                                                                                     \
    (buf).n = (count);                                                                     \
    PRIM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&(buf).ptr), (buf).bytes()));     \
  } while (0)
#define PRIM_ZERO(buf) PRIM_CUDA_CHECK(cudaMemset((buf).ptr, 0, (buf).bytes()))
#define PRIM_TO_DEVICE(buf, host_vec)                                                      \
  PRIM_CUDA_CHECK(cudaMemcpy((buf).ptr, (host_vec).data(), (buf).bytes(), cudaMemcpyHostToDevice))
#define PRIM_TO_HOST(host_vec, buf)                                                        \
  do {                                                                                     \
    (host_vec).resize((buf).n);                                                            \
    PRIM_CUDA_CHECK(                                                                       \
        cudaMemcpy((host_vec).data(), (buf).ptr, (buf).bytes(), cudaMemcpyDeviceToHost));  \
  } while (0)

//! The longest the host waits for one kernel before it gives up on the whole process (seconds;
//! environment variable PRIM_KERNEL_DEADLINE_S overrides it).
inline std::chrono::seconds prim_kernel_deadline() {
  const char* env = std::getenv("PRIM_KERNEL_DEADLINE_S");
  const long v = env != nullptr ? std::strtol(env, nullptr, 10) : 0;
  return std::chrono::seconds(v > 0 ? v : 60);
}
//! Device-side watchdog budget of one spin (ns of %globaltimer), well below the deadline.
constexpr std::uint64_t kSpinBudgetNs = 10ull * 1000 * 1000 * 1000;
//! Device-side watchdog bound on backoff attempts of one spin.
constexpr unsigned kSpinMaxAttempts = 1u << 24;

//! Prints the state of a kernel that is stuck (copies on the given stream, which runs beside
//! the kernel's).
using prim_dump_fn = std::function<void(cudaStream_t)>;

//! Runs one kernel on its own non-blocking stream, timed by events, and waits for it with a
//! deadline. A kernel still running at the deadline is stuck in a spin (a lost wake-up, or a
//! warp-level deadlock): `dump` (if any) copies and prints its state through a second stream,
//! then the process exits, since the device cannot be recovered. Returns the first error
//! (launch or execution); `ms` gets the kernel's time.
template <class Launch>
cudaError_t prim_run(const char* what, float& ms, Launch launch, const prim_dump_fn& dump = {}) {
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
    const auto deadline = prim_kernel_deadline();
    while ((e = cudaEventQuery(stop)) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() - t0 > deadline) {
        std::printf("primitives_gpu_test: kernel `%s` still running after %lld s: a spin that never ends "
                    "(lost wake-up or warp-level deadlock)\n",
                    what, static_cast<long long>(deadline.count()));
        if (dump) dump(side);
        std::printf("primitives_gpu_test: aborting the process (the device cannot be recovered)\n");
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(3);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, start, stop);
  if (e == cudaSuccess) std::printf("[   time   ] %s: %.3f ms\n", what, ms);
  const cudaError_t sync = cudaDeviceSynchronize();
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  (void)cudaStreamDestroy(stream);
  (void)cudaStreamDestroy(side);
  return e != cudaSuccess ? e : sync;
}

//! Copies n T's from the device on stream `s` while a kernel may still run (post-mortem).
template <class T>
std::vector<T> prim_peek(const T* dev, std::size_t n, cudaStream_t s) {
  std::vector<T> h(n);
  if (cudaMemcpyAsync(h.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost, s) != cudaSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess)
    std::printf("primitives_gpu_test: post-mortem copy failed\n");
  return h;
}

//! The tests spin-wait on other threads of the same grid (producers, lock holders, readers),
//! so every block must be resident at once; fails the test if this GPU cannot hold the grid.
template <class Kernel>
void prim_require_coresident(Kernel kernel, unsigned blocks, unsigned threads) {
  int dev = 0, sms = 0, per_sm = 0;
  PRIM_CUDA_CHECK(cudaGetDevice(&dev));
  PRIM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  PRIM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, static_cast<int>(threads), 0));
  ASSERT_GE(static_cast<long long>(per_sm) * sms, static_cast<long long>(blocks))
      << "the grid (" << blocks << " x " << threads << ") is not co-resident on this GPU (" << sms << " SMs x "
      << per_sm << " blocks); spin-waits between blocks could deadlock";
}

// -----------------------------------------------------------------------------------------
// Device helpers
// -----------------------------------------------------------------------------------------

__device__ __forceinline__ std::uint64_t prim_globaltimer() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

//! Bounds one spin loop: call `again()` once per failed iteration (it backs off); it returns
//! false, and sets `*error`, once the spin has run kSpinMaxAttempts attempts or its time budget.
struct prim_watchdog {
  std::uint64_t t0;
  std::uint32_t* error;
  unsigned attempt = 0;
  __device__ explicit prim_watchdog(std::uint32_t* err) : t0(prim_globaltimer()), error(err) {}
  __device__ bool again() {
    P::backoff(attempt);
    if (++attempt >= kSpinMaxAttempts || prim_globaltimer() - t0 > kSpinBudgetNs) {
      P::fetch_add(error, 1u, toga::relaxed, toga::device_scope);
      return false;
    }
    return true;
  }
};

__host__ __device__ constexpr std::uint32_t prim_mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

__device__ __forceinline__ unsigned prim_global_thread() { return P::block_id() * P::block_dim() + P::thread_id(); }

// -----------------------------------------------------------------------------------------
// (0) Coalesced groups: identity and shuffles, over partial warps and several keys per warp
// -----------------------------------------------------------------------------------------
//
// Every collective primitive trusts these: wait_collective broadcasts the leader's result and
// GROW hands out batches with from_rank; a wrong source lane there means lost promises (waiters
// spin for ever) or one item handed to two lanes. The expected values are computed on the host
// from the mask each lane recorded (which lanes form a group depends on convergence, so it is
// not fixed in advance; its consistency is checked too).

constexpr unsigned kGroupWarps = 16;
//! Lanes taking part in warp w (partial masks, lane 0 absent from most).
__host__ __device__ constexpr std::uint32_t group_participants(unsigned w) {
  constexpr std::uint32_t masks[kGroupWarps] = {0xffffffffu, 0xfffffffeu, 0x55555555u, 0xaaaaaaaau,
                                                0xf0f0f0f0u, 0x80000001u, 0x00010000u, 0x7ffffff0u,
                                                0x12345678u, 0xdeadbeefu, 0x0000ff00u, 0xc0000000u,
                                                0xfffffffcu, 0x3c3c3c3cu, 0x00000002u, 0x96969696u};
  return masks[w % kGroupWarps];
}
//! Key of lane l in warp w: 1, 2 or 3 distinct keys per warp.
__host__ __device__ constexpr std::uint64_t group_key(unsigned w, unsigned l) {
  return (std::uint64_t{0x1234} << 32) + (l * 7u + w) % (1u + w % 3u);
}
__host__ __device__ constexpr std::uint32_t group_value(unsigned w, unsigned l) { return 1000u * (w + 1) + l; }

struct group_record {
  std::uint32_t mask, leader, rank, size, broadcast, scan_below, scan_total, taking_part;
  std::uint32_t from_rank[32];
};

__global__ void group_kernel(group_record* out) {
  const unsigned w = prim_global_thread() / 32, l = P::lane_id();
  group_record& r = out[w * 32 + l];
  if (((group_participants(w) >> l) & 1u) == 0) return;
  const auto g = toga::coalesced_group<P>::by_key(group_key(w, l));
  r.taking_part = 1;
  r.mask = g.mask;
  r.leader = g.leader;
  r.rank = g.rank;
  r.size = g.size;
  r.broadcast = g.broadcast(group_value(w, l));
  std::uint32_t total = 0;
  r.scan_below = g.exclusive_scan(l + 1, total);
  r.scan_total = total;
  for (unsigned k = 0; k < g.size; ++k) r.from_rank[k] = g.from_rank(group_value(w, l), k);
}

//! Runs group_kernel and describes the first wrong value in `error` (empty: all correct).
void check_groups(std::string& error, unsigned& groups_seen) {
  error.clear();
  groups_seen = 0;
  prim_buffer<group_record> out;
  PRIM_ALLOC(out, kGroupWarps * 32);
  PRIM_ZERO(out);
  float ms = 0;
  PRIM_CUDA_CHECK(prim_run("coalesced groups", ms, [&](cudaStream_t st) {
    group_kernel<<<kGroupWarps / 4, 128, 0, st>>>(out.ptr);
  }));
  std::vector<group_record> h;
  PRIM_TO_HOST(h, out);
  auto fail = [&](unsigned w, unsigned l, const std::string& what, std::uint64_t got, std::uint64_t want) {
    if (error.empty())
      error = "warp " + std::to_string(w) + " lane " + std::to_string(l) + ": " + what + " is " + std::to_string(got) +
              ", want " + std::to_string(want) + " (group mask 0x" + [&] {
                char b[16];
                std::snprintf(b, sizeof b, "%08x", h[w * 32 + l].mask);
                return std::string(b);
              }() + ")";
  };
  for (unsigned w = 0; w < kGroupWarps; ++w) {
    for (unsigned l = 0; l < 32; ++l) {
      const group_record& r = h[w * 32 + l];
      const bool part = (group_participants(w) >> l) & 1u;
      if (!part) {
        if (r.taking_part) fail(w, l, "taking_part", 1, 0);
        continue;
      }
      if (!r.taking_part) fail(w, l, "taking_part", 0, 1);
      const std::uint32_t m = r.mask;
      if (((m >> l) & 1u) == 0 || (m & ~group_participants(w)) != 0) fail(w, l, "mask", m, 0);
      // every member recorded the same mask and has the same key
      for (unsigned o = 0; o < 32; ++o)
        if ((m >> o) & 1u) {
          if (h[w * 32 + o].mask != m) fail(w, l, "mask of member " + std::to_string(o), h[w * 32 + o].mask, m);
          if (group_key(w, o) != group_key(w, l)) fail(w, l, "key of member " + std::to_string(o), group_key(w, o), group_key(w, l));
        }
      unsigned lowest = 0;
      while (((m >> lowest) & 1u) == 0) ++lowest;
      const unsigned rank = static_cast<unsigned>(std::popcount(m & ((1u << l) - 1u)));
      const unsigned size = static_cast<unsigned>(std::popcount(m));
      if (rank == 0) ++groups_seen;
      if (r.leader != lowest) fail(w, l, "leader", r.leader, lowest);
      if (r.rank != rank) fail(w, l, "rank", r.rank, rank);
      if (r.size != size) fail(w, l, "size", r.size, size);
      if (r.broadcast != group_value(w, lowest)) fail(w, l, "broadcast", r.broadcast, group_value(w, lowest));
      std::uint32_t below = 0, total = 0;
      unsigned k = 0;
      for (unsigned o = 0; o < 32; ++o)
        if ((m >> o) & 1u) {
          if (o < l) below += o + 1;
          total += o + 1;
          if (r.from_rank[k] != group_value(w, o))
            fail(w, l, "from_rank(" + std::to_string(k) + ")", r.from_rank[k], group_value(w, o));
          ++k;
        }
      if (r.scan_below != below) fail(w, l, "exclusive_scan", r.scan_below, below);
      if (r.scan_total != total) fail(w, l, "exclusive_scan total", r.scan_total, total);
    }
  }
}

TEST(CudaPrimitives, CoalescedGroupLeaderRankBroadcastFromRankScan) {
  PRIM_REQUIRE_CUDA_DEVICE();
  std::string error;
  unsigned groups = 0;
  check_groups(error, groups);
  if (HasFatalFailure()) return;
  EXPECT_TRUE(error.empty()) << error;
  std::printf("[   info   ] coalesced groups: %u groups in %u warps checked\n", groups, kGroupWarps);
}

//! The collective semaphore tests first check the groups: with a wrong broadcast the leader's
//! GROW never reaches its producers, the promise is never signalled and every reserver spins
//! for ever, which would hang the kernel (and the rest of the run) instead of failing.
#define PRIM_REQUIRE_WORKING_GROUPS()                                                              \
  do {                                                                                             \
    std::string prim_group_error_;                                                                 \
    unsigned prim_groups_ = 0;                                                                     \
    check_groups(prim_group_error_, prim_groups_);                                                 \
    if (HasFatalFailure()) return;                                                                 \
    if (!prim_group_error_.empty())                                                                \
      FAIL() << "coalesced_group gives wrong results on this build (" << prim_group_error_         \
             << "); not launching the collective kernel, whose waiters would spin for ever";       \
  } while (0)

// -----------------------------------------------------------------------------------------
// (1)-(3) Bulk semaphore with a backing store of batches
// -----------------------------------------------------------------------------------------
//
// Each semaphore has a backing store of `cap` batches of `b` items and one flag per item
// (1 = published and free, 0 = not yet published, or taken). A producer takes the next batch
// index with an atomic add on `made`; batches >= cap do not exist (out of memory).

//! Per-thread results besides an item index.
constexpr std::uint32_t kOom = 0xfffffffeu;        //!< the thread's producer ran out of memory
constexpr std::uint32_t kWatchdog = 0xfffffffdu;   //!< a spin in the test gave up
constexpr std::uint32_t kNotTakingPart = 0xfffffffcu;
constexpr std::uint32_t kNoBase = 0xffffffffu;

template <class Sem>
struct sem_slot {
  Sem sem;
  std::uint32_t made;  //!< batches taken from the backing store (may exceed cap: failed tries)
  std::uint32_t pad;
};

struct sem_stats {
  std::uint32_t watchdog;    //!< spins that gave up
  std::uint32_t ok;          //!< OK results (per thread, or per group for collective waits)
  std::uint32_t grow;        //!< GROW results (likewise)
  std::uint32_t oom;         //!< producers that found the backing store used up
  std::uint32_t max_r;       //!< largest R sampled with peek()
  std::uint32_t max_e;       //!< largest E sampled with peek()
  std::uint32_t multi_grow;  //!< collective GROW(m) with m > 1
  std::uint32_t pad;
};

template <class Sem>
__device__ void sample_fields(const Sem& s, sem_stats* st) {
  const auto f = s.peek();
  atomicMax(&st->max_r, static_cast<unsigned>(f.r));
  atomicMax(&st->max_e, static_cast<unsigned>(f.e));
}

//! Stage 2 of an OK wait: claims one published item of this semaphore (flag 1 -> 0 by CAS),
//! scanning the batches made so far from a hashed start. Returns the item's index in the
//! semaphore's store, or kWatchdog.
__device__ std::uint32_t claim_item(std::uint32_t* made, std::uint32_t* flags, unsigned cap, unsigned b,
                                    std::uint32_t seed, std::uint32_t* error) {
  prim_watchdog wd(error);
  for (std::uint32_t pass = 0;; ++pass) {
    const std::uint32_t batches = min(P::load(made, toga::relaxed, toga::device_scope), cap);
    const std::uint32_t range = batches * b;
    if (range != 0) {
      std::uint32_t i = prim_mix32(seed ^ (pass * 0x9e3779b9u)) % range;
      for (std::uint32_t k = 0; k < range; ++k, i = (i + 1 == range) ? 0 : i + 1) {
        if (P::load(&flags[i], toga::relaxed, toga::device_scope) != 1u) continue;
        std::uint32_t one = 1;
        if (P::compare_exchange(&flags[i], one, 0u, toga::acquire, toga::device_scope)) return i;
      }
    }
    if (!wd.again()) return kWatchdog;  // a publisher may be between its stores and its signal
  }
}

//! Launch parameters of the semaphore kernels.
struct sem_config {
  unsigned blocks_per_sem;  //!< consecutive blocks that share one semaphore (or pair of them)
  unsigned cap;             //!< batches in each semaphore's backing store
  unsigned b;               //!< batch size B
  unsigned ways;            //!< collective: semaphores per block group, chosen by lane % ways
  bool all_lanes;           //!< collective: every lane takes part (else about 2/3 of them)
  std::uint32_t* trace;     //!< collective: per-thread progress record (see trace_word)
};

//! Test (1)/(2): every thread waits for one unit; threads of blocks [a*bps, (a+1)*bps) use
//! semaphore a. GROW: take a batch, keep item 0, publish 1..b-1 (release), signal(b-1, b-1);
//! out of memory: withdraw with signal(0, b-1). Writes each thread's item (index into the
//! whole flag array) or kOom / kWatchdog.
template <class Sem>
__global__ void sem_wait_kernel(sem_slot<Sem>* slots, std::uint32_t* flags, sem_config cfg, std::uint32_t* item_out,
                                sem_stats* st) {
  const unsigned cap = cfg.cap, b = cfg.b;
  const unsigned me = prim_global_thread();
  const unsigned a = P::block_id() / cfg.blocks_per_sem;
  sem_slot<Sem>& s = slots[a];
  std::uint32_t* my_flags = flags + std::size_t{a} * cap * b;
  const std::uint32_t offset = a * cap * b;
  sample_fields(s.sem, st);
  std::uint32_t item;
  if (s.sem.wait(1, b) == toga::sem_result::ok) {
    atomicAdd(&st->ok, 1u);
    const std::uint32_t i = claim_item(&s.made, my_flags, cap, b, me, &st->watchdog);
    item = i == kWatchdog ? kWatchdog : offset + i;
  } else {
    atomicAdd(&st->grow, 1u);
    const std::uint32_t batch = P::fetch_add(&s.made, 1u, toga::relaxed, toga::device_scope);
    if (batch >= cap) {
      s.sem.signal(0, b - 1);  // withdraw the promise: out-of-memory reaches the reservers
      atomicAdd(&st->oom, 1u);
      item = kOom;
    } else {
      const std::uint32_t base = batch * b;
      for (unsigned j = 1; j < b; ++j) P::store(&my_flags[base + j], 1u, toga::release, toga::device_scope);
      s.sem.signal(b - 1, b - 1);  // publish first, then signal
      item = offset + base;        // item 0 of the batch is ours
    }
  }
  sample_fields(s.sem, st);
  item_out[me] = item;
}

//! Progress of one lane of the collective kernel, readable post mortem: phase in bits 0-7,
//! group size 8-15, rank 16-23, semaphore index 24-31.
enum coll_phase : std::uint32_t {
  ph_entered = 1,      //!< taking part, before grouping
  ph_grouped = 2,      //!< group formed; in wait_collective (leader: CAS loop / reserve spin)
  ph_ok = 3,           //!< wait_collective returned OK; claiming
  ph_grow = 4,         //!< returned GROW(m)
  ph_signalled = 5,    //!< producer published and signalled (or withdrew)
  ph_served = 6,       //!< GROW: got its batch base from its producer
  ph_done = 7,
  ph_not_taking_part = 15,
};
__device__ __forceinline__ void trace(std::uint32_t* t, unsigned me, std::uint32_t phase, unsigned size, unsigned rank,
                                      unsigned sem) {
  P::store(&t[me], phase | (size << 8) | (rank << 16) | (sem << 24), toga::relaxed, toga::device_scope);
}

//! Test (3): lanes take part (all, or those with (lane*7 + blockIdx.x) % 3 != 0); lane % ways
//! picks one of `ways` semaphores of the block group, so a warp holds `ways` coalesced groups
//! (keys: the semaphores' addresses). Each group waits collectively for one unit per lane.
template <class Sem>
__global__ void sem_collective_kernel(sem_slot<Sem>* slots, std::uint32_t* flags, sem_config cfg,
                                      std::uint32_t* item_out, sem_stats* st) {
  const unsigned cap = cfg.cap, b = cfg.b;
  const unsigned me = prim_global_thread();
  const unsigned lane = P::lane_id();
  if (!cfg.all_lanes && (lane * 7 + blockIdx.x) % 3 == 0) {
    item_out[me] = kNotTakingPart;
    trace(cfg.trace, me, ph_not_taking_part, 0, 0, 0);
    return;
  }
  const unsigned a = (P::block_id() / cfg.blocks_per_sem) * cfg.ways + lane % cfg.ways;
  trace(cfg.trace, me, ph_entered, 0, 0, a);
  sem_slot<Sem>& s = slots[a];
  std::uint32_t* my_flags = flags + std::size_t{a} * cap * b;
  const std::uint32_t offset = a * cap * b;
  sample_fields(s.sem, st);

  const auto g = toga::coalesced_group<P>::by_key(reinterpret_cast<std::uintptr_t>(&s.sem));
  trace(cfg.trace, me, ph_grouped, g.size, g.rank, a);
  const toga::collective_wait_result w = s.sem.wait_collective(g, 1, b);
  std::uint32_t item;
  if (w.result == toga::sem_result::ok) {
    trace(cfg.trace, me, ph_ok, g.size, g.rank, a);
    if (g.is_leader()) atomicAdd(&st->ok, 1u);
    const std::uint32_t i = claim_item(&s.made, my_flags, cap, b, me, &st->watchdog);
    item = i == kWatchdog ? kWatchdog : offset + i;
  } else {
    trace(cfg.trace, me, ph_grow, g.size, g.rank, a);
    if (g.is_leader()) {
      atomicAdd(&st->grow, 1u);
      if (w.batches > 1) atomicAdd(&st->multi_grow, 1u);
    }
    // GROW(m): ranks < m produce batch `rank`; rank r is served by batch r / b (n = 1), item
    // r % b of it; each producer publishes and signals what its batch has left over.
    std::uint32_t base = kNoBase;
    if (g.rank < w.batches) {
      const std::uint64_t left = Sem::batch_leftover(g.rank, g.size, 1, b);
      const std::uint32_t batch = P::fetch_add(&s.made, 1u, toga::relaxed, toga::device_scope);
      if (batch >= cap) {
        s.sem.signal(0, left);
        atomicAdd(&st->oom, 1u);
      } else {
        base = batch * b;
        for (std::uint64_t j = b - left; j < b; ++j)
          P::store(&my_flags[base + j], 1u, toga::release, toga::device_scope);
        s.sem.signal(left, left);
      }
      trace(cfg.trace, me, ph_signalled, g.size, g.rank, a);
    }
    const std::uint32_t my_base = g.from_rank(base, g.rank / b);
    trace(cfg.trace, me, ph_served, g.size, g.rank, a);
    item = my_base == kNoBase ? kOom : offset + my_base + g.rank % b;
  }
  trace(cfg.trace, me, ph_done, g.size, g.rank, a);
  item_out[me] = item;
}

//! Host view of one run, for the checks.
template <class Sem>
struct sem_run {
  std::vector<sem_slot<Sem>> slots;
  std::vector<std::uint32_t> flags, items;
  sem_stats stats{};
  float ms = 0;
};

//! Post-mortem of a stuck semaphore kernel: where the lanes are, and the semaphores that are
//! not quiescent.
template <class Sem>
void dump_semaphores(const sem_slot<Sem>* slots, std::size_t nsems, const std::uint32_t* trace, std::size_t threads,
                     cudaStream_t side) {
  const auto hs = prim_peek(slots, nsems, side);
  std::printf("  semaphores not quiescent (C/E/R, batches made):");
  unsigned shown = 0, busy = 0;
  for (std::size_t a = 0; a < nsems; ++a) {
    const auto f = Sem::unpack(hs[a].sem.raw());
    if (f.e == 0 && f.r == 0) continue;
    ++busy;
    if (shown++ < 12)
      std::printf(" [%zu] %llu/%llu/%llu %u;", a, static_cast<unsigned long long>(f.c),
                  static_cast<unsigned long long>(f.e), static_cast<unsigned long long>(f.r), hs[a].made);
  }
  std::printf(" (%u of %zu)\n", busy, nsems);
  if (trace == nullptr) return;
  const auto ht = prim_peek(trace, threads, side);
  unsigned hist[16] = {};
  for (auto w : ht) ++hist[w & 15u];
  std::printf("  lanes per phase (0 not started, 1 entered, 2 in wait_collective, 3 ok, 4 grow, 5 signalled, "
              "6 served, 7 done, 15 not taking part):");
  for (unsigned k = 0; k < 16; ++k)
    if (hist[k]) std::printf(" %u:%u", k, hist[k]);
  std::printf("\n");
  unsigned warps_shown = 0;
  for (std::size_t w0 = 0; w0 < threads && warps_shown < 6; w0 += 32) {
    bool stuck = false;
    for (unsigned l = 0; l < 32; ++l) {
      const unsigned ph = ht[w0 + l] & 15u;
      stuck |= ph != ph_done && ph != ph_not_taking_part;
    }
    if (!stuck) continue;
    ++warps_shown;
    std::printf("  warp %zu (block %zu), lane:phase/sem/rank/size:", w0 / 32, w0 / 256);
    for (unsigned l = 0; l < 32; ++l) {
      const std::uint32_t x = ht[w0 + l];
      if ((x & 15u) == ph_not_taking_part) continue;
      std::printf(" %u:%u/%u/%u/%u", l, x & 15u, x >> 24, (x >> 16) & 255u, (x >> 8) & 255u);
    }
    std::printf("\n");
  }
}

//! Allocates, launches `kernel` over blocks x 256 threads with `nsems` semaphores (init(0)) of
//! `cfg.cap` batches of `cfg.b`, and copies everything back.
template <class Sem, class Kernel>
void run_semaphore(const char* what, Kernel kernel, unsigned blocks, unsigned nsems, sem_config cfg,
                   sem_run<Sem>& out) {
  constexpr unsigned threads = 256;
  prim_require_coresident(kernel, blocks, threads);
  if (::testing::Test::HasFatalFailure()) return;
  prim_buffer<sem_slot<Sem>> slots;
  prim_buffer<std::uint32_t> flags, items, trace;
  prim_buffer<sem_stats> stats;
  PRIM_ALLOC(slots, nsems);
  PRIM_ALLOC(flags, std::size_t{nsems} * cfg.cap * cfg.b);
  PRIM_ALLOC(items, std::size_t{blocks} * threads);
  PRIM_ALLOC(trace, std::size_t{blocks} * threads);
  PRIM_ALLOC(stats, 1);
  std::vector<sem_slot<Sem>> init(nsems);
  for (auto& s : init) {
    s.sem.init(0);
    s.made = 0;
    s.pad = 0;
  }
  PRIM_TO_DEVICE(slots, init);
  PRIM_ZERO(flags);
  PRIM_ZERO(stats);
  PRIM_ZERO(trace);
  PRIM_CUDA_CHECK(cudaMemset(items.ptr, 0xff, items.bytes()));
  cfg.trace = trace.ptr;
  const std::size_t nthreads = std::size_t{blocks} * threads;
  PRIM_CUDA_CHECK(prim_run(
      what, out.ms,
      [&](cudaStream_t st) { kernel<<<blocks, threads, 0, st>>>(slots.ptr, flags.ptr, cfg, items.ptr, stats.ptr); },
      [&](cudaStream_t side) {
        const bool traced = cfg.ways != 0;  // only the collective kernel writes the trace
        dump_semaphores<Sem>(slots.ptr, nsems, traced ? trace.ptr : nullptr, nthreads, side);
      }));
  PRIM_TO_HOST(out.slots, slots);
  PRIM_TO_HOST(out.flags, flags);
  PRIM_TO_HOST(out.items, items);
  PRIM_CUDA_CHECK(cudaMemcpy(&out.stats, stats.ptr, sizeof(sem_stats), cudaMemcpyDeviceToHost));
}

//! Checks shared by all semaphore runs: no watchdog; items valid, distinct, not in the pool;
//! per semaphore E == R == 0 and C == items still published (S2, S5 at quiescence). Returns,
//! per semaphore, the threads that got an item and the threads that reported OOM.
template <class Sem>
void check_semaphore_run(const sem_run<Sem>& r, unsigned cap, unsigned b, unsigned threads_per_sem,
                         std::vector<unsigned>& got, std::vector<unsigned>& oom) {
  const unsigned nsems = static_cast<unsigned>(r.slots.size());
  EXPECT_EQ(r.stats.watchdog, 0u) << "a spin gave up (lost wake-up or unpublished item)";
  got.assign(nsems, 0);
  oom.assign(nsems, 0);
  std::vector<std::uint8_t> held(r.flags.size(), 0);
  std::size_t bad = 0, dup = 0, in_pool = 0;
  for (std::size_t t = 0; t < r.items.size(); ++t) {
    const std::uint32_t it = r.items[t];
    if (it == kNotTakingPart) continue;
    if (it == kWatchdog) continue;  // counted by the watchdog
    if (it == kOom) {
      // which semaphore: not recorded per thread; the caller checks the totals
      continue;
    }
    if (it >= r.flags.size()) {
      if (bad++ == 0) ADD_FAILURE() << "thread " << t << " recorded item " << it;
      continue;
    }
    if (held[it]++) {
      if (dup++ == 0) ADD_FAILURE() << "item " << it << " handed to two threads (second: thread " << t << ")";
    }
    if (r.flags[it] != 0) {
      if (in_pool++ == 0) ADD_FAILURE() << "item " << it << " is held by thread " << t << " and still published";
    }
    ++got[it / (cap * b)];
  }
  EXPECT_EQ(bad + dup + in_pool, 0u);
  for (unsigned a = 0; a < nsems; ++a) {
    SCOPED_TRACE("semaphore " + std::to_string(a));
    const auto f = Sem::unpack(r.slots[a].sem.raw());
    std::uint64_t pool = 0;
    for (std::size_t i = std::size_t{a} * cap * b; i < std::size_t{a + 1} * cap * b; ++i) pool += r.flags[i];
    EXPECT_EQ(f.e, 0u) << "quiescent E";
    EXPECT_EQ(f.r, 0u) << "quiescent R";
    EXPECT_EQ(f.c, pool) << "quiescent C must equal the items still published";
    const std::uint32_t made = std::min(r.slots[a].made, cap);
    // Every published-then-claimed or kept item comes from a made batch.
    EXPECT_LE(got[a] + pool, std::uint64_t{made} * b);
    EXPECT_LE(got[a], threads_per_sem);
  }
}

std::uint64_t sum(const std::vector<unsigned>& v) {
  std::uint64_t s = 0;
  for (auto x : v) s += x;
  return s;
}

void print_sem_stats(const char* what, const sem_stats& st, std::uint64_t batches) {
  std::printf("[   info   ] %s: ok %u, grow %u (multi-batch %u), oom %u, batches made %llu, max R seen %u, "
              "max E seen %u\n",
              what, st.ok, st.grow, st.multi_grow, st.oom, static_cast<unsigned long long>(batches), st.max_r,
              st.max_e);
}

// Widths: per-SM (arena) semaphores hold at most 2048 waiters; a device-wide semaphore with
// 2^16 waiters needs the global widths (R:19).
using arena_sem = toga::arena_semaphore<P>;
using global_sem = toga::tbuddy_semaphore<P>;
static_assert(std::is_trivially_copyable_v<sem_slot<arena_sem>>);
static_assert(std::is_trivially_copyable_v<sem_slot<global_sem>>);

constexpr unsigned kSemThreads = 1u << 16;      // (1): 2^16 threads
constexpr unsigned kSemBlocks = kSemThreads / 256;
constexpr unsigned kBlocksPerArena = 8;          // 8 x 256 = 2048 threads: one SM's worth
constexpr unsigned kBatch = 32;

//! (1) with ample backing store (one batch per thread, the most GROWs there can be).
template <class Sem>
void single_wait_ample(const char* what, unsigned blocks_per_sem, bool print_r) {
  const unsigned nsems = kSemBlocks / blocks_per_sem;
  const unsigned per_sem = blocks_per_sem * 256;
  const unsigned cap = per_sem;
  sem_run<Sem> r;
  run_semaphore<Sem>(what, sem_wait_kernel<Sem>, kSemBlocks, nsems, sem_config{blocks_per_sem, cap, kBatch, 0, true, nullptr}, r);
  if (::testing::Test::HasFatalFailure()) return;
  std::vector<unsigned> got, oom;
  check_semaphore_run(r, cap, kBatch, per_sem, got, oom);
  std::uint64_t batches = 0;
  for (unsigned a = 0; a < nsems; ++a) {
    SCOPED_TRACE("semaphore " + std::to_string(a));
    EXPECT_EQ(got[a], per_sem) << "every thread must get an item";
    const std::uint64_t made = r.slots[a].made;
    batches += made;
    EXPECT_LE(made, cap) << "the backing store suffices: no producer may fail";
    EXPECT_GE(made * kBatch, per_sem);
    EXPECT_LE(made, per_sem);
  }
  EXPECT_EQ(r.stats.oom, 0u);
  EXPECT_EQ(sum(got), std::uint64_t{kSemThreads});
  EXPECT_EQ(r.stats.ok + r.stats.grow, kSemThreads);
  EXPECT_EQ(r.stats.grow, batches);
  print_sem_stats(what, r.stats, batches);
  if (print_r && r.stats.max_r > arena_sem::r_max)
    std::printf("[   info   ] %s: R reached %u > %llu: one device-wide arena_semaphore (R:12) would have "
                "failed invariant S1 here\n",
                what, r.stats.max_r, static_cast<unsigned long long>(arena_sem::r_max));
}

TEST(CudaPrimitives, BulkSemaphoreArenaPerSmGroupsEveryThreadGetsAnItem) {
  PRIM_REQUIRE_CUDA_DEVICE();
  single_wait_ample<arena_sem>("arena semaphores (32 x 2048 threads), B=32", kBlocksPerArena, false);
}

TEST(CudaPrimitives, BulkSemaphoreDeviceWide65536ThreadsEveryThreadGetsAnItem) {
  PRIM_REQUIRE_CUDA_DEVICE();
  single_wait_ample<global_sem>("device-wide semaphore (R:19), 2^16 threads, B=32", kSemBlocks, true);
}

//! (2) with a backing store too small: producers that fail withdraw; exactly cap * B threads
//! get items, the others report OOM, and nothing hangs.
template <class Sem>
void single_wait_too_small(const char* what, unsigned blocks, unsigned blocks_per_sem, unsigned cap) {
  const unsigned nsems = blocks / blocks_per_sem;
  const unsigned per_sem = blocks_per_sem * 256;
  ASSERT_LT(cap * kBatch, per_sem) << "test setup: the store must be too small";
  sem_run<Sem> r;
  run_semaphore<Sem>(what, sem_wait_kernel<Sem>, blocks, nsems, sem_config{blocks_per_sem, cap, kBatch, 0, true, nullptr}, r);
  if (::testing::Test::HasFatalFailure()) return;
  std::vector<unsigned> got, oom;
  check_semaphore_run(r, cap, kBatch, per_sem, got, oom);
  std::uint64_t oom_threads = 0, batches = 0;
  for (auto it : r.items) oom_threads += it == kOom;
  for (unsigned a = 0; a < nsems; ++a) {
    SCOPED_TRACE("semaphore " + std::to_string(a));
    EXPECT_EQ(got[a], cap * kBatch) << "every item of the store must reach a thread";
    EXPECT_GE(r.slots[a].made, cap) << "threads reported OOM before the store was used up";
    EXPECT_EQ(Sem::unpack(r.slots[a].sem.raw()).c, 0u);
    batches += std::min(r.slots[a].made, cap);
  }
  EXPECT_EQ(oom_threads, std::uint64_t{nsems} * (per_sem - cap * kBatch));
  EXPECT_EQ(oom_threads, r.stats.oom);
  EXPECT_EQ(sum(got) + oom_threads, std::uint64_t{blocks} * 256) << "every thread has an item or reports OOM";
  print_sem_stats(what, r.stats, batches);
}

TEST(CudaPrimitives, BulkSemaphoreArenaStoreTooSmallOomReachesEveryWaiter) {
  PRIM_REQUIRE_CUDA_DEVICE();
  // 2^14 threads, 8 arena semaphores of 2048 threads, 20 batches (640 items) each.
  single_wait_too_small<arena_sem>("arena semaphores (8 x 2048 threads), 20 batches each", 64, kBlocksPerArena, 20);
}

TEST(CudaPrimitives, BulkSemaphoreDeviceWideStoreTooSmallOomReachesEveryWaiter) {
  PRIM_REQUIRE_CUDA_DEVICE();
  // 2^14 threads on one semaphore, 100 batches (3200 items).
  single_wait_too_small<global_sem>("device-wide semaphore (R:19), 2^14 threads, 100 batches", 64, 64, 100);
}

//! ONE device-wide arena_semaphore (R:12) waited on by 2^16 threads. Outside the specified
//! envelope (design.md §3.1: at most 2048 waiters per arena semaphore): nothing bounds R
//! by 4095 here, and if it got there the core would trap with "E or R overflows its field
//! (invariant S1)", ending the CUDA context. On an H200 it passed, sampling R <= ~270, but that
//! is luck of timing, not a guarantee. Disabled; run it alone with
//! --gtest_also_run_disabled_tests --gtest_filter='*DISABLED_*'.
TEST(CudaPrimitives, DISABLED_BulkSemaphoreOneArenaSemaphore65536Threads) {
  PRIM_REQUIRE_CUDA_DEVICE();
  single_wait_ample<arena_sem>("ONE arena semaphore (R:12), 2^16 threads, B=32", kSemBlocks, false);
}

//! (3) collective waits over 2^16 threads; 8 blocks (2048 threads) share `ways` arena
//! semaphores. B = 4 makes most GROWs multi-batch (groups of ~10-32 lanes); B = 32 keeps them
//! single-batch with a large leftover.
void collective_wait(const char* what, unsigned ways, bool all_lanes, unsigned b) {
  constexpr unsigned blocks = kSemBlocks;
  const unsigned nsems = blocks / kBlocksPerArena * ways;
  const unsigned per_sem_max = kBlocksPerArena * 256 / ways;
  const unsigned cap = per_sem_max;  // one batch per lane at most
  sem_run<arena_sem> r;
  run_semaphore<arena_sem>(what, sem_collective_kernel<arena_sem>, blocks, nsems,
                           sem_config{kBlocksPerArena, cap, b, ways, all_lanes, nullptr}, r);
  if (::testing::Test::HasFatalFailure()) return;
  std::vector<unsigned> got, oom;
  check_semaphore_run(r, cap, b, per_sem_max, got, oom);
  // Exactly the lanes that take part got an item.
  std::uint64_t taking_part = 0, mismatched = 0, batches = 0;
  for (unsigned t = 0; t < blocks * 256; ++t) {
    const unsigned lane = t % 32, block = t / 256;
    const bool part = all_lanes || (lane * 7 + block) % 3 != 0;
    taking_part += part;
    const std::uint32_t it = r.items[t];
    if (part ? (it >= r.flags.size()) : (it != kNotTakingPart)) {
      if (mismatched++ == 0) ADD_FAILURE() << "thread " << t << " (taking part: " << part << ") recorded " << it;
    }
  }
  EXPECT_EQ(mismatched, 0u);
  EXPECT_EQ(sum(got), taking_part);
  EXPECT_EQ(r.stats.oom, 0u);
  for (auto& s : r.slots) batches += s.made;
  EXPECT_GT(r.stats.grow, 0u);
  if (b < 32) EXPECT_GT(r.stats.multi_grow, 0u) << "no GROW(m) with m > 1 happened";
  print_sem_stats(what, r.stats, batches);
}

TEST(CudaPrimitives, BulkSemaphoreCollectiveWaitPartialWarpsMultiBatchGrow) {
  PRIM_REQUIRE_CUDA_DEVICE();
  PRIM_REQUIRE_WORKING_GROUPS();
  collective_wait("collective waits, partial warps, 1 semaphore per warp, B=4", 1, false, 4);
}

TEST(CudaPrimitives, BulkSemaphoreCollectiveWaitPartialWarpsB32) {
  PRIM_REQUIRE_CUDA_DEVICE();
  PRIM_REQUIRE_WORKING_GROUPS();
  collective_wait("collective waits, partial warps, 1 semaphore per warp, B=32", 1, false, 32);
}

TEST(CudaPrimitives, BulkSemaphoreCollectiveWaitFullWarpsB4) {
  PRIM_REQUIRE_CUDA_DEVICE();
  PRIM_REQUIRE_WORKING_GROUPS();
  collective_wait("collective waits, full warps, 1 semaphore per warp, B=4", 1, true, 4);
}

TEST(CudaPrimitives, BulkSemaphoreCollectiveWaitTwoSemaphoresPerWarpB4) {
  PRIM_REQUIRE_CUDA_DEVICE();
  PRIM_REQUIRE_WORKING_GROUPS();
  collective_wait("collective waits, partial warps, 2 semaphores per warp, B=4", 2, false, 4);
}

TEST(CudaPrimitives, BulkSemaphoreCollectiveWaitTwoSemaphoresPerWarpFullB32) {
  PRIM_REQUIRE_CUDA_DEVICE();
  PRIM_REQUIRE_WORKING_GROUPS();
  collective_wait("collective waits, full warps, 2 semaphores per warp, B=32", 2, true, 32);
}

//! The warp-level progress property wait_collective relies on, without the semaphore: a warp
//! holds two groups (even and odd lanes, grouped by key like the core does). Exactly as in
//! wait_collective, both leaders enter an `if (g.is_leader())` branch; the even group's leader
//! spins there (bounded: 1 s) until a member of the odd group sets a flag, which that member
//! does right after the odd group's broadcast (a shfl over the odd lanes only). If the odd
//! leader cannot leave the branch while the even leader spins in it, the flag is never set
//! and the spin times out: one group's leader spin then blocks another group of its warp,
//! which across warps is a deadlock for the bulk semaphore.
__global__ void disjoint_groups_kernel(std::uint32_t* flag, std::uint32_t* timed_out, std::uint32_t* got) {
  const unsigned warp = prim_global_thread() / 32;
  const unsigned lane = P::lane_id();
  const auto g = toga::coalesced_group<P>::by_key(std::uint64_t{lane & 1u});
  std::uint32_t v = 1000u + lane;
  if (g.is_leader()) {
    if ((lane & 1u) == 0) {
      const std::uint64_t t0 = prim_globaltimer();
      for (unsigned attempt = 0; P::load(&flag[warp], toga::acquire, toga::device_scope) == 0; ++attempt) {
        P::backoff(attempt);
        if (prim_globaltimer() - t0 > 1000ull * 1000 * 1000) {
          P::fetch_add(&timed_out[warp], 1u, toga::relaxed, toga::device_scope);
          break;
        }
      }
    }
  }
  v = g.broadcast(v);
  if ((lane & 1u) == 1 && g.rank == 1) P::store(&flag[warp], 1u, toga::release, toga::device_scope);
  got[prim_global_thread()] = v;
}

TEST(CudaPrimitives, LeaderSpinDoesNotBlockOtherGroupsOfItsWarp) {
  PRIM_REQUIRE_CUDA_DEVICE();
  constexpr unsigned blocks = 4, threads = 64, warps = blocks * threads / 32;
  prim_buffer<std::uint32_t> flag, timed_out, got;
  PRIM_ALLOC(flag, warps);
  PRIM_ALLOC(timed_out, warps);
  PRIM_ALLOC(got, blocks * threads);
  PRIM_ZERO(flag);
  PRIM_ZERO(timed_out);
  PRIM_ZERO(got);
  float ms = 0;
  PRIM_CUDA_CHECK(prim_run("two groups per warp, one leader spinning", ms, [&](cudaStream_t st) {
    disjoint_groups_kernel<<<blocks, threads, 0, st>>>(flag.ptr, timed_out.ptr, got.ptr);
  }));
  std::vector<std::uint32_t> hto, hgot;
  PRIM_TO_HOST(hto, timed_out);
  PRIM_TO_HOST(hgot, got);
  unsigned blocked = 0;
  for (auto x : hto) blocked += x != 0;
  EXPECT_EQ(blocked, 0u) << "in " << blocked << " of " << warps
                         << " warps the even leader's spin kept the odd group from passing its broadcast";
  std::size_t wrong = 0;
  for (unsigned t = 0; t < blocks * threads; ++t)
    if (hgot[t] != 1000u + (t % 32) % 2 && wrong++ == 0)
      ADD_FAILURE() << "thread " << t << " got " << hgot[t] << " from its group's broadcast, want "
                    << 1000u + (t % 32) % 2;
  EXPECT_EQ(wrong, 0u) << "threads with a wrong broadcast value";
}

// -----------------------------------------------------------------------------------------
// (4) Collective mutex and pop-k
// -----------------------------------------------------------------------------------------

constexpr unsigned kPopThreads = 1u << 16;
constexpr unsigned kPopLeft = 100;
constexpr unsigned kPopNodes = kPopThreads + kPopLeft;

//! Every thread pops one element. Lanes split into two call sites (the first one delayed by a
//! lane-dependent sleep), so groups of many sizes form.
__global__ void pop_kernel(toga::collective_mutex<P>* m, std::uint32_t* head, std::uint32_t* next,
                           std::uint32_t* out, std::uint32_t* groups) {
  const unsigned me = prim_global_thread();
  const unsigned lane = P::lane_id();
  std::uint32_t got;
  if ((lane + P::warp_id() + P::block_id()) % 3 == 0) {
    __nanosleep(64 * lane);
    const auto g = toga::coalesced_group<P>::by_key(reinterpret_cast<std::uintptr_t>(m));
    if (g.is_leader()) atomicAdd(groups, 1u);
    got = toga::pop_k(*m, head, next, g);
  } else {
    const auto g = toga::coalesced_group<P>::by_key(reinterpret_cast<std::uintptr_t>(m));
    if (g.is_leader()) atomicAdd(groups, 1u);
    got = toga::pop_k(*m, head, next, g);
  }
  out[me] = got;
}

TEST(CudaPrimitives, PopKCollectiveDistinctElementsAndListIntact) {
  PRIM_REQUIRE_CUDA_DEVICE();
  constexpr unsigned threads = 256, blocks = kPopThreads / threads;
  prim_require_coresident(pop_kernel, blocks, threads);
  if (HasFatalFailure()) return;
  prim_buffer<toga::collective_mutex<P>> m;
  prim_buffer<std::uint32_t> head, next, out, groups;
  PRIM_ALLOC(m, 1);
  PRIM_ALLOC(head, 1);
  PRIM_ALLOC(next, kPopNodes + 1);
  PRIM_ALLOC(out, kPopThreads);
  PRIM_ALLOC(groups, 1);
  std::vector<std::uint32_t> hnext(kPopNodes + 1, 0);
  for (unsigned i = 1; i < kPopNodes; ++i) hnext[i] = i + 1;  // 1 -> 2 -> ... -> N -> 0
  const std::vector<std::uint32_t> hhead{1};
  const std::vector<toga::collective_mutex<P>> hm(1);
  PRIM_TO_DEVICE(m, hm);
  PRIM_TO_DEVICE(head, hhead);
  PRIM_TO_DEVICE(next, hnext);
  PRIM_ZERO(groups);
  PRIM_CUDA_CHECK(cudaMemset(out.ptr, 0xff, out.bytes()));
  float ms = 0;
  PRIM_CUDA_CHECK(prim_run("pop_k, 2^16 threads, list of 2^16+100", ms, [&](cudaStream_t st) {
    pop_kernel<<<blocks, threads, 0, st>>>(m.ptr, head.ptr, next.ptr, out.ptr, groups.ptr);
  }));

  std::vector<std::uint32_t> hout, hhead2, hnext2, hgroups;
  std::vector<toga::collective_mutex<P>> hm2;
  PRIM_TO_HOST(hout, out);
  PRIM_TO_HOST(hhead2, head);
  PRIM_TO_HOST(hnext2, next);
  PRIM_TO_HOST(hgroups, groups);
  PRIM_TO_HOST(hm2, m);
  EXPECT_EQ(hm2[0].word, 0u) << "mutex still held at quiescence";

  std::vector<unsigned> seen(kPopNodes + 1, 0);
  std::size_t bad = 0;
  for (unsigned t = 0; t < kPopThreads; ++t) {
    const std::uint32_t n = hout[t];
    if (n == 0 || n > kPopNodes) {
      if (bad++ == 0) ADD_FAILURE() << "thread " << t << " popped " << n;
      continue;
    }
    ++seen[n];
  }
  EXPECT_EQ(bad, 0u);
  unsigned remaining = 0;
  for (std::uint32_t n = hhead2[0]; n != 0 && remaining <= kPopNodes; n = hnext2[n]) {
    ++remaining;
    ++seen[n];
  }
  EXPECT_EQ(remaining, kPopLeft) << "elements left in the list";
  std::size_t wrong = 0;
  for (unsigned n = 1; n <= kPopNodes; ++n)
    if (seen[n] != 1 && wrong++ == 0)
      ADD_FAILURE() << "element " << n << " is owned " << seen[n] << " times (threads and list)";
  EXPECT_EQ(wrong, 0u);
  std::printf("[   info   ] pop_k: %u groups for %u threads (mean group size %.2f)\n", hgroups[0], kPopThreads,
              static_cast<double>(kPopThreads) / std::max(1u, hgroups[0]));
}

constexpr unsigned kMutexRounds = 4;

//! Lanes with (lane*5 + block) % 4 != 0 take part; in each round the group locks, its leader
//! adds g.size to a counter with a separate relaxed load and store, and every member unlocks.
__global__ void mutex_counter_kernel(toga::collective_mutex<P>* m, std::uint32_t* counter, std::uint32_t* inside,
                                     std::uint32_t* overlap, std::uint32_t* groups) {
  const unsigned lane = P::lane_id();
  if ((lane * 5 + P::block_id()) % 4 == 0) return;
  for (unsigned r = 0; r < kMutexRounds; ++r) {
    const auto g = toga::coalesced_group<P>::by_key(reinterpret_cast<std::uintptr_t>(m));
    m->lock(g);
    // M1: only one group inside: the members count themselves in and out.
    const std::uint32_t before = P::fetch_add(inside, 1u, toga::relaxed, toga::device_scope);
    if (before >= g.size) P::fetch_add(overlap, 1u, toga::relaxed, toga::device_scope);
    if (g.is_leader()) {
      atomicAdd(groups, 1u);
      const std::uint32_t v = P::load(counter, toga::relaxed, toga::device_scope);
      P::store(counter, v + g.size, toga::relaxed, toga::device_scope);
    }
    P::fetch_sub(inside, 1u, toga::relaxed, toga::device_scope);
    m->unlock(g);
  }
}

TEST(CudaPrimitives, CollectiveMutexNoLostUpdates) {
  PRIM_REQUIRE_CUDA_DEVICE();
  constexpr unsigned threads = 256, blocks = (1u << 16) / threads;
  prim_require_coresident(mutex_counter_kernel, blocks, threads);
  if (HasFatalFailure()) return;
  prim_buffer<toga::collective_mutex<P>> m;
  prim_buffer<std::uint32_t> w;  // counter, inside, overlap, groups
  PRIM_ALLOC(m, 1);
  PRIM_ALLOC(w, 4);
  const std::vector<toga::collective_mutex<P>> hm(1);
  PRIM_TO_DEVICE(m, hm);
  PRIM_ZERO(w);
  float ms = 0;
  PRIM_CUDA_CHECK(prim_run("collective mutex counter, 2^16 threads x 4 rounds", ms, [&](cudaStream_t st) {
    mutex_counter_kernel<<<blocks, threads, 0, st>>>(m.ptr, w.ptr, w.ptr + 1, w.ptr + 2, w.ptr + 3);
  }));
  std::vector<std::uint32_t> hw;
  std::vector<toga::collective_mutex<P>> hm2;
  PRIM_TO_HOST(hw, w);
  PRIM_TO_HOST(hm2, m);
  std::uint64_t taking_part = 0;
  for (unsigned t = 0; t < blocks * threads; ++t) taking_part += ((t % 32) * 5 + t / threads) % 4 != 0;
  EXPECT_EQ(hw[0], taking_part * kMutexRounds) << "updates lost: two groups were inside at once";
  EXPECT_EQ(hw[1], 0u);
  EXPECT_EQ(hw[2], 0u) << "a member entered while another group was inside (M1)";
  EXPECT_EQ(hm2[0].word, 0u) << "mutex still held at quiescence";
  std::printf("[   info   ] collective mutex: %u critical sections for %llu lane-rounds\n", hw[3],
              static_cast<unsigned long long>(taking_part * kMutexRounds));
}

// -----------------------------------------------------------------------------------------
// (5) RCU with delegated reclamation
// -----------------------------------------------------------------------------------------

constexpr unsigned kRcuNodes = 1024;  // nodes 1..1024, head = 1 (never unlinked)

struct rcu_shared {
  toga::rcu_domain<P> domain;
  std::uint32_t list_lock;
  std::uint32_t head;
  std::uint32_t writers_done;
  std::uint32_t poison_seen;      //!< R1 violations: a reader reached a reclaimed node
  std::uint32_t delegated;        //!< retires handed to a pending barrier
  std::uint32_t retire_reclaimed; //!< sum of rcu_retire_result::reclaimed
  std::uint32_t barriers;         //!< retires that ran callbacks (grace periods with items)
  std::uint32_t callbacks;        //!< reclaim calls
  std::uint32_t errors;           //!< watchdog, bad traversal
  std::uint32_t pad;
  unsigned long long reader_passes;
};
static_assert(std::is_trivially_copyable_v<rcu_shared>);

struct rcu_list {
  std::uint32_t* next;
  std::uint32_t* prev;
  std::uint32_t* poison;
  std::uint32_t* reclaimed;
  std::uint64_t* link;
};

__host__ __device__ constexpr std::uint32_t rcu_victim(unsigned writer) { return 2 + (writer * 5u) % (kRcuNodes - 2); }

//! Writers: lane 0 of every warp in blocks with block % 4 == 0 unlinks node rcu_victim(w) under
//! a spin lock (doubly linked; the victim's own next stays intact) and retires it; the
//! callback poisons it. Everyone else reads: whole-list traversals inside read-side critical
//! sections until all writers are done.
__global__ void rcu_kernel(rcu_shared* s, rcu_list l, unsigned writers) {
  const bool writer_block = P::block_id() % 4 == 0;
  if (writer_block && P::lane_id() == 0) {
    const unsigned w = (P::block_id() / 4) * (P::block_dim() / 32) + P::warp_id();
    const std::uint32_t v = rcu_victim(w);
    prim_watchdog wd(&s->errors);
    for (;;) {
      std::uint32_t z = 0;
      if (P::compare_exchange(&s->list_lock, z, 1u, toga::acquire, toga::device_scope)) break;
      if (!wd.again()) return;
    }
    const std::uint32_t p = P::load(&l.prev[v], toga::relaxed, toga::device_scope);
    const std::uint32_t nx = P::load(&l.next[v], toga::relaxed, toga::device_scope);
    P::store(&l.next[p], nx, toga::release, toga::device_scope);  // unlink; l.next[v] kept
    if (nx != 0) P::store(&l.prev[nx], p, toga::relaxed, toga::device_scope);
    P::store(&s->list_lock, 0u, toga::release, toga::device_scope);
    const toga::rcu_retire_result res = s->domain.retire(
        v, [l](std::uint64_t item) { return &l.link[item]; },
        [l, s](std::uint64_t item) {
          P::fetch_add(&l.reclaimed[item], 1u, toga::relaxed, toga::device_scope);
          P::store(&l.poison[item], 1u, toga::relaxed, toga::device_scope);
          P::fetch_add(&s->callbacks, 1u, toga::relaxed, toga::device_scope);
        });
    if (res.delegated) P::fetch_add(&s->delegated, 1u, toga::relaxed, toga::device_scope);
    if (res.reclaimed != 0) P::fetch_add(&s->barriers, 1u, toga::relaxed, toga::device_scope);
    P::fetch_add(&s->retire_reclaimed, res.reclaimed, toga::relaxed, toga::device_scope);
    P::fetch_add(&s->writers_done, 1u, toga::release, toga::device_scope);
    return;
  }
  const std::uint64_t t0 = prim_globaltimer();
  unsigned passes = 0;
  for (;;) {
    const std::uint32_t e = s->domain.read_lock();
    unsigned steps = 0;
    for (std::uint32_t n = P::load(&s->head, toga::acquire, toga::device_scope); n != 0;
         n = P::load(&l.next[n], toga::acquire, toga::device_scope)) {
      if (P::load(&l.poison[n], toga::relaxed, toga::device_scope) != 0)
        P::fetch_add(&s->poison_seen, 1u, toga::relaxed, toga::device_scope);
      if (++steps > kRcuNodes || n > kRcuNodes) {
        P::fetch_add(&s->errors, 1u, toga::relaxed, toga::device_scope);
        break;
      }
    }
    s->domain.read_unlock(e);
    ++passes;
    if (P::load(&s->writers_done, toga::acquire, toga::device_scope) >= writers) break;
    if (prim_globaltimer() - t0 > kSpinBudgetNs) {
      P::fetch_add(&s->errors, 1u, toga::relaxed, toga::device_scope);
      break;
    }
  }
  atomicAdd(&s->reader_passes, static_cast<unsigned long long>(passes));
}

TEST(CudaPrimitives, RcuReadersNeverSeeReclaimedNodesEveryRetireReclaimedOnce) {
  PRIM_REQUIRE_CUDA_DEVICE();
  constexpr unsigned threads = 256, blocks = (1u << 16) / threads;
  constexpr unsigned writers = (blocks / 4) * (threads / 32);  // 512
  static_assert(writers <= kRcuNodes - 2);
  prim_require_coresident(rcu_kernel, blocks, threads);
  if (HasFatalFailure()) return;
  // victims are distinct and never the head
  {
    std::vector<bool> used(kRcuNodes + 1, false);
    for (unsigned w = 0; w < writers; ++w) {
      const std::uint32_t v = rcu_victim(w);
      ASSERT_TRUE(v >= 2 && v <= kRcuNodes && !used[v]) << "test setup: victim " << v;
      used[v] = true;
    }
  }
  prim_buffer<rcu_shared> s;
  prim_buffer<std::uint32_t> next, prev, poison, reclaimed;
  prim_buffer<std::uint64_t> link;
  PRIM_ALLOC(s, 1);
  PRIM_ALLOC(next, kRcuNodes + 1);
  PRIM_ALLOC(prev, kRcuNodes + 1);
  PRIM_ALLOC(poison, kRcuNodes + 1);
  PRIM_ALLOC(reclaimed, kRcuNodes + 1);
  PRIM_ALLOC(link, kRcuNodes + 1);
  std::vector<rcu_shared> hs(1, rcu_shared{});  // aggregate: domain default, the rest 0
  hs[0].head = 1;
  std::vector<std::uint32_t> hnext(kRcuNodes + 1, 0), hprev(kRcuNodes + 1, 0);
  for (unsigned i = 1; i < kRcuNodes; ++i) hnext[i] = i + 1;
  for (unsigned i = 2; i <= kRcuNodes; ++i) hprev[i] = i - 1;
  PRIM_TO_DEVICE(s, hs);
  PRIM_TO_DEVICE(next, hnext);
  PRIM_TO_DEVICE(prev, hprev);
  PRIM_ZERO(poison);
  PRIM_ZERO(reclaimed);
  PRIM_ZERO(link);
  const rcu_list l{next.ptr, prev.ptr, poison.ptr, reclaimed.ptr, link.ptr};
  float ms = 0;
  PRIM_CUDA_CHECK(prim_run("rcu, 512 writers vs 65024 readers, list of 1024", ms, [&](cudaStream_t st) {
    rcu_kernel<<<blocks, threads, 0, st>>>(s.ptr, l, writers);
  }));

  std::vector<rcu_shared> r;
  std::vector<std::uint32_t> rnext, rrecl;
  PRIM_TO_HOST(r, s);
  PRIM_TO_HOST(rnext, next);
  PRIM_TO_HOST(rrecl, reclaimed);
  const rcu_shared& x = r[0];
  EXPECT_EQ(x.errors, 0u) << "watchdog or broken traversal";
  EXPECT_EQ(x.poison_seen, 0u) << "R1: a reader inside a read-side critical section reached a reclaimed node";
  EXPECT_EQ(x.writers_done, writers);
  EXPECT_EQ(x.callbacks, writers);
  EXPECT_EQ(x.retire_reclaimed, writers) << "callbacks run by retire calls";
  std::vector<bool> victim(kRcuNodes + 1, false);
  for (unsigned w = 0; w < writers; ++w) victim[rcu_victim(w)] = true;
  std::size_t wrong = 0;
  for (unsigned n = 1; n <= kRcuNodes; ++n)
    if (rrecl[n] != (victim[n] ? 1u : 0u) && wrong++ == 0)
      ADD_FAILURE() << "R3: node " << n << " (retired: " << victim[n] << ") reclaimed " << rrecl[n] << " times";
  EXPECT_EQ(wrong, 0u);
  // The list holds exactly the nodes nobody retired.
  unsigned len = 0, retired_in_list = 0;
  for (std::uint32_t n = x.head; n != 0 && len <= kRcuNodes; n = rnext[n]) {
    ++len;
    retired_in_list += victim[n];
  }
  EXPECT_EQ(len, kRcuNodes - writers);
  EXPECT_EQ(retired_in_list, 0u);
  // R4 at quiescence.
  EXPECT_EQ(x.domain.readers_raw(0), 0u);
  EXPECT_EQ(x.domain.readers_raw(1), 0u);
  EXPECT_EQ(x.domain.pending_raw(), 0u);
  EXPECT_EQ(x.domain.cb_head_raw(), 0u);
  std::printf("[   info   ] rcu: %u writers, %u delegated retires, %u barriers with callbacks, epoch %u, %llu "
              "reader passes\n",
              writers, x.delegated, x.barriers, x.domain.epoch_raw(), x.reader_passes);
  RecordProperty("delegated", static_cast<int>(x.delegated));
  // Writers arrive while grace periods wait for ~65k readers: on an H200 506 of 512 retires
  // were delegated in every one of 12 runs; the property the design promises is that some are.
  EXPECT_GT(x.delegated, 0u) << "no retire was delegated to a pending barrier";
}

}  // namespace
