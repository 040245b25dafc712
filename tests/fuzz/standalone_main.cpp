// Runs a libFuzzer target without libFuzzer: every file of the corpus directories given,
// then a fixed number of deterministic mutations of them. Part of the default test run;
// the `fuzz` preset builds the same targets with -fsanitize=fuzzer for long runs.
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

// The input being run, written to ./fuzz-crash.bin if the target aborts or crashes (to
// replay: run the target on that file).
const std::vector<std::uint8_t>* g_current = nullptr;

extern "C" void on_crash(int sig) {
  if (g_current) {
    int fd = ::open("fuzz-crash.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      (void)!::write(fd, g_current->data(), g_current->size());
      ::close(fd);
    }
    const char msg[] = "fuzz: the failing input is in ./fuzz-crash.bin\n";
    (void)!::write(2, msg, sizeof msg - 1);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::vector<std::uint8_t>> seeds;
  int mutations = 20000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("-runs=", 0) == 0) {
      mutations = std::atoi(a.c_str() + 6);
      continue;
    }
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(a)) {
      for (auto& e : std::filesystem::directory_iterator(a)) files.push_back(e.path());
    } else {
      files.emplace_back(a);
    }
    for (auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  if (seeds.empty()) seeds.emplace_back();
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, on_crash);
  for (auto& s : seeds) {
    g_current = &s;
    LLVMFuzzerTestOneInput(s.data(), s.size());
  }
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int i = 0; i < mutations; ++i) {
    std::vector<std::uint8_t> in = seeds[next() % seeds.size()];
    int edits = 1 + static_cast<int>(next() % 8);
    for (int e = 0; e < edits; ++e) {
      switch (next() % 4) {
        case 0:
          if (!in.empty()) in[next() % in.size()] = static_cast<std::uint8_t>(next());
          break;
        case 1:
          if (!in.empty()) in.resize(next() % in.size());
          break;
        case 2:
          in.insert(in.begin() + static_cast<long>(in.empty() ? 0 : next() % in.size()),
                    static_cast<std::uint8_t>(next()));
          break;
        default:
          if (!in.empty()) in[next() % in.size()] ^= static_cast<std::uint8_t>(1u << (next() % 8));
      }
    }
    g_current = &in;
    LLVMFuzzerTestOneInput(in.data(), in.size());
  }
  g_current = nullptr;
  std::printf("%zu seed(s) and %d mutation(s) ran clean\n", seeds.size(), mutations);
  return 0;
}
