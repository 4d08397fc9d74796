//! @file toga/tenants.hpp
//! Tenants inside one heap (issue 31; docs/usage.md §12.4): up to 64 tenants share a heap, each
//! with a quota in bytes; a tenant's allocations are charged at their served size and fail with
//! nullptr at its quota (counted as `failed_quota`, apart from the heap's own failures); a free
//! credits the tenant that allocated the block, whichever handle, thread or kernel frees it.
//!
//! How (backend-agnostic, on a Platform): every block of a heap with tenants carries a 16 B
//! *tenant header* just below the pointer handed out, `{tenant, offset to the block start, served
//! bytes}`: a request of n bytes is served with a block of n + 16 bytes (n + alignment when
//! aligned), and the pointer is the block start + 16 (+ alignment - 16). So the free finds the
//! tenant without any table, and frees through any handle of the heap. A tenant's counters are
//! one 64 B line of device memory (`tenant_table`): the charge is a fetch_add of the served
//! bytes, checked against the quota after the add and undone when it passed it, so the quota
//! is never exceeded even for an instant by a successful allocation. Within a warp the lanes are
//! decided in lane order, each charged when it fits after those before it that fit; a share that
//! did not fit is held until its group gives it back (a few instructions), during which a request
//! of the same tenant *from another warp* may fail although, after the give-back, it would have
//! fitted. A charge is undone as well
//! when the heap itself has no block (failed_heap).
//!
//! The counter updates are aggregated per warp as the allocator's own are (E1, design.md §8.1):
//! the lanes of a warp that charge one tenant at once form a group (match_any on the tenant's
//! line); its leader adds the group's total, the lanes are decided in lane order (group_fits) and
//! the leader gives back what did not fit; the statistics of the lanes that got a block, and
//! frees, are one RMW per group as well.
//!
//! Cost: with tenants, 16 B per block (a 16 B request is served from the 32 B class, 64 B from
//! 128 B, 4 KiB from an 8 KiB block), about three RMWs per warp group on the tenant's line per
//! allocation and two per free, and alignment of the returned pointer to 16 B (or to the alignment
//! asked for). A heap without tenants pays none of it: tenants have a handle type of their own
//! (toga::cuda::tenant_ref), and the allocator itself knows nothing of them.
//!
//! Thread-safety: tenant_allocate / tenant_deallocate from any number of device threads at once;
//! the quota and the counters are changed by the host only at quiescence.
#pragma once

#include <cstdint>

#include "toga/bits.hpp"
#include "toga/config.hpp"
#include "toga/group.hpp"
#include "toga/platform.hpp"

namespace toga {

inline constexpr unsigned max_tenants = 64;     //!< tenant ids 0 .. 63
inline constexpr std::uint64_t tenant_header_bytes = 16;
//! The largest alignment a tenant's request may ask for (the header keeps a 32-bit offset).
inline constexpr std::uint64_t max_tenant_alignment = std::uint64_t{1} << 31;

//! One tenant's quota and counters: one 64 B line of device memory (no false sharing between
//! tenants). Bytes are served bytes (the block sizes). Exact at quiescence.
struct alignas(64) tenant_counters {
  std::uint64_t quota = ~std::uint64_t{0};  //!< bytes; allocations past it fail (the host sets it)
  std::uint64_t used = 0;                   //!< bytes of the tenant's live blocks
  std::uint64_t high = 0;                   //!< the highest `used` (an allocation's charge, when it succeeded)
  std::uint64_t allocations = 0;            //!< successful allocations
  std::uint64_t deallocations = 0;          //!< frees of its blocks (by any handle)
  std::uint64_t failed_quota = 0;           //!< nullptr because the quota would have been exceeded
  std::uint64_t failed_heap = 0;            //!< nullptr because the heap had no block (exhaustion, its limit, too large)
  std::uint64_t reserved_ = 0;
};
static_assert(sizeof(tenant_counters) == 64);

//! The counters of every tenant of a heap (4 KiB of device memory).
struct tenant_table {
  tenant_counters t[max_tenants];
};

//! The tenant header below every pointer a heap with tenants hands out.
struct tenant_header {
  std::uint32_t tenant;  //!< who is charged
  std::uint32_t offset;  //!< pointer - block start (16, or the alignment asked for)
  std::uint64_t served;  //!< bytes charged (the block's served size)
};
static_assert(sizeof(tenant_header) == tenant_header_bytes);

//! Planted bugs of the tenant layer (the simulator's `tenants` scenario kills each; design.md
//! §20.3). `none` in every real build.
enum class tenant_bug : unsigned {
  none = 0,
  free_credits_caller = 1,          //!< a free credits the freeing handle's tenant, not the block's
  quota_checked_before_charge = 2,  //!< load, compare with the quota, then add: two lanes pass together
  charge_kept_on_heap_failure = 3,  //!< a request the heap could not serve keeps its charge
};

namespace detail {
//! The sum of `v` over the lanes of `g` (64-bit; coalesced_group::exclusive_scan is 32-bit).
template <class P>
TOGA_DEVICE std::uint64_t group_sum64(const coalesced_group<P>& g, std::uint64_t v) TOGA_NOEXCEPT(P) {
  if (g.size == 1) return v;
  std::uint64_t sum = 0;
  for (std::uint32_t m = g.mask; m; m &= m - 1) sum += P::shfl(g.mask, v, static_cast<int>(bits::ctz(m)));
  return sum;
}
//! The decision of a group's charge (every lane one tenant's, `base` the tenant's `used` before
//! the group's fetch_add of all its lanes' `served`): the lanes in rank order, each charged when it
//! fits under `quota` after the lanes before it that fit. Returns whether this lane fits, and sets
//! `before` (its charge's start) and `refused` (the bytes of the lanes that did not fit, in every
//! lane). The same as the lanes' own fetch_add-check-undo in rank order, without letting one lane
//! that does not fit turn the lanes after it away.
template <class P>
TOGA_DEVICE bool group_fits(const coalesced_group<P>& g, std::uint64_t base, std::uint64_t served, std::uint64_t quota,
                            std::uint64_t& before, std::uint64_t& refused) TOGA_NOEXCEPT(P) {
  std::uint64_t running = base;
  bool mine = false;
  refused = 0;
  for (std::uint32_t m = g.mask; m; m &= m - 1) {
    const unsigned l = bits::ctz(m);
    const std::uint64_t x = g.size == 1 ? served : P::shfl(g.mask, served, static_cast<int>(l));
    const bool fits = x <= quota && running <= quota - x;
    if (l == P::lane_id()) {
      mine = fits;
      before = running;
    }
    if (fits) running += x;
    else refused += x;
  }
  return mine;
}
//! The largest `v` over the lanes of `g`.
template <class P>
TOGA_DEVICE std::uint64_t group_max64(const coalesced_group<P>& g, std::uint64_t v) TOGA_NOEXCEPT(P) {
  if (g.size == 1) return v;
  std::uint64_t mx = 0;
  for (std::uint32_t m = g.mask; m; m &= m - 1) {
    const std::uint64_t x = P::shfl(g.mask, v, static_cast<int>(bits::ctz(m)));
    mx = x > mx ? x : mx;
  }
  return mx;
}
}  // namespace detail

//! At least `bytes` bytes (aligned to 16 B, or to `alignment`, a power of two, when not 0)
//! charged to tenant `id` of `table`, from the heap `a`; nullptr at the
//! tenant's quota, or when the heap has no block. See the file comment.
template <class P, tenant_bug Bug = tenant_bug::none, class Alloc>
TOGA_DEVICE void* tenant_allocate(const Alloc& a, tenant_table* table, std::uint32_t id, std::uint64_t bytes,
                                  std::uint64_t alignment = 0) TOGA_NOEXCEPT(P) {
  tenant_counters& t = table->t[id % max_tenants];
  std::uint64_t off = tenant_header_bytes;
  if (alignment != 0) {
    if ((alignment & (alignment - 1)) != 0) return nullptr;
    if (alignment > off) off = alignment;
  }
  if (bytes == 0) bytes = 1;  // a unique block, as the allocator's own 0-byte requests
  // Larger than the heap, or an alignment the header's 32-bit offset cannot hold (2 GiB and up
  // are refused): no charge; the heap counts it as too large.
  if (bytes > a.heap_bytes || off > a.heap_bytes - bytes || off > max_tenant_alignment) {
    (void)a.allocate(~std::uint64_t{0});  // failed_too_large
    P::fetch_add(&t.failed_heap, std::uint64_t{1}, relaxed, device_scope);
    return nullptr;
  }
  const std::uint64_t want = bytes + off;
  const std::uint64_t served = a.served_bytes(want, alignment > tenant_header_bytes ? alignment : 0);
  const std::uint64_t quota = P::load(&t.quota, relaxed, device_scope);
  const std::uint64_t key = reinterpret_cast<std::uintptr_t>(&t);
  std::uint64_t before;
  if constexpr (Bug == tenant_bug::quota_checked_before_charge) {
    before = P::load(&t.used, relaxed, device_scope);
    if (served > quota || before > quota - served) {
      P::fetch_add(&t.failed_quota, std::uint64_t{1}, relaxed, device_scope);
      return nullptr;
    }
    (void)P::fetch_add(&t.used, served, relaxed, device_scope);
  } else {
    // the charge: one fetch_add of the group's total, then each lane's decision in rank order
    // (group_fits); the leader gives back what did not fit in one fetch_sub
    const auto g = coalesced_group<P>::of(P::match_any(P::activemask(), key));  // (its own call site: the simulator groups by site)
    const std::uint64_t total = detail::group_sum64(g, served);
    std::uint64_t base = 0;
    if (g.is_leader()) base = P::fetch_add(&t.used, total, relaxed, device_scope);
    base = g.broadcast(base);
    std::uint64_t refused = 0;
    before = 0;
    const bool fits = detail::group_fits(g, base, served, quota, before, refused);
    const std::uint32_t out = g.ballot(!fits);
    if (g.is_leader() && out != 0) {
      P::fetch_sub(&t.used, refused, relaxed, device_scope);
      P::fetch_add(&t.failed_quota, std::uint64_t{bits::popc(out)}, relaxed, device_scope);
    }
    if (!fits) return nullptr;
  }
  char* block = static_cast<char*>(alignment > tenant_header_bytes ? a.allocate(want, alignment) : a.allocate(want));
  if (block == nullptr) {
    if constexpr (Bug != tenant_bug::charge_kept_on_heap_failure) P::fetch_sub(&t.used, served, relaxed, device_scope);
    P::fetch_add(&t.failed_heap, std::uint64_t{1}, relaxed, device_scope);
    return nullptr;
  }
  {
    // the statistics of the lanes that got a block: one fetch_max and one fetch_add per group
    const auto s = coalesced_group<P>::of(P::match_any(P::activemask(), key));
    const std::uint64_t high = detail::group_max64(s, before + served);
    if (s.is_leader()) {
      P::fetch_max(&t.high, high, relaxed, device_scope);
      P::fetch_add(&t.allocations, std::uint64_t{s.size}, relaxed, device_scope);
    }
  }
  char* user = block + off;
  tenant_header* h = reinterpret_cast<tenant_header*>(user - tenant_header_bytes);
  h->tenant = id % max_tenants;
  h->offset = static_cast<std::uint32_t>(off);
  h->served = served;
  return user;
}

//! Frees a block tenant_allocate returned (through any handle: `caller` is the freeing handle's
//! tenant, which the correct code does not use); nullptr: nothing.
template <class P, tenant_bug Bug = tenant_bug::none, class Alloc>
TOGA_DEVICE void tenant_deallocate(const Alloc& a, tenant_table* table, std::uint32_t caller, void* ptr) TOGA_NOEXCEPT(P) {
  if (ptr == nullptr) return;
  char* user = static_cast<char*>(ptr);
  const tenant_header* h = reinterpret_cast<const tenant_header*>(user - tenant_header_bytes);
  const std::uint32_t id = (Bug == tenant_bug::free_credits_caller ? caller : h->tenant) % max_tenants;
  const std::uint64_t served = h->served;
  char* block = user - h->offset;
  (void)caller;
  tenant_counters& t = table->t[id];
  const auto g = coalesced_group<P>::of(P::match_any(P::activemask(), std::uint64_t{reinterpret_cast<std::uintptr_t>(&t)}));
  const std::uint64_t total = detail::group_sum64(g, served);
  if (g.is_leader()) {
    P::fetch_sub(&t.used, total, relaxed, device_scope);
    P::fetch_add(&t.deallocations, std::uint64_t{g.size}, relaxed, device_scope);
  }
  a.deallocate(block);
}

}  // namespace toga
