// toga example: every thread builds a linked list in device memory, a second kernel walks and
// frees the lists, and the host prints the heap's statistics. Copy this file to start.
//
//   build/default/tools/toga-example-lists [threads] [nodes-per-thread]
#include <toga/cuda/heap.cuh>

#include <cstdio>
#include <cstdlib>

struct node {
  node* next;
  unsigned long long value;
};

// Thread t pushes `n` nodes (values t*n .. t*n+n-1) onto its own list.
__global__ void build(toga::cuda::heap_ref heap, node** heads, unsigned n, unsigned* failures) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  node* head = nullptr;
  for (unsigned i = 0; i < n; ++i) {
    node* x = static_cast<node*>(heap.allocate(sizeof(node)));
    if (x == nullptr) {  // the heap is exhausted: toga returns nullptr, never traps
      atomicAdd(failures, 1u);
      break;
    }
    x->value = static_cast<unsigned long long>(t) * n + i;
    x->next = head;
    head = x;
  }
  heads[t] = head;
}

// Walk each list, check its values, free its nodes (a different kernel from the one that
// allocated them: memory outlives kernels).
__global__ void check_and_free(toga::cuda::heap_ref heap, node** heads, unsigned n, unsigned* bad) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long expect = static_cast<unsigned long long>(t) * n + n;
  for (node* x = heads[t]; x != nullptr;) {
    if (x->value != --expect) atomicAdd(bad, 1u);
    node* next = x->next;
    heap.deallocate(x);
    x = next;
  }
}

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e = (call);                                                                  \
    if (e != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s failed: %s (%s)\n", #call, cudaGetErrorName(e), cudaGetErrorString(e)); \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)

int main(int argc, char** argv) {
  const unsigned threads = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 1u << 16;
  const unsigned n = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 32;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing to run\n");
    return 0;
  }
  try {
    toga::cuda::heap heap(256ull << 20);  // 256 MiB
    node** heads;
    unsigned* counters;
    CHECK(cudaMalloc(&heads, threads * sizeof(node*)));
    CHECK(cudaMalloc(&counters, 2 * sizeof(unsigned)));
    CHECK(cudaMemset(counters, 0, 2 * sizeof(unsigned)));
    build<<<(threads + 255) / 256, 256>>>(heap.ref(), heads, n, counters);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    const toga::heap_statistics mid = heap.stats();
    check_and_free<<<(threads + 255) / 256, 256>>>(heap.ref(), heads, n, counters + 1);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    unsigned h[2];
    CHECK(cudaMemcpy(h, counters, sizeof h, cudaMemcpyDeviceToHost));
    const toga::heap_statistics end = heap.stats();
    std::printf("%u threads x %u nodes of %zu B: %u allocation failures, %u bad values\n", threads, n, sizeof(node), h[0], h[1]);
    std::printf("after build: %llu B in use in %llu blocks, %llu chunks of 512 KiB\n",
                static_cast<unsigned long long>(mid.used_bytes), static_cast<unsigned long long>(mid.allocations - mid.deallocations),
                static_cast<unsigned long long>(mid.chunks));
    std::printf("after free:  %llu B in use, %llu allocations, %llu deallocations, peak <= %llu B\n",
                static_cast<unsigned long long>(end.used_bytes), static_cast<unsigned long long>(end.allocations),
                static_cast<unsigned long long>(end.deallocations), static_cast<unsigned long long>(end.peak_used_bytes));
    CHECK(cudaFree(heads));
    CHECK(cudaFree(counters));
    return h[0] == 0 && h[1] == 0 && end.used_bytes == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "toga example: %s\n", e.what());
    return 1;
  }
}
