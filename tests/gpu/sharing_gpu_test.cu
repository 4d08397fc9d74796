// Heaps shared by processes on one GPU (issue 32; heap_options::shareable, heap::export_shareable,
// heap::import; docs/usage.md §13). The second process is this executable again (fork + exec,
// `--sharing-child MODE FD`), handed the heap over a Unix socket with SCM_RIGHTS.
//  * TwoProcessesChurnOneHeapAtOnce: each process runs rounds of 2^20 threads that allocate
//    (16 B - 4 KiB), stamp, publish half their blocks as heap offsets and free blocks taken from
//    the other side: 0 corrupt blocks, frees of the other process's blocks, shared statistics,
//    a heap walk that passes once both freed everything.
//  * AKilledProcessLeavesTheOthersBlocksIntact: the importer holds 2^16 blocks and is killed
//    (SIGKILL, between its launches); the exporter's blocks and the dead one's are intact, and the
//    exporter goes on and frees them all.
//  * MalformedImportsAreRefused: truncated, forged, foreign descriptors, non-CUDA descriptors.
//  * T1OnASharedHeapAgainstAPrivateOne: allocate + free of 2^20 blocks, same run, medians of 7
//    (figures, printed; the target of 1.1x is read from them, not asserted).
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../../tools/examples/fd_passing.hpp"
#include "gpu_test_support.cuh"
#include "toga/cuda/heap.cuh"

namespace {

using toga::cuda::heap;
using toga::cuda::heap_ref;
using ull = unsigned long long;

constexpr std::uint64_t GiB = 1ull << 30;
constexpr unsigned ring_slots = 1u << 17;
constexpr std::uint64_t ring_bytes = 64 + 8ull * ring_slots;
// words of the ring block's header (then the slots: heap offset + 1, or 0)
enum : unsigned { cross_frees = 0, corrupt = 2, failures = 4 };

__device__ ull stamp_of(unsigned role, unsigned t, std::uint64_t size, unsigned round) {
  return (ull{role} << 62) | (ull{round & 0xff} << 54) | (ull{size & 0xffff} << 32) | t;
}
__device__ void stamp(void* p, std::uint64_t size, ull s) {
  ull* w = static_cast<ull*>(p);
  w[0] = s;
  w[size / 8 - 1] = s;
  if (size >= 32) w[1] = ~s;
}
// 0 when the block's stamps disagree, else the stamp
__device__ ull read_stamp(const void* p) {
  const ull* w = static_cast<const ull*>(p);
  const ull s = w[0];
  const std::uint64_t size = (s >> 32) & 0xffff;
  if (size < 16 || w[size / 8 - 1] != s || (size >= 32 && w[1] != ~s)) return 0;
  return s;
}

template <class Ref>
__global__ void make_ring(Ref h, ull* out) {
  void* p = h.allocate(ring_bytes);
  if (p) memset(p, 0, ring_bytes);
  *out = p ? h.export_pointer(p) : ~0ull;
}

// One round of one process: allocate, stamp, publish half (as heap offsets), take one slot
// (either process's block), check and free it, free what was not published.
template <class Ref>
__global__ void churn(Ref h, std::uint64_t ring_off, unsigned role, unsigned round, unsigned n) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  ull* ring = static_cast<ull*>(h.import_pointer(ring_off));
  ull* slots = ring + 8;
  constexpr std::uint64_t sizes[] = {16, 64, 256, 1024, 4096};
  const std::uint64_t size = sizes[(t / 32 + round) % 5];
  void* p = h.allocate(size);
  bool published = false;
  if (p == nullptr) {
    atomicAdd(&ring[failures + role], 1ull);
  } else {
    stamp(p, size, stamp_of(role, t, size, round));
    __threadfence();  // the stamps before the offset that publishes them
    if (t % 2 == 0) published = atomicCAS(&slots[(t * 2654435761u + round * 7919u + role * 13u) % ring_slots], 0ull, h.export_pointer(p) + 1) == 0;
  }
  const ull v = atomicExch(&slots[(t * 40503u + round * 104729u + role * 29u) % ring_slots], 0ull);
  if (v != 0) {
    __threadfence();  // the publisher's stamps after its offset
    void* q = h.import_pointer(v - 1);
    const ull s = q ? read_stamp(q) : 0;
    if (s == 0) atomicAdd(&ring[corrupt + role], 1ull);
    else if ((s >> 62) != role) atomicAdd(&ring[cross_frees + role], 1ull);
    h.deallocate(q);
  }
  if (p != nullptr && !published) {
    if (read_stamp(p) != stamp_of(role, t, size, round)) atomicAdd(&ring[corrupt + role], 1ull);
    h.deallocate(p);
  }
}

// Every block left in the ring: checked and freed; counts the ones of `dead_role`.
template <class Ref>
__global__ void drain(Ref h, std::uint64_t ring_off, unsigned role, unsigned dead_role, ull* dead) {
  const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
  ull* ring = static_cast<ull*>(h.import_pointer(ring_off));
  if (k >= ring_slots) return;
  const ull v = ring[8 + k];
  if (v == 0) return;
  ring[8 + k] = 0;
  void* q = h.import_pointer(v - 1);
  const ull s = q ? read_stamp(q) : 0;
  if (s == 0) atomicAdd(&ring[corrupt + role], 1ull);
  else if ((s >> 62) == dead_role) atomicAdd(dead, 1ull);
  h.deallocate(q);
}

template <class Ref>
__global__ void free_at(Ref h, std::uint64_t off) { h.deallocate(h.import_pointer(off)); }

// Blocks held across another process's life: allocated, stamped, kept in `held`; check counts the bad ones.
__global__ void hold_blocks(heap_ref h, void** held, unsigned role, unsigned n, std::uint64_t ring_off) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const std::uint64_t size = 16ull << (t % 9);
  void* p = h.allocate(size);
  if (p) stamp(p, size, stamp_of(role, t, size, 0));
  if (held) held[t] = p;
  if (ring_off != ~0ull && p) static_cast<ull*>(h.import_pointer(ring_off))[8 + t] = h.export_pointer(p) + 1;
}
__global__ void check_held(void* const* held, unsigned role, unsigned n, ull* bad, bool free_them, heap_ref h) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const std::uint64_t size = 16ull << (t % 9);
  if (held[t] == nullptr || read_stamp(held[t]) != stamp_of(role, t, size, 0)) atomicAdd(bad, 1ull);
  if (free_them && held[t]) h.deallocate(held[t]);
}

template <class Ref>
__global__ void alloc_kernel(Ref h, void** out, std::uint64_t size, unsigned n, ull* failed) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  void* p = h.allocate(size);
  out[t] = p;
  if (!p) atomicAdd(failed, 1ull);
}
// Frees blocks `from` handed out through `to`'s mapping of the same heap: translated by offset.
template <class Ref>
__global__ void free_translated(Ref from, Ref to, void* const* in, unsigned n) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) to.deallocate(to.import_pointer(from.export_pointer(in[t])));
}
// T5's churn: each thread `rounds` x (allocate, write the first and last word, read them back, free).
template <class Ref>
__global__ void t5_kernel(Ref h, std::uint64_t size, unsigned n, unsigned rounds, ull* bad) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  for (unsigned k = 0; k < rounds; ++k) {
    ull* p = static_cast<ull*>(h.allocate(size));
    if (p == nullptr) {
      atomicAdd(bad, 1ull);
      continue;
    }
    p[0] = t;
    p[size / 8 - 1] = k;
    if (p[0] != t || p[size / 8 - 1] != k) atomicAdd(bad, 1ull);
    h.deallocate(p);
  }
}
__global__ void now(ull* out) { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(*out)); }
template <class Ref>
__global__ void free_kernel(Ref h, void* const* in, unsigned n) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) h.deallocate(in[t]);
}

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e));
}
ull read_word(const heap& h, std::uint64_t ring_off, unsigned w) {
  ull v = 0;
  cuda_check(cudaMemcpy(&v, static_cast<char*>(h.import_pointer(ring_off)) + 8 * w, 8, cudaMemcpyDeviceToHost), "read ring");
  return v;
}

template <class Ref>
std::uint64_t make_ring_with(Ref r) {
  toga::test::device_buffer<ull> out;
  cuda_check(cudaMalloc(&out.ptr, 8), "cudaMalloc");
  make_ring<<<1, 1>>>(r, out.ptr);
  ull off = 0;
  cuda_check(cudaMemcpy(&off, out.ptr, 8, cudaMemcpyDeviceToHost), "ring");
  if (off == ~0ull) throw std::runtime_error("no ring");
  return off;
}
// ---- the second process -------------------------------------------------------------------------

struct hello {
  toga::share_descriptor d;
  std::uint64_t ring_off;
  unsigned threads, rounds;
};

struct child_process {
  pid_t pid = -1;
  int sock = -1;
};

// Starts this executable again as the second process (exec right after fork: no CUDA state
// crosses the fork) with one end of a socket pair.
child_process start_child(const char* mode) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) throw std::runtime_error("socketpair");
  const pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    const std::string fd = std::to_string(sv[1]);
    execl("/proc/self/exe", "toga_gpu_sharing_tests", "--sharing-child", mode, fd.c_str(), static_cast<char*>(nullptr));
    _exit(97);
  }
  close(sv[1]);
  return {pid, sv[0]};
}

void send_heap(int sock, const heap& h, std::uint64_t ring_off, unsigned threads, unsigned rounds) {
  const toga::cuda::shareable_heap e = h.export_shareable();
  const hello m{e.descriptor, ring_off, threads, rounds};
  std::string err;
  const bool ok = toga_example::send_with_fds(sock, &m, sizeof m, {e.heap_fd, e.meta_fd}, err);
  close(e.heap_fd);
  close(e.meta_fd);
  if (!ok) throw std::runtime_error(err);
}

int wait_child(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
void put_byte(int sock) {
  const char c = 1;
  if (write(sock, &c, 1) != 1) throw std::runtime_error("write to the other process");
}
bool get_byte(int sock) {
  char c;
  return read(sock, &c, 1) == 1;
}

int child_main(const std::string& mode, int sock) {
  hello m{};
  std::size_t n = 0;
  std::vector<int> fds;
  std::string err;
  if (!toga_example::receive_with_fds(sock, &m, sizeof m, n, fds, err) || n != sizeof m || fds.size() != 2) {
    std::fprintf(stderr, "child: %s\n", err.c_str());
    return 10;
  }
  heap h = heap::import(&m.d, sizeof m.d, fds[0], fds[1]);
  close(fds[0]);
  close(fds[1]);
  const heap_ref r = h.ref();
  if (mode == "churn") {
    ull* when = nullptr;  // [0] the first round's start, [1] the last round's end (%globaltimer, ns)
    cuda_check(cudaMalloc(&when, 16), "cudaMalloc");
    churn<<<1, 32>>>(r, m.ring_off, 1, 0, 0);  // loads the module: the rounds below start at once
    cuda_check(cudaDeviceSynchronize(), "child warm-up");
    put_byte(sock);  // imported
    if (!get_byte(sock)) return 11;
    now<<<1, 1>>>(when);
    for (unsigned k = 0; k < m.rounds; ++k) churn<<<(m.threads + 255) / 256, 256>>>(r, m.ring_off, 1, k, m.threads);
    now<<<1, 1>>>(when + 1);
    cuda_check(cudaDeviceSynchronize(), "child churn");
    ull w[2];
    cuda_check(cudaMemcpy(w, when, 16, cudaMemcpyDeviceToHost), "when");
    if (write(sock, w, 16) != 16) return 14;
    return read_word(h, m.ring_off, corrupt + 1) == 0 && read_word(h, m.ring_off, failures + 1) == 0 ? 0 : 12;
  }
  if (mode == "outlive") {  // the exporter destroys its heap; this process goes on alone
    put_byte(sock);
    if (!get_byte(sock)) return 15;
    const std::uint64_t ring_off = make_ring_with(r);
    for (unsigned k = 0; k < 5; ++k) churn<<<(m.threads + 255) / 256, 256>>>(r, ring_off, 1, k, m.threads);
    ull* dead = nullptr;
    cuda_check(cudaMalloc(&dead, 8), "cudaMalloc");
    drain<<<ring_slots / 256, 256>>>(r, ring_off, 1, 0, dead);
    free_at<<<1, 1>>>(r, ring_off);
    cuda_check(cudaDeviceSynchronize(), "child outlive");
    h.trim();
    const auto a = h.attributes();
    if (a.allocations != a.deallocations || a.used_mem_current != 0) return 16;
    return h.check() ? 17 : 0;
  }
  if (mode == "forever") {  // churn until killed (the kill-mid-run measurement)
    for (unsigned k = 0;; ++k) {
      churn<<<(m.threads + 255) / 256, 256>>>(r, m.ring_off, 1, k, m.threads);
      if (k % 4 == 0) cuda_check(cudaDeviceSynchronize(), "child forever");
      if (k == 0) put_byte(sock);
    }
  }
  if (mode == "hold") {
    hold_blocks<<<(m.threads + 255) / 256, 256>>>(r, nullptr, 1, m.threads, m.ring_off);
    cuda_check(cudaDeviceSynchronize(), "child hold");
    put_byte(sock);
    pause();  // killed here
    return 0;
  }
  return 13;
}

// ---- the tests -------------------------------------------------------------------------------

std::uint64_t free_device_bytes() {
  std::size_t f = 0, t = 0;
  (void)cudaMemGetInfo(&f, &t);
  return f;
}

toga::cuda::heap_options shareable() {
  toga::cuda::heap_options o;
  o.shareable = true;
  return o;
}

std::uint64_t make_ring_in(const heap& h) { return make_ring_with(h.ref()); }

TEST(SharingGpu, TwoProcessesChurnOneHeapAtOnce) {
  TOGA_TEST_REQUIRE_GPU();
  if (free_device_bytes() < 12 * GiB) GTEST_SKIP() << "needs 12 GiB free";
  constexpr unsigned threads = 1u << 20, rounds = 40;
  heap h(8 * GiB, shareable());
  const std::uint64_t ring_off = make_ring_in(h);
  toga::test::device_buffer<ull> when;
  TOGA_TEST_CUDA(cudaMalloc(&when.ptr, 16));
  churn<<<1, 32>>>(h.ref(), ring_off, 0, 0, 0);  // loads the module
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  child_process c = start_child("churn");
  send_heap(c.sock, h, ring_off, threads, rounds);
  ASSERT_TRUE(get_byte(c.sock)) << "the importing process ended early (exit code " << wait_child(c.pid) << ")";
  put_byte(c.sock);
  now<<<1, 1>>>(when.ptr);
  for (unsigned k = 0; k < rounds; ++k) churn<<<threads / 256, 256>>>(h.ref(), ring_off, 0, k, threads);
  now<<<1, 1>>>(when.ptr + 1);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  ull w0[2] = {0, 0}, w1[2] = {0, 0};
  TOGA_TEST_CUDA(cudaMemcpy(w0, when.ptr, 16, cudaMemcpyDeviceToHost));
  const bool timed = read(c.sock, w1, 16) == 16;
  const int child = wait_child(c.pid);
  close(c.sock);
  EXPECT_EQ(child, 0) << "the importing process's checks failed (exit code; 128 + signal)";
  EXPECT_TRUE(timed);
  // how long the two processes' rounds overlapped in time (the GPU time-slices their contexts)
  const double overlap_ms = (std::min(w0[1], w1[1]) > std::max(w0[0], w1[0]) ? std::min(w0[1], w1[1]) - std::max(w0[0], w1[0]) : 0) / 1e6;
  const double ms = (std::max(w0[1], w1[1]) - std::min(w0[0], w1[0])) / 1e6;
  const ull during0 = read_word(h, ring_off, cross_frees), during1 = read_word(h, ring_off, cross_frees + 1);
  // one more round of the exporter alone: it takes the importer's last blocks whatever the slicing
  churn<<<threads / 256, 256>>>(h.ref(), ring_off, 0, rounds, threads);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  toga::test::device_buffer<ull> dead;
  TOGA_TEST_CUDA(cudaMalloc(&dead.ptr, 8));
  TOGA_TEST_CUDA(cudaMemset(dead.ptr, 0, 8));
  drain<<<ring_slots / 256, 256>>>(h.ref(), ring_off, 0, 1, dead.ptr);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  const ull cross0 = read_word(h, ring_off, cross_frees), cross1 = read_word(h, ring_off, cross_frees + 1);
  EXPECT_EQ(read_word(h, ring_off, corrupt) + read_word(h, ring_off, corrupt + 1), 0u) << "corrupt blocks: two blocks over the same bytes";
  EXPECT_EQ(read_word(h, ring_off, failures) + read_word(h, ring_off, failures + 1), 0u);
  EXPECT_GT(cross0, 1000u) << "the exporter freed blocks of the importer";
  EXPECT_GT(cross1, 1000u) << "the importer freed blocks of the exporter";
  free_at<<<1, 1>>>(h.ref(), ring_off);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  h.trim();
  const toga::cuda::heap_attributes a = h.attributes();
  EXPECT_TRUE(a.shared);
  EXPECT_FALSE(a.imported);
  EXPECT_EQ(a.allocations, a.deallocations) << "the statistics are shared: every allocation of both processes was freed";
  EXPECT_EQ(a.used_mem_current, 0u);
  EXPECT_EQ(a.allocations, 2ull * threads * rounds + threads + 1);
  const auto walk = h.check();
  EXPECT_FALSE(walk.has_value()) << *walk;
  std::printf("two processes x %u rounds x %u threads: %.1f ms from the first start to the last end, the processes' rounds overlapping for %.1f ms "
              "(exporter %.1f ms, importer %.1f ms); cross-process frees while both ran: exporter %llu, importer %llu; in all: %llu, %llu\n",
              rounds, threads, ms, overlap_ms, (w0[1] - w0[0]) / 1e6, (w1[1] - w1[0]) / 1e6, during0, during1, cross0, cross1);
}

// The memory lives until the last process unmaps it: the exporter's heap is destroyed while the
// importer still uses it, and the importer churns, frees everything and walks the heap alone.
TEST(SharingGpu, TheImporterOutlivesTheExporter) {
  TOGA_TEST_REQUIRE_GPU();
  if (free_device_bytes() < 4 * GiB) GTEST_SKIP() << "needs 4 GiB free";
  auto h = std::make_unique<heap>(2 * GiB, shareable());
  child_process c = start_child("outlive");
  send_heap(c.sock, *h, 0, 1u << 18, 0);
  ASSERT_TRUE(get_byte(c.sock)) << "the importing process ended early (exit code " << wait_child(c.pid) << ")";
  h.reset();  // the exporter's mappings and handles go
  put_byte(c.sock);
  EXPECT_EQ(wait_child(c.pid), 0) << "the importer could not go on alone (exit code; 128 + signal)";
  close(c.sock);
}

TEST(SharingGpu, AKilledProcessLeavesTheOthersBlocksIntact) {
  TOGA_TEST_REQUIRE_GPU();
  if (free_device_bytes() < 4 * GiB) GTEST_SKIP() << "needs 4 GiB free";
  constexpr unsigned held = 1u << 16;
  heap h(2 * GiB, shareable());
  const std::uint64_t ring_off = make_ring_in(h);
  toga::test::device_buffer<void*> mine;
  TOGA_TEST_CUDA(cudaMalloc(&mine.ptr, held * sizeof(void*)));
  hold_blocks<<<held / 256, 256>>>(h.ref(), mine.ptr, 0, held, ~0ull);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  child_process c = start_child("hold");
  send_heap(c.sock, h, ring_off, held, 0);
  ASSERT_TRUE(get_byte(c.sock)) << "the importing process ended early (exit code " << wait_child(c.pid) << ")";
  kill(c.pid, SIGKILL);
  EXPECT_EQ(wait_child(c.pid), 128 + SIGKILL);
  close(c.sock);
  toga::test::device_buffer<ull> counts;
  TOGA_TEST_CUDA(cudaMalloc(&counts.ptr, 16));
  TOGA_TEST_CUDA(cudaMemset(counts.ptr, 0, 16));
  check_held<<<held / 256, 256>>>(mine.ptr, 0, held, counts.ptr, false, h.ref());
  for (unsigned k = 0; k < 5; ++k) churn<<<(1u << 18) / 256, 256>>>(h.ref(), ring_off, 0, k, 1u << 18);  // the survivor goes on
  drain<<<ring_slots / 256, 256>>>(h.ref(), ring_off, 0, 1, counts.ptr + 1);  // the dead one's blocks (those churn did not take)
  check_held<<<held / 256, 256>>>(mine.ptr, 0, held, counts.ptr, true, h.ref());
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  ull c2[2];
  TOGA_TEST_CUDA(cudaMemcpy(c2, counts.ptr, 16, cudaMemcpyDeviceToHost));
  EXPECT_EQ(c2[0], 0u) << "blocks of the surviving process changed";
  EXPECT_EQ(read_word(h, ring_off, corrupt), 0u) << "blocks of the dead process changed";
  EXPECT_EQ(read_word(h, ring_off, cross_frees) + c2[1], held) << "every block of the dead process was found intact and freed";
  free_at<<<1, 1>>>(h.ref(), ring_off);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  h.trim();
  const auto a = h.attributes();
  EXPECT_EQ(a.used_mem_current, 0u);
  EXPECT_EQ(a.allocations, a.deallocations);
  const auto walk = h.check();
  EXPECT_FALSE(walk.has_value()) << *walk;
}

std::string import_error(const void* d, std::size_t n, int hf, int mf, int device = -1) {
  try {
    heap h = heap::import(d, n, hf, mf, device);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(SharingGpu, MalformedImportsAreRefused) {
  TOGA_TEST_REQUIRE_GPU();
  heap a(64ull << 20, shareable()), b(64ull << 20, shareable());
  const auto ea = a.export_shareable(), eb = b.export_shareable();
  auto forged = ea.descriptor;
  forged.levels += 1;
  forged.checksum = toga::share_checksum(forged);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  int count = 0;
  TOGA_TEST_CUDA(cudaGetDeviceCount(&count));
  struct bad {
    const char* name;
    std::string msg;
    const char* says;
  };
  const std::vector<bad> cases = {
      {"truncated", import_error(&ea.descriptor, 64, ea.heap_fd, ea.meta_fd), "truncated"},
      {"forged geometry", import_error(&forged, sizeof forged, ea.heap_fd, ea.meta_fd), "do not follow from its geometry"},
      {"not a CUDA handle", import_error(&ea.descriptor, sizeof ea.descriptor, p[0], ea.meta_fd), "is not a CUDA memory handle"},
      {"handles of another export", import_error(&ea.descriptor, sizeof ea.descriptor, eb.heap_fd, eb.meta_fd), "metadata handle belongs to another heap"},
      {"another export's heap handle", import_error(&ea.descriptor, sizeof ea.descriptor, eb.heap_fd, ea.meta_fd), "heap handle belongs to another heap"},
      {"a negative device", import_error(&ea.descriptor, sizeof ea.descriptor, ea.heap_fd, ea.meta_fd, -2), "is not in [0"},
      {"a device CUDA does not see", import_error(&ea.descriptor, sizeof ea.descriptor, ea.heap_fd, ea.meta_fd, count), "is not in [0"},
  };
  for (const bad& c : cases) {
    EXPECT_NE(c.msg.find(c.says), std::string::npos) << c.name << ": got \"" << c.msg << "\"";
    EXPECT_NE(c.msg.find("toga::cuda::heap::import"), std::string::npos) << c.name;
  }
  // the good one imports in this process too (a second mapping) and sees a's statistics
  heap c = heap::import(&ea.descriptor, sizeof ea.descriptor, ea.heap_fd, ea.meta_fd);
  EXPECT_TRUE(c.imported());
  EXPECT_THROW(c.reset(), std::logic_error);
  EXPECT_THROW((void)heap(toga::cuda::heap_options{.max_bytes = 1ull << 30, .shareable = true}), std::invalid_argument);
  EXPECT_THROW((void)heap(1ull << 26).export_shareable(), std::logic_error);
  for (int fd : {ea.heap_fd, ea.meta_fd, eb.heap_fd, eb.meta_fd, p[0], p[1]}) close(fd);
  const std::uint64_t before = c.attributes().allocations;
  toga::test::device_buffer<void*> one;
  toga::test::device_buffer<ull> failed;
  TOGA_TEST_CUDA(cudaMalloc(&one.ptr, sizeof(void*)));
  TOGA_TEST_CUDA(cudaMalloc(&failed.ptr, 8));
  TOGA_TEST_CUDA(cudaMemset(failed.ptr, 0, 8));
  alloc_kernel<<<1, 1>>>(a.ref(), one.ptr, 4096, 1, failed.ptr);
  free_translated<<<1, 1>>>(a.ref(), c.ref(), one.ptr, 1);  // allocated through one mapping, freed through the other
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(c.attributes().allocations, before + 1);
  EXPECT_EQ(a.attributes().deallocations, 1u);
  EXPECT_FALSE(a.check().has_value());
}

// One T1 pass over `r` (2^20 or `n` threads: allocate, then free, each kernel between CUDA
// events); appends the two times (ms) unless it is the warm-up. Failed requests count in `failed`.
struct t1_timer {
  cudaEvent_t e[3];
  t1_timer() {
    for (cudaEvent_t& x : e) cuda_check(cudaEventCreate(&x), "cudaEventCreate");
  }
  ~t1_timer() {
    for (cudaEvent_t x : e) (void)cudaEventDestroy(x);
  }
  template <class Ref>
  void pass(Ref r, void** ptrs, std::uint64_t size, unsigned n, ull* failed, bool warm_up, std::vector<float>& am, std::vector<float>& fm) {
    cuda_check(cudaEventRecord(e[0]), "cudaEventRecord");
    alloc_kernel<<<n / 256, 256>>>(r, ptrs, size, n, failed);
    cuda_check(cudaEventRecord(e[1]), "cudaEventRecord");
    free_kernel<<<n / 256, 256>>>(r, ptrs, n);
    cuda_check(cudaEventRecord(e[2]), "cudaEventRecord");
    cuda_check(cudaEventSynchronize(e[2]), "T1 pass");
    float a = 0, f = 0;
    cuda_check(cudaEventElapsedTime(&a, e[0], e[1]), "cudaEventElapsedTime");
    cuda_check(cudaEventElapsedTime(&f, e[1], e[2]), "cudaEventElapsedTime");
    if (!warm_up) {
      am.push_back(a);
      fm.push_back(f);
    }
  }
};
float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A heap with heap_options::system_scope (every atomic at system scope, for heaps several GPUs
// use) on one GPU: its handle is system_ref(), it serves 10 rounds of 2^20-thread churn with 0
// corrupt blocks and a clean walk, a shareable one carries the scope to its importer, and T1
// against a device-scope heap, interleaved, medians of 7 (figures, printed).
TEST(SharingGpu, SystemScopeHeapServesAndWhatItCosts) {
  TOGA_TEST_REQUIRE_GPU();
  if (free_device_bytes() < 20 * GiB) GTEST_SKIP() << "needs 20 GiB free";
  constexpr unsigned n = 1u << 20;
  toga::cuda::heap_options so;
  so.system_scope = true;
  heap dev(8 * GiB), sys(8 * GiB, so);
  EXPECT_THROW((void)sys.ref(), std::logic_error);
  EXPECT_THROW((void)dev.system_ref(), std::logic_error);
  EXPECT_TRUE(sys.attributes().system_scope);
  toga::cuda::heap_options bad = so;
  bad.tenants = true;
  EXPECT_THROW((void)heap(1ull << 26, bad), std::invalid_argument);
  bad = so;
  bad.max_bytes = 1ull << 30;
  EXPECT_THROW((void)heap(bad), std::invalid_argument);
  {  // churn
    const toga::cuda::system_heap_ref r = sys.system_ref();
    const std::uint64_t ring_off = make_ring_with(r);
    for (unsigned k = 0; k < 10; ++k) churn<<<n / 256, 256>>>(r, ring_off, 0, k, n);
    toga::test::device_buffer<ull> dead;
    TOGA_TEST_CUDA(cudaMalloc(&dead.ptr, 8));
    TOGA_TEST_CUDA(cudaMemset(dead.ptr, 0, 8));
    drain<<<ring_slots / 256, 256>>>(r, ring_off, 0, 1, dead.ptr);
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    EXPECT_EQ(read_word(sys, ring_off, corrupt), 0u);
    EXPECT_EQ(read_word(sys, ring_off, failures), 0u);
    free_at<<<1, 1>>>(r, ring_off);
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    sys.trim();
    const auto a = sys.attributes();
    EXPECT_EQ(a.allocations, a.deallocations);
    EXPECT_EQ(a.used_mem_current, 0u);
    const auto walk = sys.check();
    EXPECT_FALSE(walk.has_value()) << *walk;
  }
  {  // a shareable system-scope heap: the importer gets the scope from the descriptor
    toga::cuda::heap_options ss = so;
    ss.shareable = true;
    heap ex(64ull << 20, ss);
    const auto e = ex.export_shareable();
    heap im = heap::import(&e.descriptor, sizeof e.descriptor, e.heap_fd, e.meta_fd);
    close(e.heap_fd);
    close(e.meta_fd);
    EXPECT_TRUE(im.attributes().system_scope);
    EXPECT_THROW((void)im.ref(), std::logic_error);
    toga::test::device_buffer<void*> one;
    toga::test::device_buffer<ull> failed;
    TOGA_TEST_CUDA(cudaMalloc(&one.ptr, 256 * sizeof(void*)));
    TOGA_TEST_CUDA(cudaMalloc(&failed.ptr, 8));
    TOGA_TEST_CUDA(cudaMemset(failed.ptr, 0, 8));
    alloc_kernel<<<1, 256>>>(ex.system_ref(), one.ptr, 256, 256, failed.ptr);
    free_translated<<<1, 256>>>(ex.system_ref(), im.system_ref(), one.ptr, 256);
    TOGA_TEST_CUDA(cudaDeviceSynchronize());
    EXPECT_EQ(im.attributes().deallocations, 256u);
    EXPECT_FALSE(ex.check().has_value());
  }
  toga::test::device_buffer<void*> ptrs;
  toga::test::device_buffer<ull> failed;
  TOGA_TEST_CUDA(cudaMalloc(&ptrs.ptr, n * sizeof(void*)));
  TOGA_TEST_CUDA(cudaMalloc(&failed.ptr, 8));
  TOGA_TEST_CUDA(cudaMemset(failed.ptr, 0, 8));
  t1_timer timer;
  for (std::uint64_t size : {16ull, 256ull, 4096ull}) {
    std::vector<float> am[2], fm[2];
    for (int rep = 0; rep < 8; ++rep) {  // rep 0: the warm-up
      timer.pass(dev.ref(), ptrs.ptr, size, n, failed.ptr, rep == 0, am[0], fm[0]);
      timer.pass(sys.system_ref(), ptrs.ptr, size, n, failed.ptr, rep == 0, am[1], fm[1]);
    }
    std::printf("T1 %llu B: device scope allocate %.3f / free %.3f ms; system scope %.3f (%.2fx) / %.3f (%.2fx)\n", static_cast<ull>(size),
                median(am[0]), median(fm[0]), median(am[1]), median(am[1]) / median(am[0]), median(fm[1]), median(fm[1]) / median(fm[0]));
  }
  ull f = 0;
  TOGA_TEST_CUDA(cudaMemcpy(&f, failed.ptr, 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(f, 0u);
}

// One heap on GPU 0 used by kernels of GPU 0 and GPU 1 at once (heap_options::system_scope,
// heap::grant_access): churn rounds on both GPUs' streams together, each freeing the other's
// blocks; 0 corrupt, statistics balanced, the walk clean. Then T1 (2^20) and T5 (2^18 x 16) on
// each GPU over the same heap, interleaved, medians of 5 (figures, printed). Skipped without two
// GPUs with peer access.
TEST(SharingGpu, TwoGpusAllocateAndFreeInOneHeap) {
  TOGA_TEST_REQUIRE_GPU();
  int count = 0, can = 0;
  TOGA_TEST_CUDA(cudaGetDeviceCount(&count));
  {  // what one GPU can check of grant_access: bad devices refused, its own device a no-op
    TOGA_TEST_CUDA(cudaSetDevice(0));
    toga::cuda::heap_options so;
    so.system_scope = true;
    heap plain(1ull << 26), sys(1ull << 26, so);
    EXPECT_THROW(plain.grant_access(count), std::invalid_argument);
    EXPECT_THROW(sys.grant_access(-1), std::invalid_argument);
    EXPECT_NO_THROW(plain.grant_access(0));
    EXPECT_NO_THROW(sys.grant_access(0));
  }
  if (count < 2) GTEST_SKIP() << "needs two GPUs";
  TOGA_TEST_CUDA(cudaDeviceCanAccessPeer(&can, 1, 0));
  if (!can) GTEST_SKIP() << "GPU 1 cannot access GPU 0's memory";
  TOGA_TEST_CUDA(cudaSetDevice(0));
  if (free_device_bytes() < 12 * GiB) GTEST_SKIP() << "needs 12 GiB free on GPU 0";
  EXPECT_THROW(heap(1ull << 26).grant_access(1), std::logic_error);
  toga::cuda::heap_options so;
  so.system_scope = true;
  heap h(8 * GiB, so);
  EXPECT_THROW(h.grant_access(count), std::invalid_argument);
  h.grant_access(1);
  const toga::cuda::system_heap_ref r = h.system_ref();
  constexpr unsigned n = 1u << 20, rounds = 20;
  const std::uint64_t ring_off = make_ring_with(r);
  cudaStream_t st[2];
  for (int d = 0; d < 2; ++d) {
    TOGA_TEST_CUDA(cudaSetDevice(d));
    TOGA_TEST_CUDA(cudaStreamCreate(&st[d]));
    churn<<<1, 32, 0, st[d]>>>(r, ring_off, d, 0, 0);  // load the module
    TOGA_TEST_CUDA(cudaStreamSynchronize(st[d]));
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (unsigned k = 0; k < rounds; ++k)
    for (int d = 0; d < 2; ++d) {
      TOGA_TEST_CUDA(cudaSetDevice(d));
      churn<<<n / 256, 256, 0, st[d]>>>(r, ring_off, d, k, n);
    }
  for (int d = 0; d < 2; ++d) {
    TOGA_TEST_CUDA(cudaSetDevice(d));
    TOGA_TEST_CUDA(cudaStreamSynchronize(st[d]));
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  TOGA_TEST_CUDA(cudaSetDevice(0));
  const ull cross0 = read_word(h, ring_off, cross_frees), cross1 = read_word(h, ring_off, cross_frees + 1);
  toga::test::device_buffer<ull> dead;
  TOGA_TEST_CUDA(cudaMalloc(&dead.ptr, 8));
  TOGA_TEST_CUDA(cudaMemset(dead.ptr, 0, 8));
  drain<<<ring_slots / 256, 256>>>(r, ring_off, 0, 1, dead.ptr);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(read_word(h, ring_off, corrupt) + read_word(h, ring_off, corrupt + 1), 0u) << "corrupt blocks: two blocks over the same bytes";
  EXPECT_EQ(read_word(h, ring_off, failures) + read_word(h, ring_off, failures + 1), 0u);
  EXPECT_GT(cross0, 1000u) << "GPU 0 freed blocks GPU 1 allocated";
  EXPECT_GT(cross1, 1000u) << "GPU 1 freed blocks GPU 0 allocated";
  free_at<<<1, 1>>>(r, ring_off);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  h.trim();
  const auto a = h.attributes();
  EXPECT_EQ(a.allocations, a.deallocations);
  EXPECT_EQ(a.used_mem_current, 0u);
  const auto walk = h.check();
  EXPECT_FALSE(walk.has_value()) << *walk;
  std::printf("two GPUs x %u rounds x %u threads of churn in one heap on GPU 0: %.1f ms; frees of the other GPU's blocks: GPU 0 %llu, GPU 1 %llu\n",
              rounds, n, ms, cross0, cross1);
  // T1 and T5 on each GPU over the same heap
  toga::test::device_buffer<void*> ptrs[2];
  toga::test::device_buffer<ull> bad[2];
  for (int d = 0; d < 2; ++d) {
    TOGA_TEST_CUDA(cudaSetDevice(d));
    TOGA_TEST_CUDA(cudaMalloc(&ptrs[d].ptr, n * sizeof(void*)));
    TOGA_TEST_CUDA(cudaMalloc(&bad[d].ptr, 8));
    TOGA_TEST_CUDA(cudaMemset(bad[d].ptr, 0, 8));
  }
  for (std::uint64_t size : {16ull, 256ull, 4096ull}) {
    std::vector<float> am[2], fm[2], t5[2];
    for (int rep = 0; rep < 6; ++rep)
      for (int d = 0; d < 2; ++d) {
        TOGA_TEST_CUDA(cudaSetDevice(d));
        t1_timer timer;  // (events of this device)
        timer.pass(r, ptrs[d].ptr, size, n, bad[d].ptr, rep == 0, am[d], fm[d]);
        constexpr unsigned n5 = 1u << 18, r5 = 16;
        cudaEvent_t e0, e1;
        TOGA_TEST_CUDA(cudaEventCreate(&e0));
        TOGA_TEST_CUDA(cudaEventCreate(&e1));
        TOGA_TEST_CUDA(cudaEventRecord(e0));
        t5_kernel<<<n5 / 256, 256>>>(r, size, n5, r5, bad[d].ptr);
        TOGA_TEST_CUDA(cudaEventRecord(e1));
        TOGA_TEST_CUDA(cudaEventSynchronize(e1));
        float ms5 = 0;
        TOGA_TEST_CUDA(cudaEventElapsedTime(&ms5, e0, e1));
        if (rep > 0) t5[d].push_back(static_cast<float>(double{n5} * r5 / (ms5 * 1e3)));  // M pairs/s
        TOGA_TEST_CUDA(cudaEventDestroy(e0));
        TOGA_TEST_CUDA(cudaEventDestroy(e1));
      }
    std::printf("heap on GPU 0, %llu B: T1 allocate / free, GPU 0 %.3f / %.3f ms, GPU 1 %.3f / %.3f ms (%.2fx / %.2fx); T5 GPU 0 %.0f, GPU 1 %.0f M pairs/s\n",
                static_cast<ull>(size), median(am[0]), median(fm[0]), median(am[1]), median(fm[1]), median(am[1]) / median(am[0]),
                median(fm[1]) / median(fm[0]), median(t5[0]), median(t5[1]));
  }
  for (int d = 0; d < 2; ++d) {
    ull b = 0;
    TOGA_TEST_CUDA(cudaSetDevice(d));
    TOGA_TEST_CUDA(cudaMemcpy(&b, bad[d].ptr, 8, cudaMemcpyDeviceToHost));
    EXPECT_EQ(b, 0u) << "GPU " << d << ": failed requests or words read back wrong";
    TOGA_TEST_CUDA(cudaStreamDestroy(st[d]));
  }
  TOGA_TEST_CUDA(cudaSetDevice(0));
  const auto walk2 = h.check();
  EXPECT_FALSE(walk2.has_value()) << *walk2;
}

// T1 (2^20 x allocate, then free) on a private heap, a shareable heap and its import in this
// process, interleaved, medians of 7 after a warm-up. Figures only.
TEST(SharingGpu, T1OnASharedHeapAgainstAPrivateOne) {
  TOGA_TEST_REQUIRE_GPU();
  if (free_device_bytes() < 20 * GiB) GTEST_SKIP() << "needs 20 GiB free";
  constexpr unsigned n = 1u << 20;
  heap priv(8 * GiB), shared(8 * GiB, shareable());
  const auto e = shared.export_shareable();
  heap imp = heap::import(&e.descriptor, sizeof e.descriptor, e.heap_fd, e.meta_fd);
  close(e.heap_fd);
  close(e.meta_fd);
  toga::test::device_buffer<void*> ptrs;
  toga::test::device_buffer<ull> failed;
  TOGA_TEST_CUDA(cudaMalloc(&ptrs.ptr, n * sizeof(void*)));
  TOGA_TEST_CUDA(cudaMalloc(&failed.ptr, 8));
  TOGA_TEST_CUDA(cudaMemset(failed.ptr, 0, 8));
  t1_timer timer;
  const heap* heaps[3] = {&priv, &shared, &imp};
  const char* names[3] = {"private", "shareable (exporter)", "imported"};
  for (std::uint64_t size : {16ull, 256ull, 4096ull}) {
    std::vector<float> am[3], fm[3];
    for (int rep = 0; rep < 8; ++rep)  // rep 0: the warm-up
      for (int k = 0; k < 3; ++k) timer.pass(heaps[k]->ref(), ptrs.ptr, size, n, failed.ptr, rep == 0, am[k], fm[k]);
    for (int k = 0; k < 3; ++k)
      std::printf("T1 %llu B, %s: allocate %.3f ms (%.2fx private), free %.3f ms (%.2fx)\n", static_cast<ull>(size), names[k], median(am[k]),
                  median(am[k]) / median(am[0]), median(fm[k]), median(fm[k]) / median(fm[0]));
  }
  ull f = 0;
  TOGA_TEST_CUDA(cudaMemcpy(&f, failed.ptr, 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(f, 0u) << "T1 rows with failed requests are not figures";
  EXPECT_FALSE(shared.check().has_value());
}

// One trial of the kill-mid-run measurement, in a process of its own (so that a hang costs only
// it): an importer churns in a loop and is killed after `delay_us`, mostly while its kernels run;
// then this process churns 5 rounds (a hang: no end within 10 s, SIGALRM), drains, trims and walks
// the heap. Exit 0: clean; 7: the walk failed (printed); 31: a CUDA error.
int kill_trial(unsigned delay_us) {
  heap h(2 * GiB, shareable());
  const std::uint64_t ring_off = make_ring_in(h);
  child_process c = start_child("forever");
  send_heap(c.sock, h, ring_off, 1u << 18, 0);
  if (!get_byte(c.sock)) return 30;
  usleep(delay_us);
  kill(c.pid, SIGKILL);
  (void)wait_child(c.pid);
  close(c.sock);
  alarm(10);
  for (unsigned k = 0; k < 5; ++k) churn<<<(1u << 18) / 256, 256>>>(h.ref(), ring_off, 0, k, 1u << 18);
  ull* dead = nullptr;
  if (cudaMalloc(&dead, 8) != cudaSuccess) return 31;
  drain<<<ring_slots / 256, 256>>>(h.ref(), ring_off, 0, 1, dead);
  free_at<<<1, 1>>>(h.ref(), ring_off);
  if (cudaDeviceSynchronize() != cudaSuccess) return 31;
  alarm(0);
  h.trim();
  if (const auto w = h.check()) {
    std::printf("walk: %s\n", w->substr(0, 200).c_str());
    std::fflush(stdout);
    return 7;
  }
  return 0;
}

// A measurement, not a test (design.md §23.4): 30 trials of kill_trial at delays of 0.5-15 ms.
//   toga_gpu_sharing_tests --gtest_also_run_disabled_tests --gtest_filter='*KillMidRun*'
TEST(SharingGpuMeasurement, DISABLED_KillMidRun) {
  TOGA_TEST_REQUIRE_GPU();
  int clean = 0, walks = 0, hangs = 0, other = 0;
  for (int t = 0; t < 30; ++t) {
    const std::string delay = std::to_string(500 + (t * 4999) % 15000);
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", "toga_gpu_sharing_tests", "--sharing-trial", delay.c_str(), static_cast<char*>(nullptr));
      _exit(97);
    }
    const int rc = wait_child(pid);
    if (rc == 0) ++clean;
    else if (rc == 7) ++walks;
    else if (rc == 128 + SIGALRM) ++hangs;
    else {
      ++other;
      std::printf("trial %d (delay %s us): exit %d\n", t, delay.c_str(), rc);
    }
  }
  std::printf("kill mid-run on the GPU, of 30: %d clean, %d with a heap walk failing, %d hangs of the survivor, %d other\n", clean, walks, hangs,
              other);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--sharing-trial") {
    try {
      return kill_trial(static_cast<unsigned>(std::atoi(argv[2])));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sharing trial: %s\n", e.what());
      return 21;
    }
  }
  if (argc >= 4 && std::string(argv[1]) == "--sharing-child") {
    try {
      return child_main(argv[2], std::atoi(argv[3]));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sharing child: %s\n", e.what());
      return 20;
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
