// vmm-during-kernel: does compute-sanitizer's memcheck accept writes into VMM memory that was
// mapped while the writing kernel already ran? (The growth service maps granules while kernels
// run; memcheck reported the test kernel's writes into such granules as out of bounds, inside
// allocations it knows: docs/benchmarks.md, "Growth while the kernel runs".) Not part of the CMake
// build. On the GPU machine:
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 tools/gpu/vmm-during-kernel.cu -lcuda -o vmm-during-kernel
//   ./vmm-during-kernel && compute-sanitizer --tool memcheck ./vmm-during-kernel
// Two cases, each a kernel of 64 x 256 threads that waits for a flag in mapped pinned memory and
// then writes and reads back one 8 B word per 4 KiB page of a 32 MiB VMM handle:
//   before: the handle is mapped (cuMemCreate, cuMemMap, cuMemSetAccess) before the launch;
//   during: the kernel is launched first, and mapped by the host while the kernel spins.
// Prints each case's mismatches and whether the kernel was still running when the mapping
// returned. If memcheck reports errors for "during" only, they are its limit, not toga's.
// Exit status: 0 both cases clean, 1 a CUDA error (named) or a mismatch.
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

namespace {

#define CU(x) check_cu((x), #x, __LINE__)
#define RT(x) check_rt((x), #x, __LINE__)

bool check_cu(CUresult r, const char* what, int line) {
  if (r == CUDA_SUCCESS) return true;
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::fprintf(stderr, "vmm-during-kernel: %s failed: %s (line %d)\n", what, name ? name : "?", line);
  std::exit(1);
}
bool check_rt(cudaError_t r, const char* what, int line) {
  if (r == cudaSuccess) return true;
  std::fprintf(stderr, "vmm-during-kernel: %s failed: %s (line %d)\n", what, cudaGetErrorName(r), line);
  std::exit(1);
}

constexpr std::uint64_t handle_bytes = std::uint64_t{32} << 20;
constexpr std::uint64_t page = 4096;

__global__ void write_after_flag(volatile unsigned* go, std::uint64_t* base, unsigned long long* bad) {
  while (*go == 0) __nanosleep(1000);
  __threadfence_system();
  const std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  const std::uint64_t pages = handle_bytes / page;
  for (std::uint64_t i = t; i < pages; i += std::uint64_t{gridDim.x} * blockDim.x) {
    std::uint64_t* w = base + i * (page / 8);
    *w = i * 2654435761u + 1;
    if (*w != i * 2654435761u + 1) atomicAdd(bad, 1ull);
  }
}

struct vmm {
  CUdeviceptr base = 0;
  CUmemGenericAllocationHandle h{};
  int dev = 0;
  void reserve() { CU(cuMemAddressReserve(&base, handle_bytes, handle_bytes, 0, 0)); }
  void map() {
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    CU(cuMemCreate(&h, handle_bytes, &p, 0));
    CU(cuMemMap(base, handle_bytes, 0, h, 0));
    CUmemAccessDesc d{};
    d.location = p.location;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(base, handle_bytes, &d, 1));
  }
  void release() {
    CU(cuMemUnmap(base, handle_bytes));
    CU(cuMemRelease(h));
    CU(cuMemAddressFree(base, handle_bytes));
  }
};

// Returns the mismatches; `running` tells whether the kernel still ran when the mapping returned.
unsigned long long run_case(bool map_during, bool& running) {
  vmm v;
  RT(cudaGetDevice(&v.dev));
  v.reserve();
  if (!map_during) v.map();
  unsigned* go = nullptr;
  RT(cudaHostAlloc(reinterpret_cast<void**>(&go), sizeof(unsigned), cudaHostAllocMapped));
  *go = 0;
  unsigned* go_dev = nullptr;
  RT(cudaHostGetDevicePointer(reinterpret_cast<void**>(&go_dev), go, 0));
  unsigned long long* bad = nullptr;
  RT(cudaMalloc(&bad, sizeof *bad));
  RT(cudaMemset(bad, 0, sizeof *bad));
  cudaStream_t s;
  RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  write_after_flag<<<64, 256, 0, s>>>(go_dev, reinterpret_cast<std::uint64_t*>(v.base), bad);
  RT(cudaGetLastError());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (map_during) v.map();
  running = cudaStreamQuery(s) == cudaErrorNotReady;
  __atomic_store_n(go, 1u, __ATOMIC_RELEASE);
  RT(cudaStreamSynchronize(s));
  unsigned long long n = 0;
  RT(cudaMemcpy(&n, bad, sizeof n, cudaMemcpyDeviceToHost));
  RT(cudaStreamDestroy(s));
  RT(cudaFree(bad));
  RT(cudaFreeHost(go));
  v.release();
  return n;
}

}  // namespace

int main(int argc, char**) {
  if (argc > 1) {
    std::fprintf(stderr, "usage: vmm-during-kernel (no options)\n");
    return 2;
  }
  CU(cuInit(0));
  RT(cudaFree(nullptr));
  bool r0 = false, r1 = false;
  const unsigned long long b0 = run_case(false, r0), b1 = run_case(true, r1);
  std::printf("before: %llu mismatches (kernel running at the mapping: n/a)\n", b0);
  std::printf("during: %llu mismatches (kernel still running when the mapping returned: %s)\n", b1, r1 ? "yes" : "no");
  return b0 == 0 && b1 == 0 && r1 ? 0 : 1;
}
