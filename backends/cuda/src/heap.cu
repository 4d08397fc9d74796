// toga::cuda::heap: upstream memory, initialisation by kernels, statistics and reset; the
// registry of default-heap slots (one per translation unit that includes heap.cuh).
#include "toga/cuda/heap.cuh"

#include <cuda.h>  // the VMM API of growable heaps (cuMemCreate, cuMemMap, ...), called through
                   // cudaGetDriverEntryPointByVersion: no link to libcuda, so that toga's binaries
                   // start (and their GPU tests skip) on machines with the toolkit but no driver

#include <algorithm>
#include <array>
#include <random>
#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include <sys/mman.h>  // heap::check's host copy of the range
#include <unistd.h>    // close, getpid (shared heaps)

namespace toga::cuda {
namespace {

#define TOGA_CUDA_TRY(call)                                                                          \
  do {                                                                                               \
    const cudaError_t toga_e_ = (call);                                                              \
    if (toga_e_ != cudaSuccess) throw ::toga::cuda_error(toga_e_, std::string(#call) + " at " + __FILE__ + ":" + std::to_string(__LINE__)); \
  } while (0)

__global__ void init_kernel(device_allocator a, std::uint64_t limit, std::uint64_t presplit) { a.init_after_zero(limit, presplit); }
__global__ void trim_kernel(device_allocator a) { a.trim(); }
__global__ void init_growable_kernel(device_allocator a, std::uint64_t limit, unsigned granule_order) {
  a.init_growable(limit, granule_order);
}
// One thread per granule: adoption is safe while others adopt, allocate and free (design.md §12.1).
__global__ void adopt_published_kernel(device_allocator a, toga::growth_mailbox* m) {  // quiescent: what no waiter adopted
  const std::uint64_t want = platform::load(&m->published, toga::acquire, toga::system_scope);
  (void)toga::growth_waiter<platform>::adopt_published(&a.globals->growth.relay, m, want, [&](std::uint64_t e) { return a.adopt_entry(e); },
                                                       ~std::uint64_t{0});
}
__global__ void adopt_kernel(device_allocator a, const std::uint64_t* offsets, std::uint64_t n, unsigned long long* refused) {
  const std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (i < n && !a.adopt_granule(offsets[i])) atomicAdd(refused, 1ull);
}
// A quiescent trim (allocator::trim_granules) in phases (tbuddy.hpp, before trim_prepare): the
// phases over every node of one height run one thread per node, a kernel per height; a single
// thread walking the whole tree took minutes on a 16 GiB heap.
__global__ void trim_begin_kernel(device_allocator a) {  // reclaim, phase 0 (one thread; phase 1 per height below)
  a.trim();
  a.small.buddy.zero_semaphores_quiescent();
}
__global__ void merge_height_kernel(device_allocator a, std::uint64_t first) {  // phase 1, one height
  const std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (i < first) a.small.buddy.merge_free_children(first + i);
}
__global__ void withdraw_kernel(device_allocator a, std::uint64_t keep_bytes, std::uint64_t* out, std::uint64_t* count,
                                const std::uint8_t* run_log2) {  // phase 2, whole runs of granules
  std::uint64_t n = 0;
  a.withdraw_granules_phase(keep_bytes, [&](std::uint64_t off) { out[n++] = off; }, run_log2);
  *count = n;
}
__global__ void derive_height_kernel(device_allocator a, std::uint64_t first) {  // phase 3, one height
  const std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (i < first) a.small.buddy.derive_split(first + i);
}
__global__ void count_height_kernel(device_allocator a, std::uint64_t first, unsigned long long* count) {  // the recount, one height
  const std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  const int n = __syncthreads_count(i < first && a.small.buddy.load_state(first + i) == toga::node_available);
  if (threadIdx.x == 0 && n) atomicAdd(count, static_cast<unsigned long long>(n));
}
__global__ void store_counts_kernel(device_allocator a, const unsigned long long* counts) {
  for (unsigned h = 0; h < a.small.buddy.levels; ++h) a.small.buddy.sem[h].store_quiescent(counts[h]);
}

//! Makes `device` current for its lifetime and restores the caller's device afterwards, so that
//! a program with heaps on several GPUs keeps launching where it meant to.
class device_guard {
 public:
  explicit device_guard(int device) {
    TOGA_CUDA_TRY(cudaGetDevice(&previous_));
    if (previous_ != device) {
      TOGA_CUDA_TRY(cudaSetDevice(device));
      changed_ = true;
    }
  }
  ~device_guard() {
    if (changed_) (void)cudaSetDevice(previous_);
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

//! The driver functions growable heaps use, looked up once through the runtime (which loads the
//! driver itself): a program that never makes a growable heap never needs them.
struct driver_api {
  decltype(&cuGetErrorName) get_error_name = nullptr;
  decltype(&cuGetErrorString) get_error_string = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&cuMemGetAllocationGranularity) mem_get_allocation_granularity = nullptr;
  decltype(&cuMemAddressReserve) mem_address_reserve = nullptr;
  decltype(&cuMemAddressFree) mem_address_free = nullptr;
  decltype(&cuMemCreate) mem_create = nullptr;
  decltype(&cuMemMap) mem_map = nullptr;
  decltype(&cuMemSetAccess) mem_set_access = nullptr;
  decltype(&cuMemUnmap) mem_unmap = nullptr;
  decltype(&cuMemRelease) mem_release = nullptr;
  decltype(&cuMemExportToShareableHandle) mem_export = nullptr;
  decltype(&cuMemImportFromShareableHandle) mem_import = nullptr;
  decltype(&cuMemGetAllocationPropertiesFromHandle) mem_properties = nullptr;
};

template <class F>
void driver_entry(const char* name, F& f) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, CUDART_VERSION, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || p == nullptr) {
    (void)cudaGetLastError();
    throw std::runtime_error(std::string("toga::cuda::heap: the CUDA driver has no ") + name + " for CUDA " + std::to_string(CUDART_VERSION) +
                             " (" + cudaGetErrorName(e) + "); growable heaps need a driver with the VMM API (CUDA 10.2 or later)");
  }
  f = reinterpret_cast<F>(p);
}

//! The table, filled on first use (thread-safe; throws std::runtime_error when a function is missing).
const driver_api& driver() {
  static const driver_api api = [] {
    driver_api a;
    driver_entry("cuGetErrorName", a.get_error_name);
    driver_entry("cuGetErrorString", a.get_error_string);
    driver_entry("cuDeviceGet", a.device_get);
    driver_entry("cuDeviceGetAttribute", a.device_get_attribute);
    driver_entry("cuMemGetAllocationGranularity", a.mem_get_allocation_granularity);
    driver_entry("cuMemAddressReserve", a.mem_address_reserve);
    driver_entry("cuMemAddressFree", a.mem_address_free);
    driver_entry("cuMemCreate", a.mem_create);
    driver_entry("cuMemMap", a.mem_map);
    driver_entry("cuMemSetAccess", a.mem_set_access);
    driver_entry("cuMemUnmap", a.mem_unmap);
    driver_entry("cuMemRelease", a.mem_release);
    driver_entry("cuMemExportToShareableHandle", a.mem_export);
    driver_entry("cuMemImportFromShareableHandle", a.mem_import);
    driver_entry("cuMemGetAllocationPropertiesFromHandle", a.mem_properties);
    return a;
  }();
  return api;
}

//! The CUDA virtual memory management API as a toga growth provider (toga/growth.hpp): device
//! memory handles of one device, read-write for that device. Needs the device current.
struct vmm_provider {
  using handle_type = CUmemGenericAllocationHandle;
  int device = 0;
  std::uint64_t gran = 0;  // cuMemGetAllocationGranularity (minimum)

  static std::string describe(CUresult r) {
    const char* name = nullptr;
    const char* text = nullptr;
    (void)driver().get_error_name(r, &name);
    (void)driver().get_error_string(r, &text);
    return std::string(name ? name : "CUDA driver error") + " (" + (text ? text : "?") + ")";
  }
  CUmemAllocationProp prop(toga::memory_tier tier = toga::memory_tier::device) const {
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    if (tier == toga::memory_tier::host) {
      p.location.type = CU_MEM_LOCATION_TYPE_HOST;  // (the id is ignored for host allocations)
      p.location.id = 0;
    } else {
      p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      p.location.id = device;
    }
    return p;
  }
  //! Host allocations need a driver that makes them (cuMemCreate with a host location, CUDA 12.2+
  //! drivers on Linux) and a granularity that divides toga's granules.
  bool supports(toga::memory_tier tier, std::string& why) const {
    if (tier == toga::memory_tier::device) return true;
    const CUmemAllocationProp p = prop(tier);
    size_t g = 0;
    const CUresult r = driver().mem_get_allocation_granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS) {
      why = "cuMemGetAllocationGranularity for host memory: " + describe(r);
      return false;
    }
    host_gran = g;
    return true;
  }
  mutable std::uint64_t host_gran = 0;  // (supports(host) fills it)
  std::uint64_t granularity() const { return gran; }
  char* reserve(std::uint64_t bytes, std::uint64_t alignment, std::string& err) {
    CUdeviceptr p = 0;
    const CUresult r = driver().mem_address_reserve(&p, bytes, alignment, 0, 0);
    if (r != CUDA_SUCCESS) {
      err = "cuMemAddressReserve: " + describe(r);
      return nullptr;
    }
    return reinterpret_cast<char*>(p);
  }
  void unreserve(char* base, std::uint64_t bytes) noexcept { (void)driver().mem_address_free(reinterpret_cast<CUdeviceptr>(base), bytes); }
  bool create(std::uint64_t bytes, handle_type& h, std::string& err, toga::memory_tier tier = toga::memory_tier::device) {
    const CUmemAllocationProp p = prop(tier);
    const CUresult r = driver().mem_create(&h, bytes, &p, 0);
    if (r != CUDA_SUCCESS) err = "cuMemCreate: " + describe(r);
    return r == CUDA_SUCCESS;
  }
  bool map(char* at, std::uint64_t bytes, const handle_type& h, std::string& err) {
    const CUresult r = driver().mem_map(reinterpret_cast<CUdeviceptr>(at), bytes, 0, h, 0);
    if (r != CUDA_SUCCESS) err = "cuMemMap: " + describe(r);
    return r == CUDA_SUCCESS;
  }
  bool set_access(char* at, std::uint64_t bytes, std::string& err) {
    CUmemAccessDesc d{};
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = device;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    const CUresult r = driver().mem_set_access(reinterpret_cast<CUdeviceptr>(at), bytes, &d, 1);
    if (r != CUDA_SUCCESS) err = "cuMemSetAccess: " + describe(r);
    return r == CUDA_SUCCESS;
  }
  void unmap(char* at, std::uint64_t bytes) noexcept { (void)driver().mem_unmap(reinterpret_cast<CUdeviceptr>(at), bytes); }
  void release(const handle_type& h) noexcept { (void)driver().mem_release(h); }
};

}  // namespace

//! A growable heap's host side: its VMM range and granules, and a device buffer of granule
//! offsets (adopt's input, trim's output) with a count after it.
//! With heap_options::growth_service, also the service: its mailbox in mapped pinned memory (the
//! kernels' and the service's words, toga/growth_service.hpp) and its thread. It lives behind a
//! pointer, so the thread's `this` survives a move of the heap.
struct growth_impl {
  toga::growth_controller<vmm_provider> ctl;
  std::uint64_t* scratch = nullptr;  // granules + 2 + max_levels words, then the run table (a byte per granule)
  toga::growth_mailbox* mailbox = nullptr;       // host address (cudaHostAlloc, mapped)
  toga::growth_mailbox* mailbox_dev = nullptr;   // the same memory as kernels address it
  toga::service_cursor cursor{};
  int device = 0;
  toga::service_thread service;
  ~growth_impl() {
    service.stop();  // waiting requests give up; no round runs from here on (before the granules go)
    if (scratch) (void)cudaFree(scratch);
    if (mailbox) (void)cudaFreeHost(mailbox);
  }
  // One round of the service (growth_controller::serve), on the service's thread, under its lock.
  bool round() {
    static thread_local int current = -1;
    if (current != device) {  // the driver calls need the device's primary context on this thread
      if (cudaSetDevice(device) != cudaSuccess) return false;
      current = device;
    }
    return ctl.serve(mailbox, cursor);
  }
  // The service's lock, when it runs: the heap's host calls never run beside a round.
  std::unique_lock<std::mutex> hold() { return service.running() ? service.lock() : std::unique_lock<std::mutex>(); }
};

//! A shareable or imported heap's VMM pieces in this process: the two handles, their mappings,
//! and (importers) the private resident copy of the view. Released in the reverse order.
struct heap::share_impl {
  toga::share_descriptor d{};
  bool imported = false;
  CUmemGenericAllocationHandle handle[2] = {0, 0};  // heap, metadata
  bool has_handle[2] = {false, false};
  char* va[2] = {nullptr, nullptr};
  std::uint64_t bytes[2] = {0, 0};
  bool mapped[2] = {false, false};
  void* resident = nullptr;  // importers: cudaMalloc'd copy of the view (the metadata's holds the exporter's addresses)
  ~share_impl() {
    if (resident) (void)cudaFree(resident);
    for (int i = 1; i >= 0; --i) {
      if (mapped[i]) driver().mem_unmap(reinterpret_cast<CUdeviceptr>(va[i]), bytes[i]);
      if (va[i]) driver().mem_address_free(reinterpret_cast<CUdeviceptr>(va[i]), bytes[i]);
      if (has_handle[i]) driver().mem_release(handle[i]);
    }
  }
  //! Reserves a range for handle i, maps it read-write for `device`; "" or what failed.
  std::string map(int i, int device) {
    CUdeviceptr p = 0;
    CUresult r = driver().mem_address_reserve(&p, bytes[i], 0, 0, 0);
    if (r != CUDA_SUCCESS) return "cuMemAddressReserve of " + std::to_string(bytes[i]) + " B: " + vmm_provider::describe(r);
    va[i] = reinterpret_cast<char*>(p);
    r = driver().mem_map(p, bytes[i], 0, handle[i], 0);
    if (r != CUDA_SUCCESS) return "cuMemMap of " + std::to_string(bytes[i]) + " B: " + vmm_provider::describe(r);
    mapped[i] = true;
    CUmemAccessDesc a{};
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = device;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = driver().mem_set_access(p, bytes[i], &a, 1);
    if (r != CUDA_SUCCESS) return "cuMemSetAccess: " + vmm_provider::describe(r);
    return "";
  }
};

namespace {

//! The default-heap slots of every translation unit (their host shadows), and which heap (by its
//! metadata address, which a move does not change) is the default of each device.
struct default_registry {
  std::mutex m;
  std::vector<const void*> slots;
  std::map<int, const char*> current;  // device -> meta_ of its default heap
};
default_registry& registry() {
  static default_registry r;  // constructed on first use: safe from static initialisers
  return r;
}

//! Writes `slot` into every registered copy on the current device, then waits for the copies.
void write_slots(const detail::default_heap_slot& slot, const std::vector<const void*>& slots) {
  for (const void* symbol : slots)
    TOGA_CUDA_TRY(cudaMemcpyToSymbol(symbol, &slot, sizeof slot, 0, cudaMemcpyHostToDevice));
  TOGA_CUDA_TRY(cudaDeviceSynchronize());
}

// Statistics live in the arena arrays (UAlloc's, then the superbins') and the globals at the end of
// the metadata block: copy only that region and read it through a host view whose arena and globals pointers point into it.
struct stats_region {
  std::vector<std::uint64_t> bytes;
  device_allocator view{};
};

stats_region fetch_stats(const device_allocator& dev, const toga::heap_layout& layout, char* meta, cudaStream_t s) {
  stats_region r;
  const std::uint64_t n = layout.bytes - layout.arena_off;
  r.bytes.resize(n / 8 + 1);
  TOGA_CUDA_TRY(cudaMemcpyAsync(r.bytes.data(), meta + layout.arena_off, n, cudaMemcpyDeviceToHost, s));
  TOGA_CUDA_TRY(cudaStreamSynchronize(s));
  r.view = dev;
  char* base = reinterpret_cast<char*>(r.bytes.data());
  r.view.small.arenas = reinterpret_cast<toga::arena<platform>*>(base);
  r.view.small.peer = base + (layout.sb_arena_off - layout.arena_off);  // the superbin arenas (super())
  r.view.globals = reinterpret_cast<toga::heap_globals*>(base + (layout.globals_off - layout.arena_off));
  return r;
}

//! The layout of a heap of `levels` levels for `o` on `device` (arenas, superbins, sharing);
//! std::invalid_argument for an option out of range.
toga::heap_layout make_layout(const heap_options& o, unsigned levels, int device) {
  unsigned arenas = o.arenas;
  if (arenas == 0) {
    // One arena per SM, but at most one per 4 chunks of heap: every arena must be able to hold
    // chunks (a 64 MiB heap has 128 chunks; 132 arenas would leave SMs with none).
    int sms = 0;
    TOGA_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const std::uint64_t by_size = (toga::geom::page_bytes << (levels - 1)) / (4 * toga::geom::chunk_bytes);
    arenas = static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(static_cast<std::uint64_t>(sms), by_size)));
  }
  int sb_shift = -1;  // toga's choice
  if (o.superbin_bytes != 0) {
    const std::uint64_t sb = o.superbin_bytes;
    const std::uint64_t lo = std::uint64_t{1} << 13, hi = std::uint64_t{1} << toga::geom::sb_max_shift;
    if ((sb & (sb - 1)) != 0 || sb < lo || sb > hi || sb >= (toga::geom::page_bytes << (levels - 1)))
      throw std::invalid_argument("toga::cuda::heap: superbin_bytes " + std::to_string(sb) +
                                  " is not a power of two in [8 KiB, 2 MiB] below the heap size; use 0 for toga's choice");
    sb_shift = static_cast<int>(toga::bits::ctz(sb));
  }
  if (o.superbin_sharing > 1024)
    throw std::invalid_argument("toga::cuda::heap: superbin_sharing " + std::to_string(o.superbin_sharing) +
                                " is not in [0, 1024] (SMs per superbin arena); use 0 for one superbin arena per SM");
  const unsigned k = o.superbin_sharing > 1 ? o.superbin_sharing : 1;
  return toga::heap_layout::make<platform>(levels, arenas, sb_shift, (arenas + k - 1) / k);
}

}  // namespace

heap::heap(std::uint64_t bytes, heap_options options) : options_(options) {
  if (options.spill != toga::spill_policy::never)
    throw std::invalid_argument("toga::cuda::heap: spill " + std::string(toga::to_string(options.spill)) +
                                " was given for a fixed heap, which maps no granules; make a growable heap (heap(heap_options) with max_bytes) or leave spill at never");
  if (options.growth_service)
    throw std::invalid_argument("toga::cuda::heap: growth_service was asked for a fixed heap, which never grows; make a growable heap "
                                "(heap(heap_options) with max_bytes) or leave growth_service off");
  if (bytes == 0 || bytes > toga::heap_layout::max_heap_bytes)
    throw std::invalid_argument("toga::cuda::heap: size " + std::to_string(bytes) + " B is not in [1, " +
                                std::to_string(toga::heap_layout::max_heap_bytes) + "] (128 GiB); ask for a smaller heap");
  if (options_.max_bytes != 0)
    throw std::invalid_argument("toga::cuda::heap: max_bytes is set (a growable heap) but a size was given (a fixed heap); "
                                "construct with heap(options) and options.initial_bytes instead");
  if (options_.initial_bytes != 0 || options_.headroom_bytes != 0 || options_.granule_bytes != 0 || options_.max_run_bytes != 0 ||
      options_.release_threshold != ~std::uint64_t{0})
    throw std::invalid_argument("toga::cuda::heap: initial_bytes, headroom_bytes, granule_bytes, max_run_bytes and release_threshold apply to growable "
                                "heaps only; set max_bytes and construct with heap(options), or leave them at their defaults");
  if (options_.system_scope && options_.tenants)
    throw std::invalid_argument("toga::cuda::heap: system_scope and tenants do not go together (tenant handles use device scope); "
                                "leave one of them off");
  if (options_.shareable && (options_.pool || options_.tenants))
    throw std::invalid_argument(std::string("toga::cuda::heap: shareable heaps take their memory from cuMemCreate and cannot ") +
                                (options_.pool ? "take a memory pool; leave options.pool null" : "have tenants; leave options.tenants off") +
                                " or make a private heap");
  if (options_.device < 0) TOGA_CUDA_TRY(cudaGetDevice(&options_.device));
  device_ = options_.device;
  device_guard guard(device_);
  layout_ = make_layout(options_, toga::heap_layout::levels_for(bytes), device_);
  const std::uint64_t heap_bytes = toga::geom::page_bytes << (layout_.levels - 1);
  const std::uint64_t upstream = heap_bytes + toga::geom::page_bytes;  // room to align the base to 4 KiB
  open_account(std::string(options_.shareable ? "shareable" : "fixed") + ", " + toga::format_bytes(heap_bytes));
  if (options_.shareable) {
    try {
      make_shareable(heap_bytes);
    } catch (...) {
      release();
      throw;
    }
    return;
  }
  const std::uint64_t record = charge_or_throw("heap", upstream);
  cudaError_t e;
  if (options_.pool) {
    e = cudaMallocFromPoolAsync(reinterpret_cast<void**>(&raw_heap_), upstream, options_.pool, options_.stream);
  } else {
    e = cudaMalloc(reinterpret_cast<void**>(&raw_heap_), upstream);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    raw_heap_ = nullptr;
    account_.release_all();
    throw toga::bad_alloc("toga::cuda::heap: cannot obtain " + std::to_string(upstream) + " B of device memory for the heap (" +
                          cudaGetErrorName(e) + "); ask for a smaller heap or free device memory");
  }
  account_.set_address(record, raw_heap_);
  char* aligned = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(raw_heap_) + toga::geom::page_bytes - 1) &
                                          ~static_cast<std::uintptr_t>(toga::geom::page_bytes - 1));
  try {
    allocate_metadata();
    view_ = device_allocator::make(aligned, meta_, layout_);
    initialise();
    if (options_.system_scope) make_system_view();
  } catch (...) {
    release();
    throw;
  }
}

heap::heap(heap_options options) : options_(options) {
  if (options_.max_bytes == 0)
    throw std::invalid_argument("toga::cuda::heap: heap(options) makes a growable heap and needs options.max_bytes (its address "
                                "range and capacity); for a fixed heap use heap(bytes, options)");
  if (options_.pool)
    throw std::invalid_argument("toga::cuda::heap: a growable heap maps its own memory (CUDA VMM) and cannot take a memory pool; "
                                "leave options.pool null or make a fixed heap");
  if (options_.system_scope)
    throw std::invalid_argument("toga::cuda::heap: system_scope applies to fixed heaps (heap(bytes, options)); a growable heap's "
                                "growth works at device scope; leave system_scope off or make a fixed heap");
  if (options_.shareable)
    throw std::invalid_argument("toga::cuda::heap: shareable heaps do not grow (design.md §23.2); make a fixed heap of the size the "
                                "processes need with heap(bytes, options), or leave shareable off");
  if (options_.presplit_bytes != 0 && options_.presplit_bytes != ~std::uint64_t{0})
    throw std::invalid_argument("toga::cuda::heap: presplit_bytes " + std::to_string(options_.presplit_bytes) +
                                " was given for a growable heap, which has no pre-split reserve (its memory arrives granule by "
                                "granule); leave it at its default or make a fixed heap");
  if (options_.device < 0) TOGA_CUDA_TRY(cudaGetDevice(&options_.device));
  device_ = options_.device;
  device_guard guard(device_);
  const toga::growth_options go{options_.max_bytes,     options_.initial_bytes,  options_.headroom_bytes, options_.release_threshold,
                                options_.granule_bytes, options_.max_run_bytes, options_.growth_service, options_.growth_wait_us,
                                options_.spill,         options_.growth_ahead_percent};
  const std::uint64_t capacity = toga::growth_capacity(go, toga::heap_layout::max_heap_bytes);
  TOGA_CUDA_TRY(cudaFree(nullptr));  // the primary context, which the driver calls below use
  {
    CUdevice dev = 0;
    int vmm = 0;
    if (driver().device_get(&dev, device_) != CUDA_SUCCESS ||
        driver().device_get_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS || !vmm)
      throw std::invalid_argument("toga::cuda::heap: device " + std::to_string(device_) +
                                  " does not support CUDA virtual memory management (growable heaps need it); make a fixed heap");
  }
  vmm_provider provider{device_, 0};
  {
    const CUmemAllocationProp p = provider.prop();
    size_t g = 0;
    const CUresult r = driver().mem_get_allocation_granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS) throw std::runtime_error("toga::cuda::heap: cuMemGetAllocationGranularity failed: " + vmm_provider::describe(r));
    provider.gran = g;
  }
  const std::uint64_t granule = toga::growth_granule_bytes(go, capacity, provider.granularity());
  if (go.spill != toga::spill_policy::never) {
    std::string why;
    if (!provider.supports(toga::memory_tier::host, why))
      throw std::invalid_argument("toga::cuda::heap: spill " + std::string(toga::to_string(go.spill)) + " needs host memory from the VMM API on device " +
                                  std::to_string(device_) + ", which this driver refuses (" + why + "); use spill_policy::never");
    if (provider.host_gran == 0 || granule % provider.host_gran != 0)
      throw std::invalid_argument("toga::cuda::heap: granule_bytes " + std::to_string(granule) + " is not a multiple of the host tier's VMM granularity (" +
                                  std::to_string(provider.host_gran) + " B); choose a granule size that is, or spill_policy::never");
  }
  layout_ = make_layout(options_, toga::heap_layout::levels_for(capacity), device_);
  open_account("growable, " + toga::format_bytes(capacity) + " range");
  try {
    try {
      growth_.reset(new growth_impl{toga::growth_controller<vmm_provider>(provider, go, capacity, granule)});
    } catch (const std::runtime_error& e) {
      throw toga::bad_alloc(std::string("toga::cuda::heap: ") + e.what() + "; ask for a smaller max_bytes");
    }
    growth_->ctl.set_account(account_);
    // offsets, count, per-height counts, the run table (a byte per granule)
    const std::uint64_t n = capacity / granule + 2 + toga::heap_layout::max_levels + (capacity / granule + 7) / 8;
    const std::uint64_t record = charge_or_throw("granule list", n * sizeof(std::uint64_t));
    const cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&growth_->scratch), n * sizeof(std::uint64_t));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      growth_->scratch = nullptr;
      throw toga::bad_alloc("toga::cuda::heap: cannot obtain " + std::to_string(n * 8) + " B of device memory for the granule list");
    }
    account_.set_address(record, growth_->scratch);
    growth_->device = device_;
    if (go.service) {
      const cudaError_t h = cudaHostAlloc(reinterpret_cast<void**>(&growth_->mailbox), sizeof(toga::growth_mailbox),
                                          cudaHostAllocMapped | cudaHostAllocPortable);
      if (h != cudaSuccess) {
        (void)cudaGetLastError();
        growth_->mailbox = nullptr;
        throw toga::bad_alloc("toga::cuda::heap: cannot obtain " + std::to_string(sizeof(toga::growth_mailbox)) +
                              " B of mapped pinned host memory for the growth service (" + cudaGetErrorName(h) + ")");
      }
      std::memset(static_cast<void*>(growth_->mailbox), 0, sizeof(toga::growth_mailbox));
      TOGA_CUDA_TRY(cudaHostGetDevicePointer(reinterpret_cast<void**>(&growth_->mailbox_dev), growth_->mailbox, 0));
    }
    allocate_metadata();
    view_ = device_allocator::make(growth_->ctl.granules().base(), meta_, layout_);
    view_.small.buddy.grow_granule = toga::bits::ctz(granule) - toga::geom::page_shift + 1;  // as init_growable sets it
    initialise();
    std::vector<std::uint64_t> initial;
    try {
      initial = growth_->ctl.map_initial();
    } catch (const std::runtime_error& e) {
      throw toga::bad_alloc(std::string("toga::cuda::heap: ") + e.what());
    }
    adopt(initial);
    if (go.service) {
      growth_impl* g = growth_.get();
      g->service.start([g] { return g->round(); }, g->mailbox);
    }
  } catch (...) {
    release();
    throw;
  }
}

void heap::allocate_metadata() {
  const std::uint64_t record = charge_or_throw("metadata", layout_.bytes);
  const cudaError_t e = options_.pool ? cudaMallocFromPoolAsync(reinterpret_cast<void**>(&meta_), layout_.bytes, options_.pool, options_.stream)
                                      : cudaMalloc(reinterpret_cast<void**>(&meta_), layout_.bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    meta_ = nullptr;
    throw toga::bad_alloc("toga::cuda::heap: cannot obtain " + std::to_string(layout_.bytes) + " B of device memory for the heap's metadata (" +
                          cudaGetErrorName(e) + ")");
  }
  account_.set_address(record, meta_);
  if (options_.tenants) {
    const std::uint64_t rec = charge_or_throw("tenant table", sizeof(toga::tenant_table));
    const cudaError_t t = cudaMalloc(reinterpret_cast<void**>(&tenants_), sizeof(toga::tenant_table));
    if (t != cudaSuccess) {
      (void)cudaGetLastError();
      tenants_ = nullptr;
      throw toga::bad_alloc("toga::cuda::heap: cannot obtain " + std::to_string(sizeof(toga::tenant_table)) + " B of device memory for the tenant table (" +
                            cudaGetErrorName(t) + "); free device memory or make the heap without tenants");
    }
    account_.set_address(rec, tenants_);
    quotas_.assign(toga::max_tenants, ~std::uint64_t{0});
  }
}

void heap::open_account(const std::string& kind) {
  toga::memory_ledger& l = toga::process_memory_ledger();
  const std::uint64_t owner = l.new_owner();
  account_ = toga::ledger_account{&l, toga::memory_backend::cuda, device_, owner, "cuda heap #" + std::to_string(owner) + " (" + kind + ")"};
}

std::uint64_t heap::charge_or_throw(const char* what, std::uint64_t bytes) {
  // (a refusal or an unparsable TOGA_DEVICE_MEMORY_LIMIT throws; the constructor's release()
  // frees what was obtained before, then its records)
  std::string refusal;
  const std::uint64_t id = account_.charge(toga::memory_tier::device, what, bytes, &refusal);
  if (id == 0) throw toga::bad_alloc("toga::cuda::heap: cannot obtain " + std::to_string(bytes) + " B for the " + what + ": " + refusal);
  return id;
}

void heap::initialise() {
  const std::uint64_t usable = growth_ ? growth_->ctl.usable_granules() : 0;  // read by the copy below until the sync
  static_assert(offsetof(toga::growth_state, service_wait_ns) == offsetof(toga::growth_state, service) + 8);
  const std::uint64_t service_words[2] = {growth_ ? reinterpret_cast<std::uint64_t>(growth_->mailbox_dev) : 0,
                                          options_.growth_wait_us * 1000};
  cudaEvent_t start, stop;
  TOGA_CUDA_TRY(cudaEventCreate(&start));
  TOGA_CUDA_TRY(cudaEventCreate(&stop));
  TOGA_CUDA_TRY(cudaEventRecord(start, options_.stream));
  TOGA_CUDA_TRY(cudaMemsetAsync(meta_, 0, layout_.bytes, options_.stream));
  toga::tenant_table fresh{};  // (read by the copy below until the sync)
  if (tenants_) {
    for (unsigned i = 0; i < toga::max_tenants; ++i) fresh.t[i].quota = quotas_[i];
    TOGA_CUDA_TRY(cudaMemcpyAsync(tenants_, &fresh, sizeof fresh, cudaMemcpyHostToDevice, options_.stream));
  }
  if (growth_) {
    init_growable_kernel<<<1, 1, 0, options_.stream>>>(view_, options_.limit_bytes, static_cast<unsigned>(view_.small.buddy.grow_granule - 1));
    // granules beyond max_bytes (the range is the power of two above) are never mapped
    TOGA_CUDA_TRY(cudaMemcpyAsync(meta_ + layout_.globals_off + offsetof(toga::heap_globals, growth) + offsetof(toga::growth_state, max_granules),
                                  &usable, sizeof usable, cudaMemcpyHostToDevice, options_.stream));
    if (growth_->mailbox_dev) {  // the service's mailbox and the wait bound (read until the sync below)
      TOGA_CUDA_TRY(cudaMemcpyAsync(meta_ + layout_.globals_off + offsetof(toga::heap_globals, growth) + offsetof(toga::growth_state, service),
                                    service_words, sizeof service_words, cudaMemcpyHostToDevice, options_.stream));
    }
  } else {
    init_kernel<<<1, 1, 0, options_.stream>>>(view_, options_.limit_bytes, options_.presplit_bytes);
  }
  TOGA_CUDA_TRY(cudaGetLastError());
  TOGA_CUDA_TRY(cudaEventRecord(stop, options_.stream));
  TOGA_CUDA_TRY(cudaEventSynchronize(stop));
  TOGA_CUDA_TRY(cudaEventElapsedTime(&init_ms_, start, stop));
  TOGA_CUDA_TRY(cudaEventDestroy(start));
  TOGA_CUDA_TRY(cudaEventDestroy(stop));
}

void heap::release() noexcept {
  if (raw_heap_ == nullptr && meta_ == nullptr && growth_ == nullptr && tenants_ == nullptr && sys_resident_ == nullptr && !share_) {
    account_.release_all();  // (records of memory never obtained, if a constructor stopped between)
    return;
  }
  int current = 0;
  (void)cudaGetDevice(&current);
  (void)cudaSetDevice(device_);
  {
    // No kernel may find a default heap whose memory is gone.
    default_registry& r = registry();
    std::lock_guard<std::mutex> lock(r.m);
    const auto it = r.current.find(device_);
    if (it != r.current.end() && it->second == meta_) {
      r.current.erase(it);
      const detail::default_heap_slot none{};
      try {
        write_slots(none, r.slots);
      } catch (const std::exception&) {
        // the device is failing; the memory goes anyway
      }
    }
  }
  if (tenants_) (void)cudaFree(tenants_);
  tenants_ = nullptr;
  if (sys_resident_) (void)cudaFree(sys_resident_);
  sys_resident_ = nullptr;
  if (share_) {
    (void)cudaDeviceSynchronize();  // no kernel of this process may touch the mappings as they go
    share_.reset();                 // unmaps and releases this process's handles (the memory lives on in other processes)
    meta_ = nullptr;
  }
  for (char* p : {raw_heap_, meta_}) {
    if (!p) continue;
    if (options_.pool) (void)cudaFreeAsync(p, options_.stream);
    else (void)cudaFree(p);
  }
  if (options_.pool) (void)cudaStreamSynchronize(options_.stream);
  if (growth_) {
    (void)cudaStreamSynchronize(options_.stream);  // no kernel may touch a granule being unmapped
    growth_.reset();  // unmaps and releases every granule, frees the range (never throws)
  }
  (void)cudaSetDevice(current);
  raw_heap_ = meta_ = nullptr;
  account_.release_all();
  account_ = toga::ledger_account{};
}

heap::~heap() { release(); }

heap::heap(heap&& o) noexcept
    : view_(o.view_), layout_(o.layout_), options_(o.options_), raw_heap_(std::exchange(o.raw_heap_, nullptr)),
      meta_(std::exchange(o.meta_, nullptr)), device_(o.device_), init_ms_(o.init_ms_), growth_(std::move(o.growth_)),
      account_(std::exchange(o.account_, toga::ledger_account{})), tenants_(std::exchange(o.tenants_, nullptr)), quotas_(std::move(o.quotas_)),
      share_(std::move(o.share_)), sys_resident_(std::exchange(o.sys_resident_, nullptr)) {
  o.view_ = device_allocator{};
}

heap& heap::operator=(heap&& o) noexcept {
  if (this != &o) {
    release();
    view_ = o.view_;
    layout_ = o.layout_;
    options_ = o.options_;
    raw_heap_ = std::exchange(o.raw_heap_, nullptr);
    meta_ = std::exchange(o.meta_, nullptr);
    device_ = o.device_;
    init_ms_ = o.init_ms_;
    growth_ = std::move(o.growth_);
    account_ = std::exchange(o.account_, toga::ledger_account{});
    tenants_ = std::exchange(o.tenants_, nullptr);
    quotas_ = std::move(o.quotas_);
    share_ = std::move(o.share_);
    sys_resident_ = std::exchange(o.sys_resident_, nullptr);
    o.view_ = device_allocator{};
  }
  return *this;
}

heap_ref heap::ref() const {
  if (!meta_) throw std::logic_error("toga::cuda::heap::ref: the heap was moved from (it owns no memory); use the heap it was moved to");
  if (tenants_)
    throw std::logic_error("toga::cuda::heap::ref: this heap was made with heap_options::tenants, whose blocks carry tenant "
                           "headers that a heap_ref would not read; use heap.tenant(id) (a toga::cuda::tenant_ref)");
  if (options_.system_scope)
    throw std::logic_error("toga::cuda::heap::ref: this heap was made with heap_options::system_scope; its kernels must all use "
                           "system-scope atomics: use heap.system_ref() (a toga::cuda::system_heap_ref)");
  return heap_ref(view_);
}

namespace {
// Gives view `v` a resident copy of its own (design.md §8.8) in `buf`, device memory of
// heap_layout::resident_bytes obtained here: importers (the metadata's copy holds the exporter's
// addresses) and the system-scoped view (the metadata's copy is the device-scoped one).
template <class A>
void own_resident(A& v, void*& buf) {
  static_assert(sizeof(A) <= toga::heap_layout::resident_bytes);
  TOGA_CUDA_TRY(cudaMalloc(&buf, toga::heap_layout::resident_bytes));
  v.resident = static_cast<const A*>(buf);
  TOGA_CUDA_TRY(cudaMemcpy(buf, &v, sizeof v, cudaMemcpyHostToDevice));
}
}  // namespace

system_heap_ref heap::system_ref() const {
  if (!meta_) throw std::logic_error("toga::cuda::heap::system_ref: the heap was moved from (it owns no memory); use the heap it was moved to");
  if (!options_.system_scope || !sys_resident_)
    throw std::logic_error("toga::cuda::heap::system_ref: this heap was made without heap_options::system_scope; use ref()");
  system_device_allocator v = system_device_allocator::make(view_.small.base, meta_, layout_);
  v.resident = static_cast<const system_device_allocator*>(sys_resident_);
  return system_heap_ref(v);
}

void heap::make_system_view() {
  system_device_allocator v = system_device_allocator::make(view_.small.base, meta_, layout_);
  own_resident(v, sys_resident_);
}

void heap::check_tenant(const char* call, unsigned id) const {
  if (!meta_) throw std::logic_error(std::string("toga::cuda::heap::") + call + ": the heap was moved from; use the heap it was moved to");
  if (!tenants_)
    throw std::invalid_argument(std::string("toga::cuda::heap::") + call +
                                ": this heap has no tenants; make it with heap_options::tenants = true");
  if (id >= toga::max_tenants)
    throw std::invalid_argument(std::string("toga::cuda::heap::") + call + ": tenant id " + std::to_string(id) + " is not in [0, " +
                                std::to_string(toga::max_tenants - 1) + "]");
}

tenant_ref heap::tenant(unsigned id, std::uint64_t quota_bytes) {
  check_tenant("tenant", id);
  if (quota_bytes == 0 || quota_bytes > view_.heap_bytes)
    throw std::invalid_argument("toga::cuda::heap::tenant: quota_bytes " + std::to_string(quota_bytes) + " for tenant " + std::to_string(id) +
                                " is not in [1, " + std::to_string(view_.heap_bytes) + "] (1 B to the heap's capacity)");
  device_guard guard(device_);
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  TOGA_CUDA_TRY(cudaMemcpyAsync(&tenants_->t[id].quota, &quota_bytes, sizeof quota_bytes, cudaMemcpyHostToDevice, options_.stream));
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  quotas_[id] = quota_bytes;
  return toga::cuda::tenant_ref(view_, tenants_, id);
}

tenant_ref heap::tenant(unsigned id) const {
  check_tenant("tenant", id);
  return toga::cuda::tenant_ref(view_, tenants_, id);
}

toga::tenant_counters heap::tenant_stats(unsigned id) const {
  check_tenant("tenant_stats", id);
  device_guard guard(device_);
  toga::tenant_counters c;
  TOGA_CUDA_TRY(cudaMemcpyAsync(&c, &tenants_->t[id], sizeof c, cudaMemcpyDeviceToHost, options_.stream));
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  return c;
}

toga::heap_statistics heap::stats() const {
  if (!meta_) throw std::logic_error("toga::cuda::heap::stats: the heap was moved from");
  device_guard guard(device_);
  stats_region r = fetch_stats(view_, layout_, meta_, options_.stream);
  return toga::collect_statistics(r.view);
}

heap_attributes heap::attributes() const {
  if (!meta_) throw std::logic_error("toga::cuda::heap::attributes: the heap was moved from");
  device_guard guard(device_);
  stats_region r = fetch_stats(view_, layout_, meta_, options_.stream);
  const toga::heap_statistics s = toga::collect_statistics(r.view);
  heap_attributes a;
  a.capacity = s.heap_bytes;
  a.metadata_bytes = layout_.bytes;
  a.device_bytes = growth_ ? growth_->ctl.mapped_bytes() + layout_.bytes : s.heap_bytes + toga::geom::page_bytes + layout_.bytes;
  if (share_) {
    a.device_bytes = share_->d.heap_alloc_bytes + share_->d.meta_alloc_bytes;
    a.shared = true;
    a.imported = share_->imported;
  }
  a.system_scope = options_.system_scope;
  a.limit_bytes = options_.limit_bytes;
  a.reserved_mem_current = s.buddy_bytes;
  a.reserved_mem_high = std::min(s.buddy_high_bytes, s.heap_bytes);
  a.used_mem_current = s.used_bytes;
  a.used_mem_high = std::min(s.peak_used_bytes, a.reserved_mem_high);
  a.allocations = s.allocations;
  a.deallocations = s.deallocations;
  a.failed_exhausted = s.failed_exhausted;
  a.failed_limit = s.failed_limit;
  a.failed_too_large = s.failed_too_large;
  if (tenants_) {
    toga::tenant_table t;
    TOGA_CUDA_TRY(cudaMemcpyAsync(&t, tenants_, sizeof t, cudaMemcpyDeviceToHost, options_.stream));
    TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
    for (const auto& c : t.t) a.failed_quota += c.failed_quota;
  }
  if (growth_) {
    const toga::growth_counters& c = growth_->ctl.counters();
    a.growable = true;
    a.granule_bytes = growth_->ctl.granule_bytes();
    a.max_run_bytes = growth_->ctl.max_run_bytes();
    a.mapped_runs = growth_->ctl.granules().mapped_runs();
    a.mapped_mem_current = c.mapped_bytes;
    a.mapped_mem_high = c.mapped_high_bytes;
    a.failed_growable = c.demand_requests + r.view.globals->growth.demand_requests;
    a.growth_requests = c.growth_requests;
    a.growth_failures = c.growth_failures;
    a.grown_bytes = c.grown_bytes;
    a.trims = c.trims;
    a.trimmed_bytes = c.trimmed_bytes;
    a.growth_budget_refusals = c.budget_refusals;
    a.mapped_host_mem_current = c.host_mapped_bytes;
    a.mapped_host_mem_high = c.host_mapped_high_bytes;
    a.spilled_granules = c.spilled_granules;
    if (growth_->mailbox) {
      auto lk = growth_->hold();
      a.growth_service = true;
      a.service_rounds = growth_->ctl.counters().service_rounds;
      a.service_refusals = growth_->ctl.counters().service_refusals;
      a.service_round_ns = growth_->ctl.counters().service_round_ns;
      a.service_map_ns = growth_->ctl.counters().service_map_ns;
      toga::growth_counters t;
      toga::read_service_tally(r.view.globals->growth.relay, t);
      a.service_waits = t.service_waits;
      a.service_served = t.service_served;
      a.service_timeouts = t.service_timeouts;
      a.service_gave_up = t.service_gave_up;
    }
  }
  return a;
}

toga::memory_tier heap::tier_of(const void* p) const noexcept {
  if (!growth_ || !meta_ || !view_.contains(p)) return toga::memory_tier::device;
  const auto& m = growth_->ctl.granules();
  const std::uint64_t i = static_cast<std::uint64_t>(static_cast<const char*>(p) - m.base()) / m.granule_bytes();
  return i < m.granules() && m.is_mapped(i) ? m.tier_of(i) : toga::memory_tier::device;
}

std::uint64_t heap::mapped_bytes() const noexcept {
  if (!meta_) return 0;
  return growth_ ? growth_->ctl.mapped_bytes() : view_.heap_bytes;
}

namespace {
// At quiescence (no kernel runs): adopts the granules the growth service published that no waiting
// request adopted. Nothing without a service.
void adopt_published(growth_impl* g, const device_allocator& v, cudaStream_t st) {
  if (!g || !g->mailbox_dev) return;
  adopt_published_kernel<<<1, 1, 0, st>>>(v, g->mailbox_dev);
  TOGA_CUDA_TRY(cudaGetLastError());
  TOGA_CUDA_TRY(cudaStreamSynchronize(st));
}
}  // namespace

void heap::adopt(const std::vector<std::uint64_t>& offsets) {
  if (offsets.empty()) return;
  const std::uint64_t n = offsets.size();
  std::uint64_t* d = growth_->scratch;
  TOGA_CUDA_TRY(cudaMemcpyAsync(d, offsets.data(), n * sizeof(std::uint64_t), cudaMemcpyHostToDevice, options_.stream));
  TOGA_CUDA_TRY(cudaMemsetAsync(d + n, 0, sizeof(std::uint64_t), options_.stream));
  adopt_kernel<<<static_cast<unsigned>((n + 127) / 128), 128, 0, options_.stream>>>(view_, d, n, reinterpret_cast<unsigned long long*>(d + n));
  TOGA_CUDA_TRY(cudaGetLastError());
  std::uint64_t refused = 0;
  TOGA_CUDA_TRY(cudaMemcpyAsync(&refused, d + n, sizeof refused, cudaMemcpyDeviceToHost, options_.stream));
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  if (refused != 0)
    throw std::logic_error("toga::cuda::heap: " + std::to_string(refused) + " of " + std::to_string(n) +
                           " newly mapped granules were not unmapped in the buddy tree (a toga bug: please report it)");
}

std::uint64_t heap::trim_granules(std::uint64_t keep_bytes) {
  const std::uint64_t n_max = growth_->ctl.granules().granules();
  std::uint64_t* d = growth_->scratch;
  TOGA_CUDA_TRY(cudaDeviceSynchronize());  // no kernel on any stream may use a granule as it is withdrawn
  const unsigned levels = layout_.levels, top = levels - 1;
  const unsigned go = static_cast<unsigned>(view_.small.buddy.grow_granule - 1);
  const auto blocks = [](std::uint64_t n) { return static_cast<unsigned>((n + 255) / 256); };
  cudaStream_t st = options_.stream;
  trim_begin_kernel<<<1, 1, 0, st>>>(view_);
  for (unsigned h = 1; h < levels; ++h) {
    const std::uint64_t first = std::uint64_t{1} << (top - h);  // nodes of height h: [first, 2 first)
    merge_height_kernel<<<blocks(first), 256, 0, st>>>(view_, first);
  }
  const std::vector<std::uint8_t> runs = growth_->ctl.run_table();  // whole runs go back, or none of a run
  auto* run_log2 = reinterpret_cast<std::uint8_t*>(d + n_max + 2 + toga::heap_layout::max_levels);
  TOGA_CUDA_TRY(cudaMemcpyAsync(run_log2, runs.data(), runs.size(), cudaMemcpyHostToDevice, st));
  withdraw_kernel<<<1, 1, 0, st>>>(view_, keep_bytes, d, d + n_max, run_log2);
  for (unsigned h = go + 1; h < levels; ++h) {
    const std::uint64_t first = std::uint64_t{1} << (top - h);
    derive_height_kernel<<<blocks(first), 256, 0, st>>>(view_, first);
  }
  unsigned long long* counts = reinterpret_cast<unsigned long long*>(d + n_max + 1);  // levels words after the count
  TOGA_CUDA_TRY(cudaMemsetAsync(counts, 0, levels * sizeof(unsigned long long), st));
  for (unsigned h = 0; h < levels; ++h) {
    const std::uint64_t first = std::uint64_t{1} << (top - h);
    count_height_kernel<<<blocks(first), 256, 0, st>>>(view_, first, counts + h);
  }
  store_counts_kernel<<<1, 1, 0, st>>>(view_, counts);
  TOGA_CUDA_TRY(cudaGetLastError());
  std::uint64_t n = 0;
  TOGA_CUDA_TRY(cudaMemcpyAsync(&n, d + n_max, sizeof n, cudaMemcpyDeviceToHost, options_.stream));
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  std::vector<std::uint64_t> offsets(n);
  if (n) {
    TOGA_CUDA_TRY(cudaMemcpyAsync(offsets.data(), d, n * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, options_.stream));
    TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  }
  return growth_->ctl.withdrawn(offsets);  // withdrawn from the tree first, unmapped now
}

void heap::apply_threshold() {
  std::uint64_t keep = 0;
  if (!growth_ || !growth_->ctl.threshold_trim(growth_->ctl.granule_bytes(), keep)) return;  // not above the threshold
  // Reclaim UAlloc's caches, then see whether a granule's worth is not handed out as TBuddy
  // blocks: otherwise no granule is wholly free, and the withdrawal's walk of the whole tree (one
  // thread) is skipped.
  TOGA_CUDA_TRY(cudaDeviceSynchronize());
  trim_kernel<<<1, 1, 0, options_.stream>>>(view_);
  TOGA_CUDA_TRY(cudaGetLastError());
  std::uint64_t allocated = 0;
  TOGA_CUDA_TRY(cudaMemcpyAsync(&allocated, meta_ + layout_.globals_off + offsetof(toga::heap_globals, limit) + offsetof(toga::byte_limit, reserved),
                                sizeof allocated, cudaMemcpyDeviceToHost, options_.stream));
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  const std::uint64_t mapped = growth_->ctl.mapped_bytes();
  if (growth_->ctl.threshold_trim(mapped > allocated ? mapped - allocated : 0, keep)) (void)trim_granules(keep);
}

std::uint64_t heap::grow_if_needed() {
  if (!meta_) throw std::logic_error("toga::cuda::heap::grow_if_needed: the heap was moved from");
  if (!growth_) return 0;
  device_guard guard(device_);
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  TOGA_CUDA_TRY(cudaDeviceSynchronize());  // kernels on other streams may have failed too
  auto lk = growth_->hold();
  adopt_published(growth_.get(), view_, options_.stream);
  char* g = meta_ + layout_.globals_off + offsetof(toga::heap_globals, growth);
  toga::growth_state st{};
  TOGA_CUDA_TRY(cudaMemcpyAsync(&st, g, sizeof st, cudaMemcpyDeviceToHost, options_.stream));
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  if (st.demand_requests == 0) {
    apply_threshold();
    return 0;
  }
  growth_->ctl.note_demand(st.demand_requests);
  const std::vector<std::uint64_t> mapped =
      growth_->ctl.grow(st.demand_requests, st.demand_bytes, static_cast<unsigned>(st.demand_max_order), st.demand_chunks);
  adopt(mapped);
  // the demand is served by this growth (or could not be): count anew from here, in stream order
  TOGA_CUDA_TRY(cudaMemsetAsync(g + offsetof(toga::growth_state, demand_requests), 0, toga::growth_state::demand_words * sizeof(std::uint64_t),
                                options_.stream));
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  return mapped.size() * growth_->ctl.granule_bytes();
}

std::uint64_t heap::trim_to(std::uint64_t min_bytes_to_keep) {
  if (!meta_) throw std::logic_error("toga::cuda::heap::trim_to: the heap was moved from");
  if (!growth_) {
    trim();
    return 0;
  }
  device_guard guard(device_);
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  auto lk = growth_->hold();
  adopt_published(growth_.get(), view_, options_.stream);
  return trim_granules(min_bytes_to_keep);
}

void heap::synchronize() {
  if (!meta_) throw std::logic_error("toga::cuda::heap::synchronize: the heap was moved from");
  device_guard guard(device_);
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  std::unique_lock<std::mutex> lk;
  if (growth_) lk = growth_->hold();
  adopt_published(growth_.get(), view_, options_.stream);
  apply_threshold();
}

std::optional<std::string> heap::check(toga::heap_quality* quality) const {
  if (!meta_) throw std::logic_error("toga::cuda::heap::check: the heap was moved from");
  device_guard guard(device_);
  TOGA_CUDA_TRY(cudaDeviceSynchronize());
  const std::uint64_t hb = view_.heap_bytes;
  void* h = mmap(nullptr, hb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (h == MAP_FAILED) throw toga::bad_alloc("toga::cuda::heap::check: cannot reserve " + std::to_string(hb) + " B of host address space");
  struct unmapper {
    void* p;
    std::uint64_t n;
    ~unmapper() { munmap(p, n); }
  } guard_h{h, hb};
  std::vector<std::uint64_t> meta(layout_.bytes / 8 + 1);
  TOGA_CUDA_TRY(cudaMemcpy(meta.data(), meta_, layout_.bytes, cudaMemcpyDeviceToHost));
  char* host = static_cast<char*>(h);
  if (growth_) {
    const auto& m = growth_->ctl.granules();
    for (std::uint64_t i = 0; i < m.granules(); ++i)
      if (m.is_mapped(i))
        TOGA_CUDA_TRY(cudaMemcpy(host + i * m.granule_bytes(), m.base() + i * m.granule_bytes(), m.granule_bytes(), cudaMemcpyDeviceToHost));
  } else {
    TOGA_CUDA_TRY(cudaMemcpy(host, view_.small.base, hb, cudaMemcpyDeviceToHost));
  }
  device_allocator v = device_allocator::make(host, reinterpret_cast<char*>(meta.data()), layout_);
  v.small.buddy.grow_granule = view_.small.buddy.grow_granule;
  return toga::check_quiescent(v, quality);
}

void heap::inject_growth_failure(toga::growth_step step, std::uint64_t k) noexcept {
  if (growth_) growth_->ctl.granules().inject_failure(step, k);
}

void heap::reset_high_water() {
  if (!meta_) throw std::logic_error("toga::cuda::heap::reset_high_water: the heap was moved from");
  device_guard guard(device_);
  stats_region r = fetch_stats(view_, layout_, meta_, options_.stream);
  toga::reset_high_water(r.view);  // on the host copy: the arenas' peaks and the block high-water
  // Write the copied region back as a whole (at quiescence nothing else changed it), so that
  // every mark the core resets reaches the device, whichever words it keeps them in.
  TOGA_CUDA_TRY(cudaMemcpyAsync(meta_ + layout_.arena_off, r.bytes.data(), layout_.bytes - layout_.arena_off, cudaMemcpyHostToDevice,
                                options_.stream));
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  if (growth_) growth_->ctl.reset_high_water();
}

void heap::trim() {
  if (!meta_) throw std::logic_error("toga::cuda::heap::trim: the heap was moved from");
  device_guard guard(device_);
  // before the service's lock: a kernel of this stream whose requests wait for the service must
  // finish first (the lock stops the service's rounds; the adoption below would queue behind it)
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  std::unique_lock<std::mutex> lk;
  if (growth_) lk = growth_->hold();
  adopt_published(growth_.get(), view_, options_.stream);
  trim_kernel<<<1, 1, 0, options_.stream>>>(view_);
  TOGA_CUDA_TRY(cudaGetLastError());
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
  apply_threshold();
}

void heap::reset() {
  if (!meta_) throw std::logic_error("toga::cuda::heap::reset: the heap was moved from");
  if (imported())
    throw std::logic_error("toga::cuda::heap::reset: this heap was imported from another process; reset it in the exporting process, "
                           "while no process uses it");
  device_guard guard(device_);
  TOGA_CUDA_TRY(cudaDeviceSynchronize());
  std::unique_lock<std::mutex> lk;
  if (growth_) {
    lk = growth_->hold();
    growth_->ctl.reset_counters();
    if (growth_->mailbox) {  // every mapped granule is adopted below, published or not: the mailbox starts again
      std::memset(static_cast<void*>(growth_->mailbox), 0, sizeof(toga::growth_mailbox));
      growth_->cursor = toga::service_cursor{};
    }
  }
  initialise();
  if (growth_) {  // every granule still mapped goes back into the fresh tree
    std::vector<std::uint64_t> mapped;
    const auto& m = growth_->ctl.granules();
    for (std::uint64_t i = 0; i < m.granules(); ++i)
      if (m.is_mapped(i)) mapped.push_back(i * m.granule_bytes());
    adopt(mapped);
    apply_threshold();
  }
}

std::vector<heap_error> heap::errors() const {
  if (!meta_) throw std::logic_error("toga::cuda::heap::errors: the heap was moved from");
  device_guard guard(device_);
  stats_region r = fetch_stats(view_, layout_, meta_, options_.stream);
  std::vector<heap_error> out;
  const unsigned n = std::min<unsigned>(r.view.globals->error_count, toga::heap_globals::max_errors);
  for (unsigned i = 0; i < n; ++i)
    out.push_back({static_cast<toga::heap_error_kind>(r.view.globals->errors[i][0]), r.view.globals->errors[i][1]});
  return out;
}

// ---- the default heap ----------------------------------------------------------------------------

namespace detail {
void register_default_heap_slot(const void* symbol) noexcept {
  default_registry& r = registry();
  std::lock_guard<std::mutex> lock(r.m);
  r.slots.push_back(symbol);
}
}  // namespace detail

void set_default_heap(const heap& h) {
  if (!h.meta_) throw std::logic_error("toga::cuda::set_default_heap: the heap was moved from (it owns no memory)");
  if (h.has_tenants())
    throw std::logic_error("toga::cuda::set_default_heap: the heap was made with heap_options::tenants; the default heap's "
                           "allocate/deallocate have no tenant (pass each kernel the tenant_ref of heap.tenant(id) instead)");
  detail::default_heap_slot slot{};
  const heap_ref ref = h.ref();
  std::memcpy(slot.ref, &ref, sizeof ref);
  slot.set = 1;
  device_guard guard(h.device_);
  default_registry& r = registry();
  std::lock_guard<std::mutex> lock(r.m);
  write_slots(slot, r.slots);
  r.current[h.device_] = h.meta_;
}

void clear_default_heap(int device) {
  if (device < 0) TOGA_CUDA_TRY(cudaGetDevice(&device));
  device_guard guard(device);
  default_registry& r = registry();
  std::lock_guard<std::mutex> lock(r.m);
  const detail::default_heap_slot none{};
  write_slots(none, r.slots);
  r.current.erase(device);
}

// ---- budgets and the allocation registry ------------------------------------------------------

namespace {
int device_or_current(int device) {
  if (device < 0) TOGA_CUDA_TRY(cudaGetDevice(&device));
  int n = 0;
  TOGA_CUDA_TRY(cudaGetDeviceCount(&n));
  if (device >= n)
    throw std::invalid_argument("toga::cuda: device " + std::to_string(device) + " is not in [0, " + std::to_string(n) +
                                ") (the devices CUDA sees); use -1 for the current device");
  return device;
}
}  // namespace

void set_device_budget(int device, std::uint64_t bytes) {
  toga::process_memory_ledger().set_budget(toga::memory_backend::cuda, device_or_current(device), bytes);
}

toga::budget_state device_budget(int device) {
  return toga::process_memory_ledger().budget(toga::memory_backend::cuda, device_or_current(device));
}

toga::memory_report memory_report() { return toga::process_memory_ledger().report(); }

// ---- heaps shared by processes (issue 32; docs/usage.md §13, design.md §23) --------------------

namespace {
CUmemAllocationProp share_prop(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}
std::uint64_t share_granularity(int device, const char* who) {
  const CUmemAllocationProp p = share_prop(device);
  size_t g = 0;
  const CUresult r = driver().mem_get_allocation_granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS || g == 0)
    throw std::invalid_argument(std::string(who) + ": device " + std::to_string(device) + " cannot make memory exportable as POSIX file descriptors (" +
                                vmm_provider::describe(r) + "); shared heaps need the CUDA VMM API with IPC handles on Linux");
  return g;
}
std::array<std::uint8_t, 16> device_uuid(int device) {
  cudaDeviceProp p{};
  TOGA_CUDA_TRY(cudaGetDeviceProperties(&p, device));
  std::array<std::uint8_t, 16> u{};
  std::memcpy(u.data(), p.uuid.bytes, 16);
  return u;
}
std::string uuid_text(const std::uint8_t* u) {
  static const char* hex = "0123456789abcdef";
  std::string t = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) t += '-';
    t += hex[u[i] >> 4];
    t += hex[u[i] & 15];
  }
  return t;
}
}  // namespace

heap::heap(import_tag) noexcept {}

void heap::make_shareable(std::uint64_t heap_bytes) {
  const char* who = "toga::cuda::heap";
  TOGA_CUDA_TRY(cudaFree(nullptr));  // the primary context, which the driver calls below use
  const std::uint64_t gran = share_granularity(device_, who);
  share_.reset(new share_impl);
  share_impl& s = *share_;
  std::uint64_t header_off = 0;
  s.bytes[0] = toga::share_heap_alloc_bytes(heap_bytes, gran);  // the heap, then the descriptor's copy
  s.bytes[1] = toga::share_meta_alloc_bytes(layout_, gran, &header_off);
  const char* what[2] = {"heap", "metadata"};
  const CUmemAllocationProp p = share_prop(device_);
  for (int i = 0; i < 2; ++i) {
    const std::uint64_t record = charge_or_throw(what[i], s.bytes[i]);
    const CUresult r = driver().mem_create(&s.handle[i], s.bytes[i], &p, 0);
    if (r != CUDA_SUCCESS)
      throw toga::bad_alloc(std::string(who) + ": cannot obtain " + std::to_string(s.bytes[i]) + " B of exportable device memory for the " + what[i] +
                            " (cuMemCreate: " + vmm_provider::describe(r) + "); ask for a smaller heap or free device memory");
    s.has_handle[i] = true;
    const std::string err = s.map(i, device_);
    if (!err.empty()) throw toga::cuda_error(cudaErrorMemoryAllocation, std::string(who) + ": " + err);
    account_.set_address(record, s.va[i]);
  }
  meta_ = s.va[1];
  std::random_device rd;
  const std::uint64_t id = (std::uint64_t{rd()} << 32) ^ rd() ^ static_cast<std::uint64_t>(getpid());
  const auto uuid = device_uuid(device_);
  s.d = toga::make_share_descriptor(toga::memory_backend::cuda, id, layout_, s.bytes[0], s.bytes[1], header_off, options_.limit_bytes, uuid.data(),
                                    options_.system_scope ? toga::share_flag_system_scope : 0);
  view_ = device_allocator::make(s.va[0], meta_, layout_);
  initialise();  // (zeroes the metadata's layout bytes only: the descriptor's copy after them stays)
  if (options_.system_scope) make_system_view();
  TOGA_CUDA_TRY(cudaMemcpy(meta_ + header_off, &s.d, sizeof s.d, cudaMemcpyHostToDevice));
  TOGA_CUDA_TRY(cudaMemcpy(s.va[0] + heap_bytes, &s.d, sizeof s.d, cudaMemcpyHostToDevice));
}

bool heap::imported() const noexcept { return share_ && share_->imported; }

shareable_heap heap::export_shareable() const {
  if (!meta_) throw std::logic_error("toga::cuda::heap::export_shareable: the heap was moved from");
  if (!share_)
    throw std::logic_error("toga::cuda::heap::export_shareable: the heap was made without heap_options::shareable (its memory cannot be "
                           "exported); make it with shareable = true");
  shareable_heap e;
  e.descriptor = share_->d;
  int fd[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) {
    const CUresult r = driver().mem_export(&fd[i], share_->handle[i], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS) {
      if (i == 1) close(fd[0]);
      throw cuda_error(cudaErrorInvalidValue, "toga::cuda::heap::export_shareable: cuMemExportToShareableHandle: " + vmm_provider::describe(r) +
                                                  "; a process may hold only so many descriptors (ulimit -n): close those already sent");
    }
  }
  e.heap_fd = fd[0];
  e.meta_fd = fd[1];
  return e;
}

heap heap::import(const void* descriptor, std::size_t descriptor_bytes, int heap_fd, int meta_fd, int device) {
  const std::string who = "toga::cuda::heap::import";
  int count = 0;
  TOGA_CUDA_TRY(cudaGetDeviceCount(&count));
  if (device >= count || device < -1)
    throw std::invalid_argument(who + ": device " + std::to_string(device) + " is not in [0, " + std::to_string(count) + "); use -1 for the exporter's device");
  int probe = device;
  if (probe < 0) TOGA_CUDA_TRY(cudaGetDevice(&probe));
  std::uint64_t gran = 0;
  {
    device_guard g(probe);
    TOGA_CUDA_TRY(cudaFree(nullptr));
    gran = share_granularity(probe, who.c_str());
  }
  toga::share_descriptor d = toga::check_share_descriptor<platform>(descriptor, descriptor_bytes, toga::memory_backend::cuda, gran, who);
  int dev = -1;
  for (int i = 0; i < count && dev < 0; ++i)
    if (std::memcmp(device_uuid(i).data(), d.device_uuid, 16) == 0) dev = i;
  if (dev < 0)
    throw std::invalid_argument(who + ": the heap lives on " + uuid_text(d.device_uuid) +
                                ", which this process does not see (CUDA_VISIBLE_DEVICES?); make that GPU visible to this process");
  if (device >= 0 && device != dev)
    throw std::invalid_argument(who + ": device " + std::to_string(device) + " is not the heap's (" + uuid_text(d.device_uuid) + " is device " +
                                std::to_string(dev) + " here); pass -1 or " + std::to_string(dev) + " (other GPUs cannot use a shared heap yet)");
  device_guard guard(dev);
  TOGA_CUDA_TRY(cudaFree(nullptr));
  if (dev != probe) {  // (the granularity checked above was the probe device's)
    const std::uint64_t g = share_granularity(dev, who.c_str());
    if (g != gran) d = toga::check_share_descriptor<platform>(descriptor, descriptor_bytes, toga::memory_backend::cuda, g, who);
  }
  heap h{import_tag{}};
  h.device_ = h.options_.device = dev;
  h.options_.shareable = true;
  h.options_.limit_bytes = d.limit_bytes;
  h.layout_ = toga::heap_layout::make<platform>(d.levels, d.arenas, static_cast<int>(d.sb_shift), d.sb_arenas);
  h.layout_.pins = d.pins;
  h.share_.reset(new share_impl);
  share_impl& s = *h.share_;
  s.d = d;
  s.imported = true;
  s.bytes[0] = d.heap_alloc_bytes;
  s.bytes[1] = d.meta_alloc_bytes;
  const char* what[2] = {"heap", "metadata"};
  const int fds[2] = {heap_fd, meta_fd};
  for (int i = 0; i < 2; ++i) {
    const CUresult r = driver().mem_import(&s.handle[i], reinterpret_cast<void*>(static_cast<std::uintptr_t>(fds[i])), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
      throw toga::bad_alloc(who + ": the driver ran out of memory importing the " + what[i] + " handle (" + vmm_provider::describe(r) + ")");
    if (r != CUDA_SUCCESS)
      throw std::invalid_argument(who + ": the " + what[i] + " file descriptor " + std::to_string(fds[i]) + " is not a CUDA memory handle (" +
                                  vmm_provider::describe(r) + "); pass the descriptors export_shareable() returned, received by this process");
    s.has_handle[i] = true;
    // (the device is the descriptor's, found by UUID; the handle's own location id is not compared:
    // the driver's numbering of it need not be this process's. The copies checked below decide.)
    CUmemAllocationProp p{};
    if (driver().mem_properties(&p, s.handle[i]) != CUDA_SUCCESS || p.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
      throw std::invalid_argument(who + ": the " + what[i] + " handle is not device memory; pass the handles and the descriptor of one "
                                  "export_shareable() call");
    const std::string err = s.map(i, dev);
    if (!err.empty() && err.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos)
      throw toga::bad_alloc(who + ": cannot map the " + what[i] + " handle: " + err + "; free device memory or address space");
    if (!err.empty())
      throw std::invalid_argument(who + ": the " + what[i] + " handle cannot be mapped as the " + std::to_string(s.bytes[i]) + " B the descriptor says (" +
                                  err + "): a handle of another heap, or a forged descriptor; pass the descriptor and handles of one export_shareable() call");
  }
  toga::share_descriptor copy{};
  TOGA_CUDA_TRY(cudaMemcpy(&copy, s.va[1] + d.header_off, sizeof copy, cudaMemcpyDeviceToHost));
  toga::check_share_header(d, &copy, "metadata", who);
  TOGA_CUDA_TRY(cudaMemcpy(&copy, s.va[0] + d.heap_bytes, sizeof copy, cudaMemcpyDeviceToHost));
  toga::check_share_header(d, &copy, "heap", who);
  h.meta_ = s.va[1];
  h.open_account("imported, " + toga::format_bytes(d.heap_bytes));
  h.view_ = device_allocator::make(s.va[0], h.meta_, h.layout_);
  // the metadata's resident copy of the view holds the exporter's addresses: this process keeps its own
  own_resident(h.view_, s.resident);
  h.options_.system_scope = (d.flags & toga::share_flag_system_scope) != 0;
  if (h.options_.system_scope) h.make_system_view();
  return h;
}

void heap::grant_access(int device) {
  const std::string who = "toga::cuda::heap::grant_access";
  if (!meta_) throw std::logic_error(who + ": the heap was moved from");
  int count = 0;
  TOGA_CUDA_TRY(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    throw std::invalid_argument(who + ": device " + std::to_string(device) + " is not in [0, " + std::to_string(count) + ") (the devices CUDA sees)");
  if (device == device_) return;
  if (!options_.system_scope)
    throw std::logic_error(who + ": the heap was made without heap_options::system_scope; its device-scope atomics are not atomic across "
                           "GPUs: make it with system_scope = true");
  int can = 0;
  TOGA_CUDA_TRY(cudaDeviceCanAccessPeer(&can, device, device_));
  if (!can)
    throw std::invalid_argument(who + ": device " + std::to_string(device) + " cannot access device " + std::to_string(device_) +
                                "'s memory (no NVLink or PCIe peer-to-peer path); use the heap from device " + std::to_string(device_) + " only");
  {
    device_guard guard(device);
    const cudaError_t e = cudaDeviceEnablePeerAccess(device_, 0);  // cudaMalloc'd memory: the metadata's neighbours, resident copies
    if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
    else TOGA_CUDA_TRY(e);
  }
  if (share_) {  // VMM mappings: access is per mapping
    CUmemAccessDesc d{};
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = device;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (int i = 0; i < 2; ++i) {
      const CUresult r = driver().mem_set_access(reinterpret_cast<CUdeviceptr>(share_->va[i]), share_->bytes[i], &d, 1);
      if (r != CUDA_SUCCESS) throw cuda_error(cudaErrorInvalidValue, who + ": cuMemSetAccess for device " + std::to_string(device) + ": " + vmm_provider::describe(r));
    }
  }
}

std::uint64_t heap::export_pointer(const void* p) const {
  const std::uint64_t off = meta_ ? toga::share_offset(view_.small.base, view_.heap_bytes, p) : ~std::uint64_t{0};
  if (off == ~std::uint64_t{0})
    throw std::invalid_argument("toga::cuda::heap::export_pointer: the pointer is not inside this heap; export blocks this heap allocated");
  return off;
}

void* heap::import_pointer(std::uint64_t offset) const {
  if (!meta_ || offset >= view_.heap_bytes)
    throw std::invalid_argument("toga::cuda::heap::import_pointer: offset " + std::to_string(offset) + " is not below the heap's " +
                                std::to_string(capacity()) + " B; pass what export_pointer returned");
  return view_.small.base + offset;
}

}  // namespace toga::cuda
