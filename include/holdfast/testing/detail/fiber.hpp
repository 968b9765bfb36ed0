// SPDX-License-Identifier: MIT
// holdfast/testing/detail/fiber.hpp - stackful fibers for the simulator: one stack per simulated
// client, switched in user space so that the shipped (blocking, synchronous) lease code can be
// suspended at any clock read or store call without a kernel thread hand-off.
//
// Not a public header. Only the simulator's scheduler uses it, with a strict star topology: the
// scheduler (the thread's own stack, "main") switches to one fiber, and that fiber switches back
// to main; fibers never switch to each other. That keeps the sanitizer bookkeeping simple.
//
//   platform                 | switch                            | cost here (round trip)
//   -------------------------+-----------------------------------+-----------------------
//   x86-64 ELF (Linux, BSD)  | 20 instructions of our own asm    | ~32 ns
//   anything else            | POSIX ucontext (swapcontext)      | ~700-950 ns (2 syscalls)
//
// swapcontext saves and restores the signal mask with a system call on every switch; a
// simulation switches hundreds of times per schedule, so the hand-written switch is what makes
// thousands of schedules per second possible (fuzz/README.md has the measurements).
//
// Sanitizers: under AddressSanitizer every switch is announced with
// __sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber (so ASan knows which stack is
// live and keeps a fake stack per fiber for detect_stack_use_after_return); under ThreadSanitizer
// each fiber is a __tsan_create_fiber and every switch a __tsan_switch_to_fiber.
//
// Stacks are mmap'd with a PROT_NONE guard page below them (an overflow faults instead of
// corrupting a neighbour) and pooled per thread, so running a schedule allocates no stack.
#ifndef HOLDFAST_TESTING_DETAIL_FIBER_HPP
#define HOLDFAST_TESTING_DETAIL_FIBER_HPP

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "holdfast/detail/config.hpp"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOLDFAST_FIBER_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define HOLDFAST_FIBER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(HOLDFAST_FIBER_ASAN)
#define HOLDFAST_FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(HOLDFAST_FIBER_TSAN)
#define HOLDFAST_FIBER_TSAN 1
#endif
#ifndef HOLDFAST_FIBER_ASAN
#define HOLDFAST_FIBER_ASAN 0
#endif
#ifndef HOLDFAST_FIBER_TSAN
#define HOLDFAST_FIBER_TSAN 0
#endif

#if HOLDFAST_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#if HOLDFAST_FIBER_TSAN
#include <sanitizer/tsan_interface.h>
#endif

#if defined(__x86_64__) && defined(__ELF__) && !defined(HOLDFAST_FIBER_FORCE_UCONTEXT)
#define HOLDFAST_FIBER_ASM_X86_64 1
#else
#define HOLDFAST_FIBER_ASM_X86_64 0
#include <ucontext.h>
#endif

#if HOLDFAST_FIBER_ASM_X86_64
// holdfast_fiber_switch(save, next): pushes the callee-saved registers (System V: rbx, rbp,
// r12-r15, and the MXCSR / x87 control words), stores the stack pointer in *save, loads `next`
// and pops the same frame from there. A new fiber's stack is laid out so that this pop "returns"
// into holdfast_fiber_trampoline with r12 = argument and r13 = entry function.
//
// The code lives in a COMDAT section group, so every translation unit that includes this header
// may emit it and the linker keeps one copy: header-only without an ODR problem.
extern "C" void holdfast_fiber_switch(void** save, void* next);
extern "C" void holdfast_fiber_trampoline();
__asm__(
    ".pushsection .text.holdfast_fiber_switch,\"axG\",@progbits,holdfast_fiber_switch,comdat\n"
    ".weak holdfast_fiber_switch\n"
    ".hidden holdfast_fiber_switch\n"
    ".type holdfast_fiber_switch,@function\n"
    "holdfast_fiber_switch:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  subq $8, %rsp\n"
    "  stmxcsr (%rsp)\n"
    "  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n"
    "  fldcw 4(%rsp)\n"
    "  addq $8, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    ".size holdfast_fiber_switch, .-holdfast_fiber_switch\n"
    ".popsection\n"
    ".pushsection .text.holdfast_fiber_trampoline,\"axG\",@progbits,holdfast_fiber_trampoline,"
    "comdat\n"
    ".weak holdfast_fiber_trampoline\n"
    ".hidden holdfast_fiber_trampoline\n"
    ".type holdfast_fiber_trampoline,@function\n"
    "holdfast_fiber_trampoline:\n"
    "  movq %r12, %rdi\n"
    "  callq *%r13\n"
    "  ud2\n"
    ".size holdfast_fiber_trampoline, .-holdfast_fiber_trampoline\n"
    ".popsection\n");
#endif

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

/// A fiber stack: `size` usable bytes starting at `base`, with a guard page just below `base`.
struct fiber_stack {
  void* mapping = nullptr;
  std::size_t mapping_size = 0;
  char* base = nullptr;
  std::size_t size = 0;
};

/// Usable bytes per fiber stack. The shipped lease code is shallow; sanitizers grow frames a lot.
#if HOLDFAST_FIBER_ASAN || HOLDFAST_FIBER_TSAN
inline constexpr std::size_t fiber_stack_size = std::size_t{512} * 1024;
#else
inline constexpr std::size_t fiber_stack_size = std::size_t{128} * 1024;
#endif

[[noreturn]] inline void fiber_fatal(const char* what) noexcept {
  std::fprintf(stderr, "holdfast simulator: %s\n", what);
  std::abort();
}

/// Per-thread pool of stacks, so a schedule's clients reuse the previous schedule's stacks.
class fiber_stack_pool {
 public:
  fiber_stack_pool() = default;
  fiber_stack_pool(const fiber_stack_pool&) = delete;
  fiber_stack_pool& operator=(const fiber_stack_pool&) = delete;
  ~fiber_stack_pool() {
    for (fiber_stack& s : free_) ::munmap(s.mapping, s.mapping_size);
    free_.clear();
    gone() = true;
  }

  fiber_stack get() {
    if (!free_.empty()) {
      fiber_stack s = free_.back();
      free_.pop_back();
      return s;
    }
    const long page_l = ::sysconf(_SC_PAGESIZE);
    const std::size_t page = page_l > 0 ? static_cast<std::size_t>(page_l) : 4096;
    fiber_stack s;
    s.mapping_size = fiber_stack_size + page;
    s.mapping =
        ::mmap(nullptr, s.mapping_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s.mapping == MAP_FAILED) fiber_fatal("cannot map a fiber stack");
    if (::mprotect(s.mapping, page, PROT_NONE) != 0) fiber_fatal("cannot protect a guard page");
    s.base = static_cast<char*>(s.mapping) + page;
    s.size = fiber_stack_size;
    return s;
  }

  void put(fiber_stack s) {
    if (gone()) {
      ::munmap(s.mapping, s.mapping_size);  // a fiber that outlived its thread's pool
    } else {
      free_.push_back(s);
    }
  }

  /// True once this thread's pool has been destroyed (thread exit): trivially destructible, so it
  /// can still be read by fibers destroyed later in the exit sequence.
  static bool& gone() noexcept {
    thread_local bool flag = false;
    return flag;
  }

 private:
  std::vector<fiber_stack> free_;
};

inline fiber_stack_pool& stack_pool() {
  thread_local fiber_stack_pool pool;
  return pool;
}

/// One execution context: either the thread's own ("main") context, or a fiber running `entry`
/// on a pooled stack. Switches only go main -> fiber -> main.
class fiber {
 public:
  using entry_fn = void (*)(void*);

  /// Makes the main context of the calling thread (no stack of its own).
  fiber() = default;
  fiber(const fiber&) = delete;
  fiber& operator=(const fiber&) = delete;
  ~fiber() { release(); }

  /// Prepares a fiber that will run entry(arg) when first switched to. entry must end by
  /// calling finish(main) (it must never return).
  void start(entry_fn entry, void* arg) {
    release();
    stack_ = stack_pool().get();
    char* top = stack_.base + stack_.size;
#if HOLDFAST_FIBER_ASM_X86_64
    // 16-byte aligned by stepping the pointer back (no integer-to-pointer cast).
    auto** sp = reinterpret_cast<void**>(top - (reinterpret_cast<std::uintptr_t>(top) & 15u));
    *--sp = nullptr;  // two null words: a terminating "return address" for backtraces, and
    *--sp = nullptr;  // 16-byte alignment at the trampoline's call
    *--sp = reinterpret_cast<void*>(&holdfast_fiber_trampoline);
    *--sp = nullptr;                         // rbp: ends frame-pointer walks
    *--sp = nullptr;                         // rbx
    *--sp = arg;                             // r12
    *--sp = reinterpret_cast<void*>(entry);  // r13
    *--sp = nullptr;                         // r14
    *--sp = nullptr;                         // r15
    --sp;                                    // MXCSR and x87 control word: power-on defaults
    auto* csr = reinterpret_cast<std::uint32_t*>(sp);
    csr[0] = 0x1f80;
    csr[1] = 0x037f;
    sp_ = sp;
#else
    (void)top;
    if (::getcontext(&ctx_) != 0) fiber_fatal("getcontext failed");
    ctx_.uc_stack.ss_sp = stack_.base;
    ctx_.uc_stack.ss_size = stack_.size;
    ctx_.uc_link = nullptr;
    entry_ = entry;
    arg_ = arg;
    // makecontext passes only ints: hand over `this` as two 32-bit halves.
    const auto self = reinterpret_cast<std::uintptr_t>(this);
    ::makecontext(&ctx_, reinterpret_cast<void (*)()>(&ucontext_entry), 2,
                  static_cast<unsigned>(self & 0xffffffffu),
                  static_cast<unsigned>(static_cast<std::uint64_t>(self) >> 32));
#endif
#if HOLDFAST_FIBER_TSAN
    tsan_ = __tsan_create_fiber(0);
    owns_tsan_ = true;
#endif
  }

  /// Switches from `from` (running now) to `to`; returns when something switches back to `from`.
  static void switch_to(fiber& from, fiber& to) {
    jump(from, to, false);
  }

  /// Leaves the running fiber `self` for good, switching to `to`. Never returns.
  [[noreturn]] static void finish(fiber& self, fiber& to) {
    jump(self, to, true);
    fiber_fatal("a finished fiber was resumed");
  }

  /// Must be the first call in a fiber's entry function: completes the switch into it.
  static void entered(fiber& main) {
#if HOLDFAST_FIBER_ASAN
    const void* bottom = nullptr;
    std::size_t size = 0;
    __sanitizer_finish_switch_fiber(nullptr, &bottom, &size);
    // The first switch into a fiber tells us where main's stack is: needed to switch back.
    main.stack_.base = static_cast<char*>(const_cast<void*>(bottom));
    main.stack_.size = size;
#else
    (void)main;
#endif
  }

  /// Makes `main` represent the calling thread's context (for TSan's fiber identity).
  static void bind_main(fiber& main) {
#if HOLDFAST_FIBER_TSAN
    main.tsan_ = __tsan_get_current_fiber();
#else
    (void)main;
#endif
  }

 private:
  static void jump(fiber& from, fiber& to, bool from_finished) {
#if HOLDFAST_FIBER_ASAN
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(from_finished ? nullptr : &fake_stack, to.stack_.base,
                                   to.stack_.size);
#else
    (void)from_finished;
#endif
#if HOLDFAST_FIBER_TSAN
    __tsan_switch_to_fiber(to.tsan_, 0);
#endif
#if HOLDFAST_FIBER_ASM_X86_64
    holdfast_fiber_switch(&from.sp_, to.sp_);
#else
    if (::swapcontext(&from.ctx_, &to.ctx_) != 0) fiber_fatal("swapcontext failed");
#endif
#if HOLDFAST_FIBER_ASAN
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
  }

  void release() noexcept {
    if (stack_.mapping != nullptr) {
      stack_pool().put(stack_);
      stack_ = fiber_stack{};
    }
#if HOLDFAST_FIBER_TSAN
    if (owns_tsan_) __tsan_destroy_fiber(tsan_);
    tsan_ = nullptr;
    owns_tsan_ = false;
#endif
  }

#if !HOLDFAST_FIBER_ASM_X86_64
  static void ucontext_entry(unsigned lo, unsigned hi) {
    const std::uint64_t self = (static_cast<std::uint64_t>(hi) << 32) | lo;
    fiber* f = reinterpret_cast<fiber*>(static_cast<std::uintptr_t>(self));
    f->entry_(f->arg_);
  }
  ucontext_t ctx_{};
  entry_fn entry_ = nullptr;
  void* arg_ = nullptr;
#endif

  void* sp_ = nullptr;
  fiber_stack stack_{};
#if HOLDFAST_FIBER_TSAN
  void* tsan_ = nullptr;
  bool owns_tsan_ = false;
#endif
};

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_FIBER_HPP
