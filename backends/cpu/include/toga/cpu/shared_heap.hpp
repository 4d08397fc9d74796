//! @file toga/cpu/shared_heap.hpp
//! A toga heap shared by processes on the CPU (issue 32; docs/usage.md §13): the same core and
//! the same export / import protocol as toga::cuda::heap with heap_options::shareable
//! (toga/sharing.hpp), with the heap and its metadata in two memfd files instead of two
//! cuMemCreate handles, so that the protocol, its checks and two processes allocating and
//! freeing in one heap run in CI without a GPU.
//!
//! The exporter makes the heap (`shared_heap(bytes, arenas, limit)`); `export_shareable()`
//! returns the descriptor and the two file descriptors, which the application passes to another
//! process (a Unix socket with SCM_RIGHTS: tools/examples/fd_passing.hpp). There
//! `shared_heap::import(...)` checks them (toga::check_share_descriptor, then the sizes of the
//! files, then the descriptor's copy in the metadata), maps both files wherever there is room and
//! builds its own view; threads of both processes (toga::cpu::launch) then allocate and free in
//! the one heap through view(), and blocks travel between the processes as heap offsets
//! (export_pointer / import_pointer). The memory lives until the last process unmaps it (the
//! files are reference-counted by the kernel): an exporter may exit before its importers.
//!
//! Units: bytes. Alignment and size classes: as toga::cuda::heap. Thread-safety: view() from any
//! number of launched threads of any process; every other member is not thread-safe and must
//! run while no thread of this process uses the heap; check() and trim() need every process
//! quiescent. Linux only. A process killed while its threads are inside allocate or deallocate
//! may leave units it promised undelivered or a read-side section open (design.md §23.4): the
//! others may then wait for them forever.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>

#include "toga/allocator.hpp"
#include "toga/cpu/platform.hpp"
#include "toga/heap_walk.hpp"
#include "toga/sharing.hpp"

namespace toga::cpu {

//! Planted bugs of the import (tests only; shared_heap has none).
enum class share_bug : unsigned {
  none,
  import_uses_exporter_view,  //!< the importer's out-of-line members run on the exporter's view in the metadata
  trust_descriptor,           //!< no geometry, file-size or header check: the descriptor is believed
};

//! What another process needs to import a shared heap: the descriptor's bytes and two file
//! descriptors (owned by the exporting heap, valid while it lives; sending them dups them).
struct shareable_heap {
  share_descriptor descriptor;
  int heap_fd = -1;
  int meta_fd = -1;
};

template <share_bug Bug = share_bug::none>
class basic_shared_heap {
 public:
  using allocator_type = toga::allocator<platform>;

  //! Makes a heap of at least `bytes` (rounded up to a power of two, 4 KiB .. 128 GiB) in a memfd,
  //! with `arenas` UAlloc arenas and byte limit `limit_bytes` (0: none), ready to be exported.
  //! Throws std::invalid_argument (bytes or arenas out of range), std::runtime_error (the
  //! files or mappings cannot be had; the message names the call).
  explicit basic_shared_heap(std::uint64_t bytes, unsigned arenas = 4, std::uint64_t limit_bytes = 0) {
    if (bytes == 0 || bytes > heap_layout::max_heap_bytes)
      throw std::invalid_argument("toga::cpu::shared_heap: size " + std::to_string(bytes) + " B is not in [1, " +
                                  std::to_string(heap_layout::max_heap_bytes) + "]; ask for a smaller heap");
    if (arenas == 0 || arenas > 1024)
      throw std::invalid_argument("toga::cpu::shared_heap: arenas " + std::to_string(arenas) + " is not in [1, 1024]");
    layout_ = heap_layout::make<platform>(heap_layout::levels_for(bytes), arenas);
    const std::uint64_t heap_bytes = geom::page_bytes << (layout_.levels - 1);
    std::uint64_t header_off = 0;
    const std::uint64_t meta_alloc = share_meta_alloc_bytes(layout_, granularity(), &header_off);
    std::random_device rd;
    const std::uint64_t id = (std::uint64_t{rd()} << 32) ^ rd() ^ static_cast<std::uint64_t>(getpid());
    descriptor_ = make_share_descriptor(memory_backend::cpu, id, layout_, share_heap_alloc_bytes(heap_bytes, granularity()), meta_alloc, header_off,
                                        limit_bytes);
    try {
      heap_fd_ = make_file("toga-shared-heap", descriptor_.heap_alloc_bytes);
      meta_fd_ = make_file("toga-shared-heap-meta", meta_alloc);
      map_both();
    } catch (...) {
      unmap_and_close();
      throw;
    }
    view_ = allocator_type::make(base_, meta_, layout_);  // resident copy: meta_ + view_off (this process's)
    view_.init_after_zero(limit_bytes);
    std::memcpy(meta_ + descriptor_.header_off, &descriptor_, sizeof descriptor_);
    std::memcpy(base_ + heap_bytes, &descriptor_, sizeof descriptor_);
  }

  //! Maps a heap another process exported (export_shareable's descriptor bytes and its two file
  //! descriptors, received by this process; they are duplicated, the caller keeps its own).
  //! Throws std::invalid_argument when the descriptor is truncated, corrupted, of another
  //! version or backend, or inconsistent with its geometry, when a file is smaller than the
  //! descriptor says or is not a file, or when the metadata is another heap's (stale or foreign
  //! descriptor): the message says which; nothing stays mapped. std::runtime_error when the
  //! mappings cannot be had.
  static std::unique_ptr<basic_shared_heap> import(const void* descriptor, std::size_t n, int heap_fd, int meta_fd) {
    const std::string who = "toga::cpu::shared_heap::import";
    std::unique_ptr<basic_shared_heap> h(new basic_shared_heap());
    if constexpr (Bug == share_bug::trust_descriptor) {
      std::memcpy(&h->descriptor_, descriptor, sizeof h->descriptor_);
    } else {
      h->descriptor_ = check_share_descriptor<platform>(descriptor, n, memory_backend::cpu, granularity(), who);
      check_file(heap_fd, h->descriptor_.heap_alloc_bytes, "heap", who);
      check_file(meta_fd, h->descriptor_.meta_alloc_bytes, "metadata", who);
    }
    const share_descriptor& d = h->descriptor_;
    h->heap_fd_ = dup_or_throw(heap_fd, who);
    h->meta_fd_ = dup_or_throw(meta_fd, who);
    h->map_both();
    if constexpr (Bug != share_bug::trust_descriptor) {  // (on failure the destructor unmaps)
      check_share_header(d, h->meta_ + d.header_off, "metadata", who);
      check_share_header(d, h->base_ + d.heap_bytes, "heap", who);
    }
    h->layout_ = heap_layout::make<platform>(d.levels, d.arenas, static_cast<int>(d.sb_shift), d.sb_arenas);
    h->layout_.pins = d.pins;
    h->imported_ = true;
    h->view_ = allocator_type::make(h->base_, h->meta_, h->layout_);
    // The metadata's resident copy holds the exporter's addresses: this process keeps its own.
    if constexpr (Bug != share_bug::import_uses_exporter_view) {
      h->own_view_ = h->view_;
      h->own_view_.resident = &h->own_view_;
      h->view_.resident = &h->own_view_;
    }
    return h;
  }

  ~basic_shared_heap() { unmap_and_close(); }
  basic_shared_heap(const basic_shared_heap&) = delete;
  basic_shared_heap& operator=(const basic_shared_heap&) = delete;

  //! The allocator: allocate / deallocate from threads started by toga::cpu::launch.
  const allocator_type& view() const noexcept { return view_; }
  std::uint64_t capacity() const noexcept { return descriptor_.heap_bytes; }
  //! Whether this heap object was made by import (false: the exporter).
  bool imported() const noexcept { return imported_; }
  //! The descriptor and two new file descriptors (duplicates, close-on-exec) for another
  //! process, which the caller owns: send them, then close them (as with the CUDA heap's).
  //! Throws std::runtime_error when no descriptor can be duplicated (the process's limit).
  shareable_heap export_shareable() const {
    const int h = fcntl(heap_fd_, F_DUPFD_CLOEXEC, 0);
    const int m = h < 0 ? -1 : fcntl(meta_fd_, F_DUPFD_CLOEXEC, 0);
    if (h < 0 || m < 0) {
      const int e = errno;
      if (h >= 0) close(h);
      throw std::runtime_error(std::string("toga::cpu::shared_heap::export_shareable: cannot duplicate a file descriptor (") + std::strerror(e) +
                               "); close descriptors this process no longer needs");
    }
    return {descriptor_, h, m};
  }
  //! The heap offset of block `p` of this heap (what another process passes to import_pointer).
  //! Throws std::invalid_argument for a pointer outside the heap.
  std::uint64_t export_pointer(const void* p) const {
    const std::uint64_t off = share_offset(base_, capacity(), p);
    if (off == ~std::uint64_t{0})
      throw std::invalid_argument("toga::cpu::shared_heap::export_pointer: the pointer is not inside this heap; export blocks this heap allocated");
    return off;
  }
  //! This process's address of the block at heap offset `offset` (export_pointer's result in
  //! any process). Throws std::invalid_argument for an offset not below the capacity.
  void* import_pointer(std::uint64_t offset) const {
    if (offset >= capacity())
      throw std::invalid_argument("toga::cpu::shared_heap::import_pointer: offset " + std::to_string(offset) + " is not below the heap's " +
                                  std::to_string(capacity()) + " B; pass what export_pointer returned");
    return base_ + offset;
  }
  //! The statistics (shared: every process's allocations and frees). Exact at quiescence.
  heap_statistics stats() const { return collect_statistics(view_); }
  //! The heap walk (toga/heap_walk.hpp); every process quiescent.
  std::optional<std::string> check(heap_quality* q = nullptr) const { return check_quiescent(view_, q); }
  //! Gives back UAlloc's caches (allocator::trim); every process quiescent.
  void trim() {
    launch(1, 1, 1, [&] { view_.trim(); });
  }
  //! Where this process mapped the heap and its metadata (tests).
  char* base() const noexcept { return base_; }
  char* metadata() const noexcept { return meta_; }
  std::uint64_t metadata_bytes() const noexcept { return descriptor_.meta_alloc_bytes; }

 private:
  basic_shared_heap() = default;
  static std::uint64_t granularity() { return static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)); }
  static int make_file(const char* name, std::uint64_t bytes) {
    const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) throw std::runtime_error(std::string("toga::cpu::shared_heap: memfd_create: ") + std::strerror(errno));
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      const int e = errno;
      close(fd);
      throw std::runtime_error(std::string("toga::cpu::shared_heap: ftruncate(") + std::to_string(bytes) + "): " + std::strerror(e));
    }
    // no process may shrink or grow the file under another's mapping (SIGBUS)
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
      const int e = errno;
      close(fd);
      throw std::runtime_error(std::string("toga::cpu::shared_heap: sealing the memfd: ") + std::strerror(e));
    }
    return fd;
  }
  static void check_file(int fd, std::uint64_t bytes, const char* what, const std::string& who) {
    struct stat st {};
    if (fstat(fd, &st) != 0)
      throw std::invalid_argument(who + ": the " + what + " file descriptor " + std::to_string(fd) + " is not open (" + std::strerror(errno) +
                                  "); pass the descriptors export_shareable() returned, received by this process");
    if (!S_ISREG(st.st_mode))
      throw std::invalid_argument(who + ": the " + what + " file descriptor " + std::to_string(fd) +
                                  " is not a regular file (a pipe, socket or device); pass the descriptors export_shareable() returned");
    const int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
      throw std::invalid_argument(who + ": the " + what + " file is not a sealed toga memfd (its size could change under the mapping); "
                                  "pass the descriptors export_shareable() returned");
    if (static_cast<std::uint64_t>(st.st_size) != bytes)
      throw std::invalid_argument(who + ": the " + what + " file holds " + std::to_string(st.st_size) + " B, the descriptor says " +
                                  std::to_string(bytes) + " B: a file of another heap or a forged descriptor; pass the descriptor and "
                                  "file descriptors of one export_shareable() call");
  }
  static int dup_or_throw(int fd, const std::string& who) {
    const int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0) throw std::invalid_argument(who + ": cannot duplicate file descriptor " + std::to_string(fd) + ": " + std::strerror(errno));
    return d;
  }
  void map_both() {
    void* h = mmap(nullptr, descriptor_.heap_alloc_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, heap_fd_, 0);
    if (h == MAP_FAILED) throw std::runtime_error(std::string("toga::cpu::shared_heap: mmap of the heap: ") + std::strerror(errno));
    base_ = static_cast<char*>(h);
    void* m = mmap(nullptr, descriptor_.meta_alloc_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, meta_fd_, 0);
    if (m == MAP_FAILED) throw std::runtime_error(std::string("toga::cpu::shared_heap: mmap of the metadata: ") + std::strerror(errno));
    meta_ = static_cast<char*>(m);
  }
  void unmap_and_close() noexcept {
    if (base_) munmap(base_, descriptor_.heap_alloc_bytes);
    if (meta_) munmap(meta_, descriptor_.meta_alloc_bytes);
    if (heap_fd_ >= 0) close(heap_fd_);
    if (meta_fd_ >= 0) close(meta_fd_);
    base_ = meta_ = nullptr;
    heap_fd_ = meta_fd_ = -1;
  }

  share_descriptor descriptor_{};
  heap_layout layout_{};
  int heap_fd_ = -1, meta_fd_ = -1;
  char* base_ = nullptr;
  char* meta_ = nullptr;
  bool imported_ = false;
  allocator_type view_{};
  allocator_type own_view_{};  // an importer's resident copy of its view
};

//! The shared CPU heap.
using shared_heap = basic_shared_heap<>;

}  // namespace toga::cpu
