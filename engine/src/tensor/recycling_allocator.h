// An allocator that keeps freed blocks of one size in a per-thread free list and hands them out again.
//
// Why: building a training step's graph makes and frees thousands of small objects of a few fixed sizes
// (one TensorImpl per tensor handle, one autograd Function per recorded op). glibc's malloc keeps only 7
// freed chunks a size in its per-thread cache; the rest go to its fastbins, which the next large request
// merges back (malloc_consolidate), so many of those allocations took malloc's slow path: in the GRU
// training step of scripts/bench_training.py, about 13% of the process's time was in malloc and free
// (perf) before the allocations per node were cut and these two objects recycled. CPython recycles its
// small objects the same way (pymalloc's pools; free lists for floats, tuples and frames).
//
// Each thread has its own list, so no lock is taken; a block freed on another thread than the one that
// allocated it simply joins that thread's list (every block is an ordinary ::operator new allocation).
// At most kMaxFree blocks a size and thread are kept; a thread's list is returned at its exit. Built with
// AddressSanitizer, nothing is recycled. Use with std::allocate_shared.
#pragma once
#include <cstddef>
#include <new>

namespace ts {

namespace detail {
// The free blocks of one size on one thread. The list itself is trivially destructible (usable until the
// thread is gone); a Reaper, made on the thread's first push, frees its blocks at the thread's exit and
// closes it, so that objects destroyed later in the exit free their blocks directly.
template <size_t Size>
class FreeList {
 public:
  static constexpr size_t kMaxFree = size_t{1} << 16;

  static void* pop() {
    List& list = local();
    Block* b = list.head;
    if (!b) return nullptr;
    list.head = b->next;
    list.count--;
    return b;
  }
  // false when the list is full or closed: the caller frees the block
  static bool push(void* p) {
    thread_local Reaper reaper;
    List& list = local();
    if (list.closed || list.count == kMaxFree) return false;
    list.head = ::new (p) Block{list.head};
    list.count++;
    return true;
  }

 private:
  struct Block {
    Block* next;
  };
  static_assert(Size >= sizeof(Block), "a free block holds the link to the next");
  struct List {
    Block* head = nullptr;
    size_t count = 0;
    bool closed = false;
  };
  struct Reaper {
    ~Reaper() {
      List& list = local();
      list.closed = true;
      while (list.head) {
        Block* next = list.head->next;
        ::operator delete(list.head);
        list.head = next;
      }
      list.count = 0;
    }
  };
  static List& local() {
    thread_local List list;
    return list;
  }
};
}  // namespace detail

template <typename T>
struct RecyclingAllocator {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "blocks come from the plain ::operator new");
#if defined(__SANITIZE_ADDRESS__)
  static constexpr bool kRecycle = false;  // AddressSanitizer sees every free, to report a use after it
#else
  static constexpr bool kRecycle = true;
#endif
  using value_type = T;
  RecyclingAllocator() = default;
  template <typename U>
  RecyclingAllocator(const RecyclingAllocator<U>&) {}  // NOLINT: rebinding, as std::allocator

  T* allocate(size_t n) {
    if (kRecycle && n == 1)
      if (void* p = detail::FreeList<sizeof(T)>::pop()) return static_cast<T*>(p);
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) {
    if (kRecycle && n == 1 && detail::FreeList<sizeof(T)>::push(p)) return;
    ::operator delete(p);
  }
  template <typename U>
  bool operator==(const RecyclingAllocator<U>&) const {
    return true;
  }
};

}  // namespace ts
