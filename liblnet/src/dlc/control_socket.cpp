// The control socket between lnetctl and a daemon: requests and responses as YAML
// documents (every string quoted and escaped, so what is encoded decodes to the same
// text), in length-prefixed frames.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <yaml-cpp/yaml.h>

#include <lnet/dlc.hpp>
#include <lnet/lnd/byteorder.hpp>

namespace lnet::dlc {

namespace {
// Plain scalars do not survive every string (a trailing CR, bytes that are not UTF-8):
// quote and escape everything so that what we encode decodes to the same text.
void exact_strings(YAML::Emitter& out) {
  out.SetStringFormat(YAML::DoubleQuoted);
  out.SetOutputCharset(YAML::EscapeNonAscii);
}
// Command and option names: 1..64 of [a-z0-9_-] (and single spaces between the words of
// a command). Anything else is not from lnetctl.
bool is_word(const std::string& s, bool spaces) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              (spaces && c == ' ');
    if (!ok) return false;
  }
  return true;
}
}  // namespace

std::string encode_request(const Request& r) {
  YAML::Node n;
  n["command"] = r.command;
  YAML::Node args(YAML::NodeType::Map);
  for (const auto& [k, vs] : r.args) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const auto& v : vs) list.push_back(v);
    args[k] = list;
  }
  n["args"] = args;
  n["body"] = r.body;
  YAML::Emitter out;
  exact_strings(out);
  out << n;
  return out.c_str();
}

Result<Request> decode_request(std::string_view text) {
  try {
    YAML::Node n = YAML::Load(std::string(text));
    if (!n.IsMap() || !n["command"] || !n["command"].IsScalar()) return Failure{-EPROTO, "request without a command"};
    Request r;
    r.command = n["command"].Scalar();
    if (!is_word(r.command, true)) return Failure{-EPROTO, "bad command name"};
    const YAML::Node args = n["args"];
    if (args && args.IsMap()) {
      for (const auto& kv : args) {
        std::vector<std::string> vs;
        if (kv.second.IsSequence()) {
          for (const auto& v : kv.second) vs.push_back(v.Scalar());
        } else if (kv.second.IsScalar()) {
          vs.push_back(kv.second.Scalar());
        }
        if (!kv.first.IsScalar() || !is_word(kv.first.Scalar(), false)) return Failure{-EPROTO, "bad option name"};
        r.args[kv.first.Scalar()] = vs;
      }
    }
    if (n["body"] && n["body"].IsScalar()) r.body = n["body"].Scalar();
    return r;
  } catch (const YAML::Exception& e) {
    return Failure{-EPROTO, std::string("bad request: ") + e.what()};
  }
}

std::string encode_response(const Response& r) {
  YAML::Node n;
  n["rc"] = r.rc;
  n["text"] = r.text;
  for (const std::string& w : r.warnings) n["warnings"].push_back(w);
  YAML::Emitter out;
  exact_strings(out);
  out << n;
  return out.c_str();
}

Result<Response> decode_response(std::string_view text) {
  try {
    YAML::Node n = YAML::Load(std::string(text));
    if (!n.IsMap() || !n["rc"]) return Failure{-EPROTO, "response without a status"};
    Response r;
    r.rc = n["rc"].as<int>();
    if (n["text"] && n["text"].IsScalar()) r.text = n["text"].Scalar();
    if (const YAML::Node w = n["warnings"]; w && w.IsSequence())
      for (const auto& line : w)
        if (line.IsScalar()) r.warnings.push_back(line.Scalar());
    return r;
  } catch (const YAML::Exception& e) {
    return Failure{-EPROTO, std::string("bad response: ") + e.what()};
  }
}

namespace {
// On a socket without SIGPIPE: a peer that closed is an error to handle (lnetd refusing
// a client answers and closes before reading its request), not a signal that kills.
int write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == ENOTSOCK) w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return 0;
}
int read_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (r == 0) return -ECONNRESET;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return 0;
}
}  // namespace

int write_frame(int fd, std::string_view payload) {
  if (payload.size() > kMaxFrame) return -EMSGSIZE;
  std::uint8_t len[4];
  wire::ByteWriter(len).u32(static_cast<std::uint32_t>(payload.size()));
  if (int rc = write_all(fd, reinterpret_cast<const char*>(len), 4)) return rc;
  return write_all(fd, payload.data(), payload.size());
}

int read_frame(int fd, std::string& out) {
  std::uint8_t len[4];
  if (int rc = read_all(fd, reinterpret_cast<char*>(len), 4)) return rc;
  std::uint32_t n = wire::ByteReader(len).u32();
  if (n > kMaxFrame) return -EPROTO;
  out.resize(n);
  return read_all(fd, out.data(), n);
}

}  // namespace lnet::dlc
