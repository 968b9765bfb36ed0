// SPDX-License-Identifier: MIT
// holdfast/send_receive.hpp - the optional send/receive capability of a LeaseStore, and the
// in-process marker: how a caller (quorum_store) can have requests to many stores in flight from
// ONE thread and take the replies in whatever order they come, as Redlock clients do (Sanfilippo,
// "Distributed locks with Redis": "the client tries to acquire the lock in all the N instances
// sequentially ... using the same key name and random value", with the requests multiplexed).
//
// A store with the capability splits each operation in two:
//
//   call                     | blocks? | does
//   -------------------------+---------+-------------------------------------------------------
//   send(request)            | never   | claims the store's connection and writes what the socket
//                            |         | takes; or declines (operation_would_block): connecting, or
//                            |         | another request in flight, would need a wait
//   interest()               | never   | the descriptor and direction (read/write) to poll for;
//                            |         | fd < 0 once receive() will not block
//   progress()               | never   | writes the rest / reads what arrived; true once complete
//   receive()                | at most | the reply; waits, if it is not complete, at most the
//                            | the     | store's own command timeout counted from send(); frees
//                            | timeout | the connection
//
// One request is in flight per store at a time; the store's ordinary (blocking) operations wait
// until its receive(). Every accepted send() must be followed by exactly one receive() (on any
// thread, never concurrently with another call for the same request): that is how a late reply
// (one the caller stopped waiting for) is still read and acted on, e.g. a late grant given back.
//
// An in-process store (memory_store) needs none of this: its operations finish in the caller's
// thread in well under a microsecond, so a quorum calls it directly, with no thread hand-off. It
// says so with `static constexpr bool completes_inline = true;`.
#ifndef HOLDFAST_SEND_RECEIVE_HPP
#define HOLDFAST_SEND_RECEIVE_HPP

#include <chrono>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/detect.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// The operations a store with the send/receive capability can split.
enum class store_op : unsigned char {
  try_acquire,        ///< key, owner, ttl -> store_reply::granted
  renew,              ///< key, owner, token, ttl -> store_reply::granted
  release,            ///< key, owner, token -> store_reply::done
  inspect,            ///< key -> store_reply::record
  raise_token,        ///< key, owner, token, to -> store_reply::done
  raise_token_floor,  ///< token (the floor) -> store_reply::done
};

/// One request in split form. The views need to stay valid only until send() returns (the store
/// copies what it sends). Fields an operation does not use are ignored.
struct store_request {
  store_op op = store_op::try_acquire;  ///< Which operation.
  std::string_view key{};               ///< The lease key.
  std::string_view owner{};             ///< The owner id.
  fencing_token token{};             ///< The token held (renew, release, raise_token) or the floor.
  fencing_token to{};                ///< raise_token: the token to re-label the lease with.
  std::chrono::milliseconds ttl{0};  ///< try_acquire, renew: the TTL in ms.
};

/// The reply to a store_request: the field named by its operation (see store_op) holds the
/// outcome, exactly as the blocking operation would have returned it; the others hold
/// errc::protocol_error.
struct store_reply {
  result<grant> granted{errc::protocol_error};                       ///< try_acquire, renew.
  result<void> done{errc::protocol_error};                           ///< release, raise_*.
  result<std::optional<lease_record>> record{errc::protocol_error};  ///< inspect.
};

/// What an in-flight request waits for: poll `fd` for reading and/or writing. fd < 0 means the
/// reply is complete (receive() will not block).
struct io_interest {
  int fd = -1;         ///< A socket descriptor, or -1.
  bool read = false;   ///< Wait until readable (POLLIN).
  bool write = false;  ///< Wait until writable (POLLOUT).
};

namespace detail {

template <class S>
using send_call = decltype(std::declval<S&>().send(std::declval<const store_request&>()));
template <class S>
using interest_call = decltype(std::declval<const S&>().interest());
template <class S>
using progress_call = decltype(std::declval<S&>().progress());
template <class S>
using receive_call = decltype(std::declval<S&>().receive());

template <class S>
struct has_send_receive : std::conjunction<is_detected_convertible<std::error_code, send_call, S>,
                                           is_detected_convertible<io_interest, interest_call, S>,
                                           is_detected_convertible<bool, progress_call, S>,
                                           is_detected_convertible<store_reply, receive_call, S>> {
};

template <class S, class = void>
struct completes_inline : std::false_type {};
template <class S>
struct completes_inline<S, std::void_t<decltype(S::completes_inline)>>
    : std::bool_constant<static_cast<bool>(S::completes_inline)> {};

}  // namespace detail

/// True iff S provides the send/receive capability (see the table in send_receive.hpp):
/// `std::error_code send(const store_request&)`, `io_interest interest() const`,
/// `bool progress()` and `store_reply receive()`. redis_store provides it.
template <class S>
inline constexpr bool has_send_receive_v = detail::has_send_receive<S>::value;

/// True iff S declares `static constexpr bool completes_inline = true`: its operations finish in
/// the caller's thread without waiting on I/O or another process, and it is thread-safe, so a
/// quorum calls it directly (memory_store).
template <class S>
inline constexpr bool completes_inline_v = detail::completes_inline<S>::value;

/// Returns the error code send() uses to decline a request it cannot start without blocking
/// (std::errc::operation_would_block): the caller then uses the blocking operation.
[[nodiscard]] inline std::error_code send_would_block() noexcept {
  return std::make_error_code(std::errc::operation_would_block);
}

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_SEND_RECEIVE_HPP
