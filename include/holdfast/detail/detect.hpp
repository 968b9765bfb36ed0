// SPDX-License-Identifier: MIT
// holdfast/detail/detect.hpp - the C++17 detection idiom (the Library Fundamentals TS v2's
// std::experimental::is_detected), so that each capability trait (store.hpp, clock.hpp,
// quorum_options.hpp, stores/cas_kv.hpp, send_receive.hpp) names its expression once, as an alias
// template, instead of spelling the call twice (once to detect it, once for its type):
//
//   template <class S>
//   using release_call = decltype(std::declval<S&>().release(key, owner, token));
//   template <class S>
//   struct has_release : is_detected_convertible<result<void>, release_call, S> {};
//
// Under C++20 the concepts (requires-expressions) say the same; these traits are the C++17
// spelling and feed the static_asserts that name what a type lacks. Not for users.
#ifndef HOLDFAST_DETAIL_DETECT_HPP
#define HOLDFAST_DETAIL_DETECT_HPP

#include <type_traits>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

template <class AlwaysVoid, template <class...> class Op, class... Args>
struct detector : std::false_type {};
template <template <class...> class Op, class... Args>
struct detector<std::void_t<Op<Args...>>, Op, Args...> : std::true_type {};

/// True iff Op<Args...> is well-formed.
template <template <class...> class Op, class... Args>
using is_detected = detector<void, Op, Args...>;

template <class AlwaysVoid, class To, template <class...> class Op, class... Args>
struct convertible_detector : std::false_type {};
template <class To, template <class...> class Op, class... Args>
struct convertible_detector<std::void_t<Op<Args...>>, To, Op, Args...>
    : std::is_convertible<Op<Args...>, To> {};

/// True iff Op<Args...> is well-formed and converts to To.
template <class To, template <class...> class Op, class... Args>
using is_detected_convertible = convertible_detector<void, To, Op, Args...>;

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_DETAIL_DETECT_HPP
