// Tenants inside one heap on a real GPU (issue 31; toga/tenants.hpp, docs/usage.md §12.4): 8
// tenants whose quotas sum past the heap each stop at their quota (or at the heap's end), with
// no corrupt block; per-tenant statistics equal a host-side recount of the live blocks; frees
// through another tenant's handle credit the block's tenant; a quota changed between launches;
// bad tenant ids and quotas refused. Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gpu_test_support.cuh"
#include "toga/cuda/heap.cuh"

namespace {

constexpr std::uint64_t MiB = 1ull << 20;
constexpr unsigned tenants = 8;
constexpr std::size_t bytes = 1008;  // + the 16 B header: served with 1 KiB blocks
constexpr std::uint64_t served = 1024;

struct handles {
  toga::cuda::tenant_ref h[tenants];
};

// Thread i allocates `per` blocks as tenant i % 8 into out[i * per + k], stamping each block's
// first and last words with its slot index.
__global__ void tenant_alloc_k(handles hs, void** out, std::uint64_t threads, unsigned per) {
  const std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (i >= threads) return;
  const toga::cuda::tenant_ref& h = hs.h[i % tenants];
  for (unsigned k = 0; k < per; ++k) {
    void* p = h.allocate(bytes);
    out[i * per + k] = p;
    if (p) {
      static_cast<std::uint64_t*>(p)[0] = i * per + k;
      static_cast<std::uint64_t*>(p)[bytes / 8 - 1] = i * per + k;
    }
  }
}
// Frees every block through tenant (i + 3) % 8's handle (another tenant's); `wrong` counts
// blocks whose stamps were overwritten.
__global__ void tenant_free_k(handles hs, void** out, std::uint64_t threads, unsigned per, unsigned long long* wrong) {
  const std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (i >= threads) return;
  const toga::cuda::tenant_ref& h = hs.h[(i + 3) % tenants];
  for (unsigned k = 0; k < per; ++k) {
    void* p = out[i * per + k];
    if (!p) continue;
    if (static_cast<std::uint64_t*>(p)[0] != i * per + k || static_cast<std::uint64_t*>(p)[bytes / 8 - 1] != i * per + k)
      atomicAdd(wrong, 1ull);
    h.deallocate(p);
    out[i * per + k] = nullptr;
  }
}

}  // namespace

TEST(Tenants, EightTenantsStopAtTheirQuotasAndMatchARecount) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap_options o;
  o.tenants = true;
  toga::cuda::heap heap(64 * MiB, o);
  ASSERT_TRUE(heap.has_tenants());
  // quotas (t + 1) x 2 MiB: 72 MiB in all, past the 64 MiB heap; every tenant asks for twice its quota
  const toga::cuda::tenant_ref t0 = heap.tenant(0);
  handles hs{{t0, t0, t0, t0, t0, t0, t0, t0}};
  std::uint64_t quota[tenants];
  for (unsigned t = 0; t < tenants; ++t) {
    quota[t] = (t + 1) * 2 * MiB;
    hs.h[t] = heap.tenant(t, quota[t]);
    EXPECT_EQ(hs.h[t].tenant(), t);
  }
  const unsigned per = 8;
  const std::uint64_t threads = 2 * 72 * MiB / served / per;  // 2x the quotas' blocks
  toga::test::device_buffer<void*> out;
  TOGA_TEST_CUDA(cudaMalloc(&out.ptr, threads * per * sizeof(void*)));
  out.n = threads * per;
  toga::test::device_buffer<unsigned long long> wrong;
  TOGA_TEST_CUDA(cudaMalloc(&wrong.ptr, sizeof(unsigned long long)));
  TOGA_TEST_CUDA(cudaMemset(wrong.ptr, 0, sizeof(unsigned long long)));
  tenant_alloc_k<<<static_cast<unsigned>((threads + 255) / 256), 256>>>(hs, out.ptr, threads, per);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  // the host's recount: live blocks per tenant
  std::vector<void*> host(threads * per);
  TOGA_TEST_CUDA(cudaMemcpy(host.data(), out.ptr, host.size() * sizeof(void*), cudaMemcpyDeviceToHost));
  std::uint64_t live[tenants] = {}, asked[tenants] = {};
  for (std::uint64_t i = 0; i < host.size(); ++i) {
    ++asked[(i / per) % tenants];
    if (host[i]) ++live[(i / per) % tenants];
  }
  std::uint64_t total = 0;
  for (unsigned t = 0; t < tenants; ++t) {
    const toga::tenant_counters c = heap.tenant_stats(t);
    std::printf("[ tenant %u ] quota %llu B: used %llu B (%llu blocks), high %llu B, %llu allocations, %llu failed at the quota, %llu at the heap\n", t,
                static_cast<unsigned long long>(c.quota), static_cast<unsigned long long>(c.used), static_cast<unsigned long long>(live[t]),
                static_cast<unsigned long long>(c.high), static_cast<unsigned long long>(c.allocations),
                static_cast<unsigned long long>(c.failed_quota), static_cast<unsigned long long>(c.failed_heap));
    EXPECT_EQ(c.quota, quota[t]);
    EXPECT_EQ(c.used, live[t] * served) << "tenant " << t << ": counters against the host's recount";
    EXPECT_EQ(c.allocations, live[t]);
    EXPECT_EQ(c.failed_quota + c.failed_heap, asked[t] - live[t]);
    EXPECT_LE(c.used, quota[t]);
    EXPECT_LE(c.high, quota[t]);
    if (c.failed_heap == 0) EXPECT_EQ(c.used, quota[t]) << "tenant " << t << " stopped below its quota with the heap not full";
    total += c.used;
  }
  EXPECT_LE(total, heap.capacity());
  toga::cuda::heap_attributes a = heap.attributes();
  EXPECT_EQ(a.used_mem_current, total) << "every live block is charged to one tenant";
  std::uint64_t fq = 0;
  for (unsigned t = 0; t < tenants; ++t) fq += heap.tenant_stats(t).failed_quota;
  EXPECT_EQ(a.failed_quota, fq);
  // frees through other tenants' handles credit the blocks' tenants
  tenant_free_k<<<static_cast<unsigned>((threads + 255) / 256), 256>>>(hs, out.ptr, threads, per, wrong.ptr);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  unsigned long long bad = 0;
  TOGA_TEST_CUDA(cudaMemcpy(&bad, wrong.ptr, sizeof bad, cudaMemcpyDeviceToHost));
  EXPECT_EQ(bad, 0u) << "corrupt blocks";
  for (unsigned t = 0; t < tenants; ++t) {
    const toga::tenant_counters c = heap.tenant_stats(t);
    EXPECT_EQ(c.used, 0u) << "tenant " << t;
    EXPECT_EQ(c.deallocations, live[t]) << "tenant " << t;
  }
  const auto err = heap.check();
  EXPECT_FALSE(err.has_value()) << *err;
  // a quota changed between launches: tenant 2 down to 1 MiB, everyone asks again
  hs.h[2] = heap.tenant(2, MiB);
  tenant_alloc_k<<<static_cast<unsigned>((threads + 255) / 256), 256>>>(hs, out.ptr, threads, per);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  EXPECT_LE(heap.tenant_stats(2).used, MiB);
  EXPECT_LE(heap.tenant_stats(2).high, 6 * MiB) << "the high-water mark keeps the first launch's peak";
  tenant_free_k<<<static_cast<unsigned>((threads + 255) / 256), 256>>>(hs, out.ptr, threads, per, wrong.ptr);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  for (unsigned t = 0; t < tenants; ++t) EXPECT_EQ(heap.tenant_stats(t).used, 0u);
  // reset keeps the quotas and zeroes the counters
  heap.reset();
  EXPECT_EQ(heap.tenant_stats(2).quota, MiB);
  EXPECT_EQ(heap.tenant_stats(2).allocations, 0u);
  // quotas the heap can hold (36 MiB of 64): every tenant stops exactly at its quota, none at the heap
  for (unsigned t = 0; t < tenants; ++t) hs.h[t] = heap.tenant(t, (t + 1) * MiB);
  tenant_alloc_k<<<static_cast<unsigned>((threads + 255) / 256), 256>>>(hs, out.ptr, threads, per);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  for (unsigned t = 0; t < tenants; ++t) {
    const toga::tenant_counters c = heap.tenant_stats(t);
    std::printf("[ tenant %u ] quota %llu B: used %llu B, %llu failed at the quota, %llu at the heap\n", t,
                static_cast<unsigned long long>(c.quota), static_cast<unsigned long long>(c.used),
                static_cast<unsigned long long>(c.failed_quota), static_cast<unsigned long long>(c.failed_heap));
    EXPECT_EQ(c.used, (t + 1) * MiB) << "tenant " << t << " did not stop exactly at its quota";
    EXPECT_EQ(c.failed_heap, 0u) << "tenant " << t;
  }
  tenant_free_k<<<static_cast<unsigned>((threads + 255) / 256), 256>>>(hs, out.ptr, threads, per, wrong.ptr);
  TOGA_TEST_CUDA(cudaDeviceSynchronize());
  TOGA_TEST_CUDA(cudaMemcpy(&bad, wrong.ptr, sizeof bad, cudaMemcpyDeviceToHost));
  EXPECT_EQ(bad, 0u) << "corrupt blocks";
  for (unsigned t = 0; t < tenants; ++t) EXPECT_EQ(heap.tenant_stats(t).used, 0u);
  const auto err2 = heap.check();
  EXPECT_FALSE(err2.has_value()) << *err2;
}

TEST(Tenants, BadTenantsAndQuotasAreRefused) {
  TOGA_TEST_REQUIRE_GPU();
  toga::cuda::heap plain(16 * MiB);
  EXPECT_FALSE(plain.has_tenants());
  const auto message = [](auto f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(no std::invalid_argument)");
  };
  EXPECT_NE(message([&] { plain.tenant(1, MiB); }).find("heap_options::tenants"), std::string::npos);
  toga::cuda::heap_options o;
  o.tenants = true;
  toga::cuda::heap h(16 * MiB, o);
  EXPECT_NE(message([&] { h.tenant(64, MiB); }).find("tenant id 64 is not in [0, 63]"), std::string::npos);
  EXPECT_NE(message([&] { h.tenant(3, 0); }).find("quota_bytes 0 for tenant 3 is not in [1, 16777216]"), std::string::npos);
  EXPECT_NE(message([&] { h.tenant(3, 32 * MiB); }).find("is not in [1, 16777216]"), std::string::npos);
  EXPECT_EQ(h.tenant_stats(3).quota, ~std::uint64_t{0}) << "a refused quota changes nothing";
  EXPECT_NO_THROW(h.tenant(63, 16 * MiB));
  // a heap with tenants has no heap_ref and cannot be the default heap
  EXPECT_THROW((void)h.ref(), std::logic_error);
  EXPECT_THROW(toga::cuda::set_default_heap(h), std::logic_error);
}
