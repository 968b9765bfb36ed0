// SPDX-License-Identifier: MIT
// holdfast/testing/store_factory.hpp - store factories: how the kit (sim_store, run_schedule,
// check_store) builds a user's store. A factory is called as F(sim_clock, const store_env&),
// F(sim_clock) or F(), and returns the store or a std::unique_ptr to it:
//
//   factory takes            | the store judges expiry by      | gets
//   -------------------------+---------------------------------+--------------------------------
//   (sim_clock, store_env)   | its node's simulated clock      | a directory for its files
//   (sim_clock)              | its node's simulated clock      | -
//   ()                       | its own (real) clock            | - (expiry cannot be judged)
//
// store_env is public; the traits and helpers under detail:: are the kit's.
//
// Thread-safety: store_env is a plain value; scratch_dir names are unique across threads.
#ifndef HOLDFAST_TESTING_STORE_FACTORY_HPP
#define HOLDFAST_TESTING_STORE_FACTORY_HPP

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/random.hpp"
#include "holdfast/testing/simulator.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// What the kit gives a store factory that asks for it (factory(sim_clock, const store_env&)),
/// besides the clock: a place for a store that persists its state (a database file).
struct store_env {
  /// A directory for the store's files: new and empty for each schedule, the same for every
  /// store made in that schedule (after a restart, the factory reopens what is there), and
  /// removed with its contents when the schedule ends.
  std::string dir;
  /// Restarts before this call: 0 for a schedule's first store, then 1, 2, ...
  std::uint32_t restarts = 0;
  /// The machine's boot identity: 0 for the schedule's first boot, then 1, 2, ... after each
  /// machine reboot (store_fault_options::reboots). A store that keeps leases across restarts
  /// must drop those of an earlier boot (their holders' processes died with the machine, and the
  /// store's clock started over) and keep its token counter.
  std::uint64_t boot = 0;
  /// Where a new store's token counter starts: its first token must be greater than this (0: from
  /// the beginning). The kit starts it near the ends of the range (2^31, 2^32, 2^53, 2^63 minus a
  /// few; conformance_options::counter_starts) to check token order across each boundary: a
  /// store that can must honour it (as raise_token_floor() does for a store that has one).
  std::uint64_t counter_start = 0;
};

/// Restarts that may lose a store's state, shared by the stores of one run (e.g. how many members
/// of a quorum may come back empty): see sim_store::on_restart. Not thread-safe; the simulator's
/// thread only.
struct restart_budget {
  /// How many more restarts may still run their on_restart action (>= 0).
  int left = 0;
};

namespace detail {
/// Thrown at a step point of an operation whose store went down with it inside (caught by
/// sim_store).
struct store_crash_unwind {};
}  // namespace detail

namespace detail {

template <class T>
struct unique_ptr_target {
  using type = void;
};
template <class T>
struct unique_ptr_target<std::unique_ptr<T>> {
  using type = T;
};

/// How a factory is called: 2 = F(sim_clock, const store_env&), 1 = F(sim_clock), 0 = F().
template <class F>
inline constexpr int factory_kind_v = std::is_invocable_v<F&, sim_clock, const store_env&> ? 2
                                      : std::is_invocable_v<F&, sim_clock>                 ? 1
                                                                                           : 0;

/// The store type a factory makes: S or std::unique_ptr<S>, from any of the three calls.
template <class F, int = factory_kind_v<F>>
struct factory_result {
  using type = std::decay_t<std::invoke_result_t<F&>>;
};
template <class F>
struct factory_result<F, 1> {
  using type = std::decay_t<std::invoke_result_t<F&, sim_clock>>;
};
template <class F>
struct factory_result<F, 2> {
  using type = std::decay_t<std::invoke_result_t<F&, sim_clock, const store_env&>>;
};

template <class F>
using factory_store_t = std::conditional_t<
    std::is_void_v<typename unique_ptr_target<typename factory_result<F>::type>::type>,
    typename factory_result<F>::type,
    typename unique_ptr_target<typename factory_result<F>::type>::type>;

/// True iff F can be called as a store factory: F(sim_clock, const store_env&), F(sim_clock) or
/// F().
template <class F>
inline constexpr bool is_store_factory_v =
    std::is_invocable_v<F&, sim_clock, const store_env&> || std::is_invocable_v<F&, sim_clock> ||
    std::is_invocable_v<F&>;

/// True iff the factory takes the store's clock (so expiry runs on simulated time).
template <class F>
inline constexpr bool factory_takes_clock_v = factory_kind_v<F> != 0;

/// True iff the factory takes a store_env (a directory for the store's files).
template <class F>
inline constexpr bool factory_takes_env_v = factory_kind_v<F> == 2;

/// Calls the factory and returns the store on the heap (stores need not be movable: a prvalue
/// initializes the new object directly).
template <class Store, class F>
std::unique_ptr<Store> make_store(F& make, sim_clock clock, const store_env& env = store_env{}) {
  const auto call = [&]() -> decltype(auto) {
    if constexpr (factory_kind_v<F> == 2) {
      return make(clock, env);
    } else if constexpr (factory_kind_v<F> == 1) {
      (void)env;
      return make(clock);
    } else {
      (void)clock;
      (void)env;
      return make();
    }
  };
  if constexpr (std::is_same_v<typename factory_result<F>::type, std::unique_ptr<Store>>) {
    return call();
  } else {
    return std::unique_ptr<Store>(new Store(call()));
  }
}

/// A new, empty directory for one schedule's store files (store_env::dir), removed with
/// everything in it when the schedule is done.
class scratch_dir {
 public:
  scratch_dir() {
    static std::atomic<std::uint64_t> made{0};
    char name[64];
    std::snprintf(name, sizeof name, "holdfast-kit-%016llx-%llu",
                  static_cast<unsigned long long>(holdfast::detail::thread_generator().next()),
                  static_cast<unsigned long long>(++made));
    path_ = (std::filesystem::temp_directory_path() / name).string();
    std::filesystem::create_directories(path_);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

/// The files of a store's directory (store_env::dir), by name, with their contents: a lagging
/// copy of a store that persists its state there (sim_store::keep_copies).
using dir_copy = std::vector<std::pair<std::string, std::string>>;

/// Reads every regular file directly in `dir` (a store's files; subdirectories are not read).
inline dir_copy read_dir(const std::string& dir) {
  dir_copy out;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    if (!f.is_regular_file(ec)) continue;
    std::ifstream in(f.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    out.emplace_back(f.path().filename().string(), std::move(bytes));
  }
  return out;
}

/// Makes `dir` hold exactly the files of `copy` (the others are removed), e.g. while no store has
/// them open, before the factory reopens the store from a lagging copy.
inline void write_dir(const std::string& dir, const dir_copy& copy) {
  std::error_code ec;
  std::vector<std::filesystem::path> old;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    if (f.is_regular_file(ec)) old.push_back(f.path());
  }
  for (const auto& p : old) std::filesystem::remove(p, ec);
  for (const auto& f : copy) {
    std::ofstream out(std::filesystem::path(dir) / f.first, std::ios::binary | std::ios::trunc);
    out.write(f.second.data(), static_cast<std::streamsize>(f.second.size()));
  }
}

}  // namespace detail

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_STORE_FACTORY_HPP
