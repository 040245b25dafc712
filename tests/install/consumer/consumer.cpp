// Pings 0@lo through the installed C++ API.
#include <lnet/lnet.hpp>

#include <cstdio>

int main() {
  auto lnet = lnet::Instance::create();
  if (!lnet) return 1;
  auto r = (*lnet)->ping(lnet::ProcessId{lnet::Nid::lo(), (*lnet)->pid()}, std::chrono::milliseconds(1000));
  std::printf("C++ consumer: ping %s\n", r ? "ok" : r.message().c_str());
  return r ? 0 : 1;
}
