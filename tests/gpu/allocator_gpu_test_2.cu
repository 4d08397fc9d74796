//! toga's allocator on the GPU, test 4: exhaustion and recovery (split from allocator_gpu_test.cu for build time).
//! allocator_gpu_test.cu's file comment describes the tests, the set-up and the hang handling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "allocator_gpu_test_common.cuh"

namespace {

using namespace ::toga::test::agpu;  // the shared harness (allocator_gpu_test_common.cuh)

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

}  // namespace
