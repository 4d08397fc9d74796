// vmm-bench: what the CUDA virtual memory management API costs, for the growable heap (issue 14:
// "Measure on the GPU"). Not part of the CMake build. On the GPU machine:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 tools/gpu/vmm-bench.cu -lcuda -o vmm-bench
//   ./vmm-bench [--reps R] [--read-gib G] [--kernel-ms K]
// 1. Latency (host wall clock, microseconds; median and 90th percentile of R repetitions) of
//    cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap and cuMemRelease for handles of 2, 32 and
//    512 MiB, into one reserved range: first with the GPU idle, then while a kernel of K ms spins
//    on another stream (and whether that kernel was still running when the calls returned, i.e.
//    whether they waited for it).
// 2. Reads over G GiB: streaming (coalesced 16 B loads, GB/s) and random (independent 8 B loads
//    at hashed addresses, M loads/s), for one cudaMalloc against a VMM range mapped with 2 MiB and
//    with 512 MiB handles. CUDA events, median of 5 after a warm-up.
// Exit status: 0, 1 on a CUDA error (named), 2 on a bad option.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void die_cu(CUresult r, const char* what, int line) {
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::fprintf(stderr, "vmm-bench: %s failed: %s (line %d)\n", what, name ? name : "?", line);
  std::exit(1);
}
#define CU(x)                                  \
  do {                                         \
    CUresult r_ = (x);                         \
    if (r_ != CUDA_SUCCESS) die_cu(r_, #x, __LINE__); \
  } while (0)
#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "vmm-bench: %s failed: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

using clk = std::chrono::steady_clock;
double us_since(clk::time_point t0) { return std::chrono::duration<double, std::micro>(clk::now() - t0).count(); }

struct stats {
  double med = 0, p90 = 0;
};
stats summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 9 / 10)]};
}

__global__ void spin(long long cycles, int* done) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) *done = 1;
}

__global__ void stream_read(const uint4* p, std::size_t n, unsigned long long* sink) {
  unsigned long long acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) {
    const uint4 v = p[i];
    acc += v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b97f4a7c15ull) *sink = acc;  // keeps the loads
}
__global__ void random_read(const unsigned long long* p, std::size_t n, unsigned per_thread, unsigned long long* sink) {
  const std::size_t t = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  unsigned long long acc = 0, x = t * 0x9e3779b97f4a7c15ull + 1;
  for (unsigned k = 0; k < per_thread; ++k) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    acc += p[x % n];
  }
  if (acc == 0x9e3779b97f4a7c15ull) *sink = acc;
}

struct vmm {
  CUmemAllocationProp prop{};
  CUmemAccessDesc access{};
  explicit vmm(int dev) {
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  std::size_t granularity() const {
    std::size_t g = 0;
    CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    return g;
  }
};

// One round of create / map / set-access / unmap / release of `handles` handles of `bytes`
// each into `base`; the per-call times go to t[0..4] (microseconds, per handle).
void round_trip(const vmm& v, CUdeviceptr base, std::size_t bytes, unsigned handles, std::vector<double> t[5]) {
  std::vector<CUmemGenericAllocationHandle> h(handles);
  for (unsigned i = 0; i < handles; ++i) {
    auto t0 = clk::now();
    CU(cuMemCreate(&h[i], bytes, &v.prop, 0));
    t[0].push_back(us_since(t0));
    t0 = clk::now();
    CU(cuMemMap(base + i * bytes, bytes, 0, h[i], 0));
    t[1].push_back(us_since(t0));
    t0 = clk::now();
    CU(cuMemSetAccess(base + i * bytes, bytes, &v.access, 1));
    t[2].push_back(us_since(t0));
  }
  for (unsigned i = 0; i < handles; ++i) {
    auto t0 = clk::now();
    CU(cuMemUnmap(base + i * bytes, bytes));
    t[3].push_back(us_since(t0));
    t0 = clk::now();
    CU(cuMemRelease(h[i]));
    t[4].push_back(us_since(t0));
  }
}

}  // namespace

int main(int argc, char** argv) {
  unsigned reps = 20;
  double read_gib = 4, kernel_ms = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "vmm-bench: %s needs a value (--reps R --read-gib G --kernel-ms K)\n", a.c_str());
      return 2;
    }
    const char* v = argv[++i];
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (*end || x <= 0) {
      std::fprintf(stderr, "vmm-bench: %s %s: want a positive number\n", a.c_str(), v);
      return 2;
    }
    if (a == "--reps") reps = static_cast<unsigned>(x);
    else if (a == "--read-gib") read_gib = x;
    else if (a == "--kernel-ms") kernel_ms = x;
    else {
      std::fprintf(stderr, "vmm-bench: unknown option %s (--reps R --read-gib G --kernel-ms K)\n", a.c_str());
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CK(cudaFree(nullptr));  // the primary context, current for the driver API too
  int dev = 0, clock_khz = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  int driver = 0;
  CK(cudaDriverGetVersion(&driver));
  vmm v(dev);
  std::printf("GPU %s, driver %d; VMM granularity %zu KiB; %u repetitions\n", prop.name, driver, v.granularity() >> 10, reps);

  const std::size_t sizes[] = {std::size_t{2} << 20, std::size_t{32} << 20, std::size_t{512} << 20};
  const std::size_t range = std::size_t{2} << 30;
  CUdeviceptr base = 0;
  CU(cuMemAddressReserve(&base, range, 0, 0, 0));
  int* d_done = nullptr;
  CK(cudaMalloc(&d_done, sizeof(int)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const char* names[] = {"create", "map", "set-access", "unmap", "release"};
  std::printf("\n%-8s %-10s %-6s | %s\n", "handle", "GPU", "calls", "median / p90 us per call: create, map, set-access, unmap, release");
  for (int busy = 0; busy < 2; ++busy) {
    for (std::size_t bytes : sizes) {
      const unsigned handles = bytes >= (std::size_t{512} << 20) ? 2u : 4u;
      std::vector<double> t[5];
      unsigned still_running = 0, rounds = 0;
      round_trip(v, base, bytes, handles, t);  // warm-up
      for (auto& x : t) x.clear();
      for (unsigned r = 0; r < reps; ++r) {
        if (busy) {
          CK(cudaMemsetAsync(d_done, 0, sizeof(int), s));
          spin<<<prop.multiProcessorCount, 32, 0, s>>>(static_cast<long long>(kernel_ms * clock_khz), d_done);
          CK(cudaGetLastError());
        }
        round_trip(v, base, bytes, handles, t);
        if (busy) {
          ++rounds;
          if (cudaStreamQuery(s) == cudaErrorNotReady) ++still_running;
          CK(cudaStreamSynchronize(s));
        }
      }
      std::printf("%5zu MiB %-10s %6zu |", bytes >> 20, busy ? "busy" : "idle", t[0].size());
      for (int k = 0; k < 5; ++k) {
        const stats st = summarise(t[k]);
        std::printf(" %s %.1f / %.1f%s", names[k], st.med, st.p90, k < 4 ? "," : "");
      }
      if (busy) std::printf(" | kernel still running after the calls in %u of %u rounds", still_running, rounds);
      std::printf("\n");
    }
  }
  CU(cuMemAddressFree(base, range));

  // Reads: cudaMalloc against VMM with 2 MiB and 512 MiB handles
  const std::size_t bytes = static_cast<std::size_t>(read_gib * (1 << 30)) & ~((std::size_t{512} << 20) - 1);
  if (bytes == 0) {
    std::fprintf(stderr, "vmm-bench: --read-gib must be at least 0.5\n");
    return 2;
  }
  unsigned long long* sink = nullptr;
  CK(cudaMalloc(&sink, sizeof *sink));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const unsigned per_thread = 64, rthreads = 1u << 20;
  auto time_reads = [&](const void* p, const char* what) {
    std::vector<float> ts, tr;
    for (int r = 0; r <= 5; ++r) {
      float a = 0, b = 0;
      CK(cudaEventRecord(e0));
      stream_read<<<prop.multiProcessorCount * 8, 512>>>(static_cast<const uint4*>(p), bytes / 16, sink);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      CK(cudaEventElapsedTime(&a, e0, e1));
      CK(cudaEventRecord(e0));
      random_read<<<rthreads / 256, 256>>>(static_cast<const unsigned long long*>(p), bytes / 8, per_thread, sink);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      CK(cudaEventElapsedTime(&b, e0, e1));
      CK(cudaGetLastError());
      if (r > 0) ts.push_back(a), tr.push_back(b);
    }
    std::sort(ts.begin(), ts.end());
    std::sort(tr.begin(), tr.end());
    std::printf("%-24s streaming %8.1f GB/s (%.3f ms)   random %8.1f M loads/s (%.3f ms)\n", what, bytes / (ts[2] * 1e6), ts[2],
                double(rthreads) * per_thread / (tr[2] * 1e3), tr[2]);
  };
  std::printf("\nreads over %.1f GiB (median of 5 after a warm-up)\n", bytes / double(1 << 30));
  {
    void* p = nullptr;
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, 1, bytes));
    time_reads(p, "cudaMalloc");
    CK(cudaFree(p));
  }
  for (std::size_t h : {std::size_t{2} << 20, std::size_t{512} << 20}) {
    CUdeviceptr b = 0;
    CU(cuMemAddressReserve(&b, bytes, 0, 0, 0));
    std::vector<CUmemGenericAllocationHandle> hs(bytes / h);
    for (std::size_t i = 0; i < hs.size(); ++i) {
      CU(cuMemCreate(&hs[i], h, &v.prop, 0));
      CU(cuMemMap(b + i * h, h, 0, hs[i], 0));
    }
    CU(cuMemSetAccess(b, bytes, &v.access, 1));
    CK(cudaMemset(reinterpret_cast<void*>(b), 1, bytes));
    const std::string what = "VMM, " + std::to_string(h >> 20) + " MiB handles";
    time_reads(reinterpret_cast<const void*>(b), what.c_str());
    CU(cuMemUnmap(b, bytes));
    for (auto x : hs) CU(cuMemRelease(x));
    CU(cuMemAddressFree(b, bytes));
  }
  return 0;
}
