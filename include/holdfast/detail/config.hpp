// holdfast/detail/config.hpp - compiler and library feature switches, HOLDFAST_ASSERT.
//
// Not a public header: users do not include it. It decides whether exceptions are on (the core
// never throws, but it must let a user's store or clock exception through and must keep one out
// of destructors), whether C++20 concepts are available, and what a violated precondition does.
#ifndef HOLDFAST_DETAIL_CONFIG_HPP
#define HOLDFAST_DETAIL_CONFIG_HPP

#include <cstdio>
#include <cstdlib>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#define HOLDFAST_HAS_EXCEPTIONS 1
#else
#define HOLDFAST_HAS_EXCEPTIONS 0
#endif

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L && defined(__cpp_lib_concepts)
#define HOLDFAST_HAS_CONCEPTS 1
#elif defined(__cpp_concepts) && __cpp_concepts >= 201907L && __cplusplus >= 202002L
#define HOLDFAST_HAS_CONCEPTS 1
#else
#define HOLDFAST_HAS_CONCEPTS 0
#endif

// `try { ... } catch (...) { ... }` for the few places that must stop a user's exception (a
// destructor, a background thread). Under -fno-exceptions nothing can be thrown, so the guarded
// block runs plainly and the handler is dropped.
#if HOLDFAST_HAS_EXCEPTIONS
#define HOLDFAST_TRY try
#define HOLDFAST_CATCH_ALL catch (...)
#else
#define HOLDFAST_TRY if (true)
#define HOLDFAST_CATCH_ALL else
#endif

namespace holdfast::detail {

/// Reports a violated precondition and aborts. Only programming errors reach it (reading the
/// value of a result that holds an error); bad input never does, it gets an error code instead.
[[noreturn]] inline void assert_fail(const char* expr, const char* msg, const char* file,
                                     int line) noexcept {
  std::fprintf(stderr, "%s:%d: holdfast precondition failed: %s (%s)\n", file, line, msg, expr);
  std::abort();
}

}  // namespace holdfast::detail

/// HOLDFAST_ASSERT(cond, msg) checks a precondition of the public API. Define it before including
/// any holdfast header to route violations elsewhere (e.g. to your own assertion handler); it must
/// not return normally when `cond` is false. It stays active under NDEBUG: a precondition that is
/// violated in production is better caught than turned into undefined behaviour.
#ifndef HOLDFAST_ASSERT
#define HOLDFAST_ASSERT(cond, msg) \
  ((cond) ? static_cast<void>(0) : ::holdfast::detail::assert_fail(#cond, msg, __FILE__, __LINE__))
#endif

#endif  // HOLDFAST_DETAIL_CONFIG_HPP
