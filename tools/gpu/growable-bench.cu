// growable-bench: T1 (2^20 threads, one allocation each, then one free each) on a fixed heap
// and on growable heaps of the same capacity, alternating in one run (issue 14, done-when 2:
// within 5 % of the fixed heap). Heaps: `fixed` (heap(bytes)), `growable-full` (heap(options),
// every granule mapped at construction), `growable-grown` (from 0 bytes, grown by the retry
// protocol to what T1 needs, then warm). Warm protocol as toga-bench's T1: one untimed
// allocate + free, then per repetition a timed allocate kernel and a timed free kernel (CUDA
// events), medians of --reps. Prints the kernels' registers (cudaFuncGetAttributes): the same
// kernel serves every heap type, so they are equal by construction.
//
// Build (device machine): nvcc -std=c++20 -O3 -arch=sm_90 -Icore/include -Ibackends/cuda/include
//   tools/gpu/growable-bench.cu backends/cuda/src/heap.cu -o growable-bench
// Usage: growable-bench [--reps N (9)] [--heap-gib G (16)] [--sizes 16,4096]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "toga/cuda/heap.cuh"

namespace {

#define CK(call)                                                                                        \
  do {                                                                                                  \
    const cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                            \
      std::fprintf(stderr, "growable-bench: %s failed: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                                     \
    }                                                                                                   \
  } while (0)

// The launch bounds of toga-bench's T1 kernels (gpu_backend.cu): the same registers as its T13.
__global__ void __launch_bounds__(256, 4) alloc_k(toga::cuda::heap_ref h, void** out, std::size_t bytes, unsigned* failed) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  void* p = h.allocate(bytes);
  out[t] = p;
  if (p == nullptr) atomicAdd(failed, 1u);
}
__global__ void __launch_bounds__(256, 5) free_k(toga::cuda::heap_ref h, void** in) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  h.deallocate(in[t]);
}

constexpr unsigned n = 1u << 20, tpb = 256;

struct timing {
  std::vector<float> alloc, free;
};
float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

unsigned run_once(toga::cuda::heap& h, void** d, unsigned* failed, std::size_t bytes, cudaEvent_t e[3], float* a_ms, float* f_ms) {
  CK(cudaMemset(failed, 0, sizeof(unsigned)));
  CK(cudaEventRecord(e[0]));
  alloc_k<<<n / tpb, tpb>>>(h.ref(), d, bytes, failed);
  CK(cudaEventRecord(e[1]));
  free_k<<<n / tpb, tpb>>>(h.ref(), d);
  CK(cudaEventRecord(e[2]));
  CK(cudaEventSynchronize(e[2]));
  CK(cudaGetLastError());
  if (a_ms) CK(cudaEventElapsedTime(a_ms, e[0], e[1]));
  if (f_ms) CK(cudaEventElapsedTime(f_ms, e[1], e[2]));
  unsigned f = 0;
  CK(cudaMemcpy(&f, failed, sizeof f, cudaMemcpyDeviceToHost));
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 9;
  std::uint64_t heap_gib = 16;  // toga-bench's T1 heap
  std::vector<std::size_t> sizes = {16, 4096};
  std::vector<std::uint64_t> granules_mib = {2, 32};
  bool skip_t1 = false, skip_growth = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--heap-gib" && i + 1 < argc) heap_gib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--skip-t1") skip_t1 = true;
    else if (a == "--skip-growth") skip_growth = true;
    else if (a == "--granules-mib" && i + 1 < argc) {
      granules_mib.clear();
      for (char* tok = std::strtok(argv[++i], ","); tok; tok = std::strtok(nullptr, ",")) granules_mib.push_back(std::strtoull(tok, nullptr, 10));
    } else if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      for (char* tok = std::strtok(argv[++i], ","); tok; tok = std::strtok(nullptr, ",")) sizes.push_back(std::strtoull(tok, nullptr, 10));
    } else {
      std::fprintf(stderr, "growable-bench: unknown or incomplete option '%s'\nusage: growable-bench [--reps N>=1] [--heap-gib G] [--sizes B,B,...] [--granules-mib M,M] [--skip-t1] [--skip-growth]\n", a.c_str());
      return 2;
    }
  }
  if (reps < 1 || heap_gib == 0 || heap_gib > 128 || sizes.empty()) {
    std::fprintf(stderr, "growable-bench: --reps must be >= 1, --heap-gib in [1, 128], --sizes non-empty\n");
    return 2;
  }
  cudaFuncAttributes fa{}, ff{};
  CK(cudaFuncGetAttributes(&fa, alloc_k));
  CK(cudaFuncGetAttributes(&ff, free_k));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s; alloc kernel %d registers (%zu B local), free kernel %d registers (%zu B local), every heap type\n", prop.name,
              fa.numRegs, fa.localSizeBytes, ff.numRegs, ff.localSizeBytes);
  void** d = nullptr;
  unsigned* failed = nullptr;
  CK(cudaMalloc(&d, n * sizeof(void*)));
  CK(cudaMalloc(&failed, sizeof(unsigned)));
  cudaEvent_t e[3];
  for (auto& x : e) CK(cudaEventCreate(&x));
  const std::uint64_t cap = heap_gib << 30;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  for (const std::size_t bytes : skip_t1 ? std::vector<std::size_t>{} : sizes) {
    toga::cuda::heap fixed(cap);
    toga::cuda::heap_options full;
    full.max_bytes = cap;
    full.initial_bytes = cap;
    toga::cuda::heap gfull(full);
    toga::cuda::heap_options from0;
    from0.max_bytes = cap;
    toga::cuda::heap grown(from0);
    // grow `grown` by the retry protocol until T1 succeeds
    int launches = 1;
    while (run_once(grown, d, failed, bytes, e, nullptr, nullptr) != 0) {
      ++launches;
      if (grown.grow_if_needed() == 0 || launches > 16) {
        std::fprintf(stderr, "growable-bench: the grown heap cannot serve T1 at %zu B\n", bytes);
        return 1;
      }
    }
    toga::cuda::heap* heaps[3] = {&fixed, &gfull, &grown};
    const char* names[3] = {"fixed", "growable-full", "growable-grown"};
    timing t[3];
    for (int k = 0; k < 3; ++k)
      if (run_once(*heaps[k], d, failed, bytes, e, nullptr, nullptr) != 0) {  // warm-up
        std::fprintf(stderr, "growable-bench: %s failed allocations at %zu B\n", names[k], bytes);
        return 1;
      }
    for (int r = 0; r < reps; ++r)
      for (int k0 = 0; k0 < 3; ++k0) {
        const int k = (k0 + r) % 3;  // rotate the order per repetition
        float a = 0, f = 0;
        if (run_once(*heaps[k], d, failed, bytes, e, &a, &f) != 0) {
          std::fprintf(stderr, "growable-bench: %s failed allocations at %zu B\n", names[k], bytes);
          return 1;
        }
        t[k].alloc.push_back(a);
        t[k].free.push_back(f);
      }
    const float fa0 = median(t[0].alloc), ff0 = median(t[0].free);
    for (int k = 0; k < 3; ++k) {
      const float ma = median(t[k].alloc), mf = median(t[k].free);
      std::printf("T1 %6zu B %-15s alloc %.4f ms (%.3fx fixed, spread %.4f-%.4f)  free %.4f ms (%.3fx fixed)  mapped %llu MiB%s\n", bytes,
                  names[k], ma, ma / fa0, *std::min_element(t[k].alloc.begin(), t[k].alloc.end()),
                  *std::max_element(t[k].alloc.begin(), t[k].alloc.end()), mf, mf / ff0,
                  static_cast<unsigned long long>(heaps[k]->mapped_bytes() >> 20),
                  k == 2 ? (" (" + std::to_string(launches) + " launches to grow)").c_str() : "");
    }
  }
  // What growth and trims cost on the host (wall clock, one each): T1 at 4 KiB on a heap from 0
  // bytes: the failing launch, grow_if_needed (map + adopt), then after the frees trim_to(0)
  // (reclaim, the one-thread withdrawal walk of the tree, unmap).
  const auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  for (const std::uint64_t gm : skip_growth ? std::vector<std::uint64_t>{} : granules_mib) {
    const std::uint64_t granule = gm << 20;
    toga::cuda::heap_options o;
    o.max_bytes = cap;
    o.granule_bytes = granule;
    toga::cuda::heap h(o);
    std::printf("growth, %llu MiB granules, %llu GiB range:\n", static_cast<unsigned long long>(gm), static_cast<unsigned long long>(cap >> 30));
    for (const std::size_t bytes : sizes) {
      const auto t0 = std::chrono::steady_clock::now();
      const unsigned f0 = run_once(h, d, failed, bytes, e, nullptr, nullptr);
      const auto t1 = std::chrono::steady_clock::now();
      const std::uint64_t grown = h.grow_if_needed();
      const auto t2 = std::chrono::steady_clock::now();
      std::printf("  T1 %zu B: launch with %llu MiB mapped: %u failures (%.1f ms); grow_if_needed mapped %llu MiB in %.1f ms (%.1f us per granule)\n",
                  bytes, static_cast<unsigned long long>((h.mapped_bytes() - grown) >> 20), f0, ms(t0, t1),
                  static_cast<unsigned long long>(grown >> 20), ms(t1, t2), grown ? 1000.0 * ms(t1, t2) / static_cast<double>(grown / granule) : 0.0);
      for (int r = 0; r < 3; ++r) {
        float a_ms = 0;
        const auto t3 = std::chrono::steady_clock::now();
        const unsigned f = run_once(h, d, failed, bytes, e, &a_ms, nullptr);
        std::printf("    relaunch %d: %u failures, alloc kernel %.3f ms (%.1f ms wall)\n", r + 1, f, a_ms, ms(t3, std::chrono::steady_clock::now()));
      }
    }
    const auto t4 = std::chrono::steady_clock::now();
    const std::uint64_t back = h.trim_to(0);
    std::printf("  trim_to(0) unmapped %llu MiB in %.1f ms\n", static_cast<unsigned long long>(back >> 20), ms(t4, std::chrono::steady_clock::now()));
  }
  return 0;
}
