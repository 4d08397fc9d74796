// run-size-bench: granules sized by demand (issue 30; design.md §12.8) on a GPU. For each
// mapping policy (granule_bytes / max_run_bytes), on a fresh growable heap with the growth
// service, every repetition:
//  1. fill: one launch of 2^21 threads allocates 4 KiB each (8 GiB) from an empty heap, no
//     nullptr allowed (CUDA events; the rounds, the runs mapped and the service's mapping time);
//  2. the same kernel on the heap once mapped (warm), and the same kernel as the first launch on
//     a fresh heap of the same options with max_bytes mapped at construction (initial_bytes:
//     pre-mapped, nothing allocated yet). Issue 30's target is at most 2x "the same kernel on a
//     pre-mapped heap" plus the VMM calls' own cost; both references are printed;
//  3. trim precision: every block freed but `keep` of them at random (seeded) positions, then
//     trim_to(0): the bytes that stay mapped beside the live bytes, and the trim's time.
// Prints one row per policy and keep with medians over --reps; exit 1 on any nullptr or bad input.
//
// Build (device machine): nvcc -std=c++20 -O3 -arch=sm_90 -Icore/include -Ibackends/cuda/include
//   tools/gpu/run-size-bench.cu backends/cuda/src/heap.cu -o run-size-bench
// Usage: run-size-bench [--reps N (3)] [--keeps 16,256,4096] [--policies 2/2,2/8,2/32,2/128,32/32]
//   [--ahead P (100)]  (a policy is granule MiB / max run MiB; P: heap_options::growth_ahead_percent)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "toga/cuda/heap.cuh"

namespace {

#define CK(call)                                                                                                   \
  do {                                                                                                             \
    const cudaError_t e_ = (call);                                                                                 \
    if (e_ != cudaSuccess) {                                                                                       \
      std::fprintf(stderr, "run-size-bench: %s failed: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                                                \
    }                                                                                                              \
  } while (0)

constexpr std::uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

__global__ void __launch_bounds__(256) fill_k(toga::cuda::heap_ref h, void** out, std::uint64_t n, unsigned long long* failed) {
  const std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (t >= n) return;
  void* p = h.allocate(4096);
  out[t] = p;
  if (p == nullptr) {
    atomicAdd(failed, 1ull);
    return;
  }
  static_cast<std::uint64_t*>(p)[0] = t;
}
// frees out[t] unless keep[t]; checks the stamp
__global__ void __launch_bounds__(256) free_k(toga::cuda::heap_ref h, void** out, const unsigned char* keep, std::uint64_t n,
                                              unsigned long long* wrong) {
  const std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (t >= n || out[t] == nullptr || (keep && keep[t])) return;
  if (static_cast<std::uint64_t*>(out[t])[0] != t) atomicAdd(wrong, 1ull);
  h.deallocate(out[t]);
  out[t] = nullptr;
}

unsigned blocks_for(std::uint64_t n) { return static_cast<unsigned>((n + 255) / 256); }

struct policy {
  std::uint64_t granule_mib, run_mib;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "run-size-bench: %s\nusage: run-size-bench [--reps N] [--keeps K1,K2,...] [--policies G/R,...] [--ahead P] (G, R: granule "
               "and largest run in MiB, powers of two, R >= G; P: growth_ahead_percent, 0 .. 100000)\n",
               why.c_str());
  std::exit(2);
}
std::vector<std::uint64_t> parse_list(const std::string& s, const char* what) {
  std::vector<std::uint64_t> v;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t end = std::min(s.find(',', at), s.size());
    const std::string item = s.substr(at, end - at);
    char* e = nullptr;
    const unsigned long long x = std::strtoull(item.c_str(), &e, 10);
    if (item.empty() || *e != '\0') usage(std::string(what) + ": '" + item + "' is not a number");
    v.push_back(x);
    at = end + 1;
  }
  return v;
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 3;
  std::uint64_t ahead = 100;
  std::vector<std::uint64_t> keeps = {16, 256, 4096};
  std::vector<policy> policies = {{2, 2}, {2, 8}, {2, 32}, {2, 128}, {32, 32}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--reps") {
      reps = std::atoi(v.c_str());
      if (reps < 1 || reps > 100) usage("--reps " + v + " is not in [1, 100]");
    } else if (a == "--ahead") {
      const auto x = parse_list(v, "--ahead");
      if (x.size() != 1 || x[0] > 100000) usage("--ahead " + v + " is not one percent in [0, 100000]");
      ahead = x[0];
    } else if (a == "--keeps") {
      keeps = parse_list(v, "--keeps");
    } else if (a == "--policies") {
      policies.clear();
      std::size_t at = 0;
      while (at <= v.size()) {
        const std::size_t end = std::min(v.find(',', at), v.size());
        const std::string item = v.substr(at, end - at);
        const std::size_t slash = item.find('/');
        if (slash == std::string::npos) usage("--policies: '" + item + "' is not G/R");
        const auto g = parse_list(item.substr(0, slash), "--policies"), r = parse_list(item.substr(slash + 1), "--policies");
        if ((g[0] & (g[0] - 1)) || (r[0] & (r[0] - 1)) || r[0] < g[0] || g[0] == 0) usage("--policies: '" + item + "' needs powers of two, R >= G");
        policies.push_back({g[0], r[0]});
        at = end + 1;
      }
    } else {
      usage("unknown option " + a);
    }
  }
  const std::uint64_t n = 2u << 20;  // 2^21 x 4 KiB = 8 GiB
  void** out = nullptr;
  unsigned long long* c = nullptr;
  unsigned char* keep_d = nullptr;
  CK(cudaMalloc(&out, n * sizeof(void*)));
  CK(cudaMalloc(&c, 2 * sizeof(unsigned long long)));
  CK(cudaMalloc(&keep_d, n));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const auto timed = [&](auto&& launch) {
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
  };
  const auto take = [&](int k) {
    unsigned long long v = 0;
    CK(cudaMemcpy(&v, c + k, sizeof v, cudaMemcpyDeviceToHost));
    CK(cudaMemset(c + k, 0, sizeof v));
    return v;
  };
  CK(cudaMemset(c, 0, 2 * sizeof(unsigned long long)));
  int bad = 0;
  std::printf("ahead %llu %%\n", static_cast<unsigned long long>(ahead));
  std::printf("| granule / largest run | fill 8 GiB from empty, ms | warm, ms | ratio | pre-mapped first launch, ms | ratio | rounds | runs mapped | service mapping, ms | target (2 x pre-mapped + mapping), ms |");
  for (const std::uint64_t k : keeps) std::printf(" keep %llu: mapped after trim, MiB | trim, ms |", static_cast<unsigned long long>(k));
  std::printf("\n|---|---|---|---|---|---|---|---|---|---|");
  for (std::size_t k = 0; k < keeps.size(); ++k) std::printf("---|---|");
  std::printf("\n");
  for (const policy& pol : policies) {
    std::vector<float> fill, warm, pre, mapms, rounds, runs;
    std::vector<std::vector<float>> kept(keeps.size()), trim_ms(keeps.size());
    for (int rep = 0; rep < reps; ++rep) {
      for (std::size_t ki = 0; ki < keeps.size(); ++ki) {
        toga::cuda::heap_options o;
        o.max_bytes = 16 * GiB;
        o.growth_service = true;
        o.growth_wait_us = 60'000'000;
        o.granule_bytes = pol.granule_mib * MiB;
        o.max_run_bytes = pol.run_mib * MiB;
        o.growth_ahead_percent = ahead;
        if (ki == 0) {  // the pre-mapped reference: a fresh heap of the same options, everything mapped at construction
          toga::cuda::heap_options po = o;
          po.initial_bytes = po.max_bytes;
          toga::cuda::heap ph(po);
          fill_k<<<1, 32>>>(ph.ref(), out, 0, c);  // load the kernels
          CK(cudaDeviceSynchronize());
          pre.push_back(timed([&] { fill_k<<<blocks_for(n), 256>>>(ph.ref(), out, n, c); }));
          if (const auto f = take(0)) {
            std::fprintf(stderr, "run-size-bench: %llu nullptr on the pre-mapped heap\n", f);
            bad = 1;
          }
          free_k<<<blocks_for(n), 256>>>(ph.ref(), out, nullptr, n, c + 1);
          CK(cudaDeviceSynchronize());
          if (take(1)) {
            std::fprintf(stderr, "run-size-bench: blocks overwritten on the pre-mapped heap\n");
            bad = 1;
          }
        }
        toga::cuda::heap h(o);
        fill_k<<<1, 32>>>(h.ref(), out, 0, c);  // load the kernels
        free_k<<<1, 32>>>(h.ref(), out, nullptr, 0, c + 1);
        CK(cudaDeviceSynchronize());
        const float ms = timed([&] { fill_k<<<blocks_for(n), 256>>>(h.ref(), out, n, c); });
        if (const auto f = take(0)) {
          std::fprintf(stderr, "run-size-bench: %llu nullptr in the fill (policy %llu/%llu)\n", f, (unsigned long long)pol.granule_mib,
                       (unsigned long long)pol.run_mib);
          bad = 1;
        }
        toga::cuda::heap_attributes a = h.attributes();
        if (ki == 0) {  // the fill's figures once per repetition
          fill.push_back(ms);
          rounds.push_back(static_cast<float>(a.service_rounds));
          runs.push_back(static_cast<float>(a.mapped_runs));
          mapms.push_back(static_cast<float>(a.service_map_ns / 1e6));
          // warm: the same kernel on the mapped heap
          free_k<<<blocks_for(n), 256>>>(h.ref(), out, nullptr, n, c + 1);
          CK(cudaDeviceSynchronize());
          warm.push_back(timed([&] { fill_k<<<blocks_for(n), 256>>>(h.ref(), out, n, c); }));
          if (take(0)) bad = 1;
        }
        // trim precision: keep `keeps[ki]` blocks at random positions
        std::vector<unsigned char> keep(n, 0);
        std::mt19937_64 rng(1000 * rep + ki);
        for (std::uint64_t j = 0; j < keeps[ki]; ++j) keep[rng() % n] = 1;
        CK(cudaMemcpy(keep_d, keep.data(), n, cudaMemcpyHostToDevice));
        free_k<<<blocks_for(n), 256>>>(h.ref(), out, keep_d, n, c + 1);
        CK(cudaDeviceSynchronize());
        const auto t0 = std::chrono::steady_clock::now();
        (void)h.trim_to(0);
        trim_ms[ki].push_back(std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - t0).count());
        kept[ki].push_back(static_cast<float>(h.mapped_bytes() / MiB));
        const auto err = rep == 0 && ki == 0 ? h.check() : std::nullopt;  // (check copies the mapped heap to the host)
        if (err) {
          std::fprintf(stderr, "run-size-bench: heap walk after the trim: %s\n", err->c_str());
          bad = 1;
        }
        free_k<<<blocks_for(n), 256>>>(h.ref(), out, nullptr, n, c + 1);
        CK(cudaDeviceSynchronize());
        if (take(1)) {
          std::fprintf(stderr, "run-size-bench: blocks overwritten\n");
          bad = 1;
        }
      }
    }
    const float f = median(fill), w = median(warm), pm = median(pre);
    std::printf("| %llu / %llu MiB | %.2f | %.3f | %.1fx | %.3f | %.1fx | %.0f | %.0f | %.2f | %.2f |", (unsigned long long)pol.granule_mib,
                (unsigned long long)pol.run_mib, f, w, f / w, pm, f / pm, median(rounds), median(runs), median(mapms), 2 * pm + median(mapms));
    for (std::size_t ki = 0; ki < keeps.size(); ++ki) std::printf(" %.0f | %.2f |", median(kept[ki]), median(trim_ms[ki]));
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf("(2^21 x 4 KiB = 8 GiB per fill; medians of %d; keep K: K blocks of 4 KiB kept at random, the rest freed, then trim_to(0))\n", reps);
  return bad;
}
