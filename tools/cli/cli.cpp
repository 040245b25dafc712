#include "cli.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace po = boost::program_options;

namespace lnet::cli {

void describe(const dlc::CommandSpec& spec, po::options_description& opts, po::options_description& hidden,
              po::positional_options_description& pos) {
  using K = dlc::OptionSpec::Kind;
  std::vector<const dlc::OptionSpec*> positionals;
  for (const dlc::OptionSpec& o : spec.options) {
    std::string name = o.name;
    if (o.short_name) name += std::string(",") + o.short_name;
    std::string help = o.help;
    if (o.unsupported) help += " (not supported yet: " + std::string(o.unsupported) + ")";
    switch (o.kind) {
      case K::Flag: opts.add_options()(name.c_str(), help.c_str()); break;
      case K::Value: opts.add_options()(name.c_str(), po::value<std::string>(), help.c_str()); break;
      case K::Values: opts.add_options()(name.c_str(), po::value<std::vector<std::string>>(), help.c_str()); break;
      case K::Level:
        opts.add_options()(name.c_str(), po::value<std::string>()->implicit_value("1"), help.c_str());
        break;
      case K::Positional:
        hidden.add_options()(name.c_str(), po::value<std::vector<std::string>>(), help.c_str());
        positionals.push_back(&o);
        break;
    }
  }
  for (std::size_t k = 0; k < positionals.size(); ++k)
    pos.add(positionals[k]->name, k + 1 == positionals.size() ? -1 : 1);
}

void to_args(const po::variables_map& vm, dlc::Request& req) {
  for (const auto& [key, val] : vm) {
    if (key == "help") continue;
    std::vector<std::string> vs;
    if (val.value().type() == typeid(std::string))
      vs.push_back(val.as<std::string>());
    else if (val.value().type() == typeid(std::vector<std::string>))
      vs = val.as<std::vector<std::string>>();
    req.args[key] = vs;
  }
}

int talk(const std::string& path, const dlc::Request& req, dlc::Response& resp) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) {
    ::close(fd);
    return -ENAMETOOLONG;
  }
  std::strcpy(a.sun_path, path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    int err = errno;
    ::close(fd);
    return -err;
  }
  int rc = dlc::write_frame(fd, dlc::encode_request(req));
  std::string frame;
  // A daemon that refuses us answers why and closes before it reads the request: the
  // answer is there to read even when the write found the connection closed.
  if (rc == 0 || rc == -EPIPE || rc == -ECONNRESET) rc = dlc::read_frame(fd, frame);
  ::close(fd);
  if (rc) return rc;
  auto r = dlc::decode_response(frame);
  if (!r) return r.code();
  resp = *r;
  return 0;
}

}  // namespace lnet::cli
