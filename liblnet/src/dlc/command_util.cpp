// What the command handlers share: error blocks, answers and argument parsing.
#include <cerrno>
#include <cstdlib>

#include "commands.hpp"
#include "yaml_print.hpp"

namespace lnet::dlc {

const std::string* Request::arg(const std::string& name) const {
  auto it = args.find(name);
  return it == args.end() || it->second.empty() ? nullptr : &it->second.front();
}

// As lnetctl 2.17 writes an error: the object with no value, its errno and descr beside
// it ("- route:\n  errno: -22\n  descr: ...").
YAML::Node error_item(const std::string& object, int rc, const std::string& descr) {
  YAML::Node item;
  item[object] = YAML::Node(YAML::NodeType::Null);
  item["errno"] = int_node(rc);
  YAML::Node d(descr);
  d.SetTag("!quoted");
  item["descr"] = d;
  return item;
}

// As lnetctl 2.17 writes a failed command: a YAML document of its own ("---" ... "..."),
// the netlink layout, the description as `! "..."`.
Response error_block(const std::string& verb, const std::string& object, int rc, const std::string& descr) {
  YAML::Node item = error_item(object, rc, descr);
  item["descr"].SetTag("!tag-dq");
  YAML::Node list(YAML::NodeType::Sequence);
  list.push_back(item);
  YAML::Node root;
  root[verb] = list;
  return Response{rc < 0 ? rc : -rc, "---\n" + print_yaml_netlink(root) + "...\n"};
}

Response ok(const YAML::Node& root) { return Response{0, root.IsNull() ? std::string() : print_yaml(root)}; }

Response ok_netlink(const YAML::Node& root) {
  return Response{0, root.IsNull() ? std::string() : print_yaml_netlink(root)};
}

Result<long> int_arg(const Request& r, const std::string& name, long def, long lo, long hi) {
  const std::string* v = r.arg(name);
  if (!v) return def;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v->c_str(), &end, 0);
  if (v->empty() || *end || errno || x < lo || x > hi) {
    return Failure{-EINVAL,
                   "--" + name + " '" + *v + "' is not a number in " + std::to_string(lo) + ".." + std::to_string(hi)};
  }
  return x;
}

std::vector<std::string> list_arg(const Request& r, const std::string& name) {
  std::vector<std::string> out;
  auto it = r.args.find(name);
  if (it == r.args.end()) return out;
  for (const std::string& v : it->second) {
    std::size_t i = 0;
    while (i <= v.size()) {
      std::size_t j = v.find(',', i);
      std::string item = v.substr(i, j == std::string::npos ? std::string::npos : j - i);
      if (!item.empty()) out.push_back(item);
      if (j == std::string::npos) break;
      i = j + 1;
    }
  }
  return out;
}

}  // namespace lnet::dlc
