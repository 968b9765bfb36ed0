// SPDX-License-Identifier: MIT
// A main() for fuzz targets without libFuzzer: it feeds LLVMFuzzerTestOneInput every input named
// on the command line, so any compiler and any build (gcc, Debug, ASan, TSan) re-checks the seed
// corpus and every past crasher as an ordinary test (the idea of simdjson's standalone driver).
//
//   replay_<target> [FILE | DIRECTORY]...
//
// Directories are walked recursively in sorted path order, so two runs replay the same sequence.
// The empty input always runs first, as libFuzzer's does. Arguments starting with '-' are skipped,
// so a libFuzzer command line (`-runs=100 corpus/`) works unchanged. A failed invariant is the
// target's __builtin_trap(), which kills the process and so fails the test; a path that does not
// exist or cannot be read is an error too, since a silently empty replay proves nothing.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
// Optional in a target, as with libFuzzer; weak so that targets without it still link.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

namespace fs = std::filesystem;

// Runs one input from a buffer of exactly its size, so that AddressSanitizer reports a read even
// one byte past the end (a std::vector's spare capacity would hide it).
void run_one(const std::vector<char>& bytes) {
  const std::unique_ptr<std::uint8_t[]> exact(new std::uint8_t[bytes.size()]);
  std::copy(bytes.begin(), bytes.end(), exact.get());
  static_cast<void>(LLVMFuzzerTestOneInput(exact.get(), bytes.size()));
}

bool read_file(const fs::path& path, std::vector<char>& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

// Appends the regular files under `arg` (or `arg` itself) to `files`; false if `arg` is unusable.
bool collect(const fs::path& arg, std::vector<fs::path>& files) {
  std::error_code ec;
  if (fs::is_directory(arg, ec)) {
    std::vector<fs::path> found;
    for (fs::recursive_directory_iterator it(arg, ec), end; !ec && it != end; it.increment(ec)) {
      // .gitkeep and other dotfiles mark a directory in git; they are not inputs.
      if (it->is_regular_file(ec) && it->path().filename().string().rfind('.', 0) != 0) {
        found.push_back(it->path());
      }
    }
    if (ec) return false;
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
    return true;
  }
  if (fs::is_regular_file(arg, ec)) {
    files.push_back(arg);
    return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);

  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') continue;
    if (!collect(argv[i], files)) {
      std::fprintf(stderr, "replay: cannot read %s\n", argv[i]);
      return 1;
    }
  }

  run_one({});
  for (const fs::path& file : files) {
    std::vector<char> bytes;
    if (!read_file(file, bytes)) {
      std::fprintf(stderr, "replay: cannot read %s\n", file.string().c_str());
      return 1;
    }
    run_one(bytes);
  }
  std::printf("replay: %zu inputs (plus the empty input) ran without a failure\n", files.size());
  return 0;
}
