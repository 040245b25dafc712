// The libyaml-style block printer.
#include "yaml_print.hpp"

namespace lnet::dlc {

namespace {

bool needs_quotes(const std::string& s) {
  if (s.empty()) return true;
  if (s.front() == ' ' || s.back() == ' ') return true;
  static const std::string special = "-?:,[]{}#&*!|>'\"%@`";
  if (special.find(s.front()) != std::string::npos && s != "-" &&
      !(s.size() > 1 && s[0] == '-' && std::isdigit(static_cast<unsigned char>(s[1])))) {
    return true;
  }
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '#' || c == '\n' || c == '"' || c == '\t') return true;
    if (c == ':' && (i + 1 == s.size() || s[i + 1] == ' ')) return true;
  }
  return false;
}

std::string scalar(const YAML::Node& n) {
  std::string s = n.Scalar();
  if (n.Tag() == "!tag-sq") {  // libyaml's single-quoted style: a quote doubled
    std::string q = "! '";
    for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
    return q + "'";
  }
  if (n.Tag() == "!quoted" || n.Tag() == "!tag-dq" || needs_quotes(s)) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') q += '\\';
      if (c == '\n') {
        q += "\\n";
        continue;
      }
      q += c;
    }
    return (n.Tag() == "!tag-dq" ? "! " : "") + q + "\"";
  }
  return s;
}

// Where a layout puts things, relative to the column of the key or item that holds them.
struct Layout {
  int map;         // a mapping under a key
  int seq_top;     // a sequence under a top-level key
  int seq_nested;  // a sequence under a nested key
  int item;        // the content of an item, after its "-"
  int seq_in_seq;  // a sequence that is an item
};
// lnetctl's export layout: mappings four in, top-level items four in, nested ones two.
constexpr Layout kClassic{4, 4, 2, 2, 4};
// The netlink lnetctl's: six columns per level, sequences at their key's column.
constexpr Layout kNetlink{6, 0, 0, 6, 6};
// ping's and discover's: two columns per level, sequences at their key's column.
constexpr Layout kCompact{2, 0, 0, 2, 2};

void emit(const YAML::Node& n, int indent, const Layout& l, std::string& out);

void emit_map(const YAML::Node& n, int indent, bool first_inline, const Layout& l, std::string& out) {
  bool first = true;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!(first && first_inline)) out += std::string(static_cast<std::size_t>(indent), ' ');
    first = false;
    out += scalar(it->first) + ":";
    YAML::Node v = it->second;
    if (v.IsMap() && v.size() > 0) {
      out += "\n";
      emit(v, indent + l.map, l, out);
    } else if (v.IsSequence() && v.size() > 0) {
      out += "\n";
      emit(v, indent + (indent == 0 ? l.seq_top : l.seq_nested), l, out);
    } else if (v.IsMap()) {
      out += " {}\n";
    } else if (v.IsSequence()) {
      out += " []\n";
    } else if (v.IsNull()) {
      out += "\n";
    } else {
      out += " " + scalar(v) + "\n";
    }
  }
}

void emit(const YAML::Node& n, int indent, const Layout& l, std::string& out) {
  if (n.IsMap()) {
    emit_map(n, indent, false, l, out);
  } else if (n.IsSequence()) {
    std::string dash = "-" + std::string(static_cast<std::size_t>(l.item - 1), ' ');
    for (const auto& e : n) {
      out += std::string(static_cast<std::size_t>(indent), ' ') + dash;
      if (e.IsMap() && e.size() > 0) {
        emit_map(e, indent + l.item, true, l, out);
      } else if (e.IsSequence() && e.size() > 0) {
        out += "\n";
        emit(e, indent + l.seq_in_seq, l, out);
      } else {
        out += scalar(e) + "\n";
      }
    }
  } else if (n.IsScalar()) {
    out += std::string(static_cast<std::size_t>(indent), ' ') + scalar(n) + "\n";
  }
}

}  // namespace

std::string print_yaml_netlink(const YAML::Node& root) {
  std::string out;
  emit(root, 0, kNetlink, out);
  return out;
}

std::string print_yaml_compact(const YAML::Node& root) {
  std::string out;
  emit(root, 0, kCompact, out);
  return out;
}

YAML::Node int_node(long v) { return YAML::Node(std::to_string(v)); }

YAML::Node tunables_node(const NetTunables& t) {
  YAML::Node n;
  n["peer_timeout"] = int_node(t.peer_timeout);
  n["peer_credits"] = int_node(t.peer_credits);
  n["peer_buffer_credits"] = int_node(t.peer_buffer_credits);
  n["credits"] = int_node(t.credits);
  return n;
}

YAML::Node udsp_info_node(unsigned net_priority, unsigned nid_priority, const std::vector<std::string>& gateways,
                          const std::vector<Nid>& sources) {
  YAML::Node u;
  u["net priority"] = int_node(static_cast<int>(net_priority));
  u["nid priority"] = int_node(static_cast<int>(nid_priority));
  auto list = [&](const char* key, auto&& items) {
    if (items.empty()) return;
    YAML::Node m;
    for (std::size_t k = 0; k < items.size(); ++k) m["NID-" + std::to_string(k)] = items[k];
    u[key] = m;
  };
  list("Preferred gateway NIDs", gateways);
  std::vector<std::string> src;
  for (Nid n : sources) src.push_back(n.to_string());
  list("Preferred source NIDs", src);
  return u;
}

YAML::Node lnd_tunables_node(NetId net, const LndTunables& t, bool settable_only) {
  YAML::Node n;
  for (const LndTunableSpec& spec : lnd_tunables_of(net.type()))
    if (!settable_only || !spec.read_only) n[spec.name] = int_node(t.get_or(spec.name, spec.def));
  return n;
}

YAML::Node interfaces_node(const std::vector<std::string>& ifs) {
  YAML::Node n;
  for (std::size_t i = 0; i < ifs.size(); ++i) n[std::to_string(i)] = ifs[i];
  return n;
}

std::string cpt_list(const std::vector<unsigned>& cpts) {
  std::string s = "[";
  for (std::size_t i = 0; i < cpts.size(); ++i) s += (i ? "," : "") + std::to_string(cpts[i]);
  return s + "]";
}

std::string print_yaml(const YAML::Node& root) {
  std::string out;
  emit(root, 0, kClassic, out);
  return out;
}

namespace {

YAML::Node type_stats(const MsgTypeStats& s) {
  YAML::Node n;
  n["put"] = int_node(static_cast<long>(s.put));
  n["get"] = int_node(static_cast<long>(s.get));
  n["reply"] = int_node(static_cast<long>(s.reply));
  n["ack"] = int_node(static_cast<long>(s.ack));
  n["hello"] = int_node(static_cast<long>(s.hello));
  return n;
}

}  // namespace

void put_statistics(YAML::Node& n, const MsgTypeStats& sent, const MsgTypeStats& received, const MsgTypeStats& dropped,
                    const OpLatencies& latency) {
  YAML::Node st;
  st["send_count"] = int_node(static_cast<long>(sent.total()));
  st["recv_count"] = int_node(static_cast<long>(received.total()));
  st["drop_count"] = int_node(static_cast<long>(dropped.total()));
  auto put = [&st](const std::string& what, const LatencyFigures& f) {
    st[what + "_samples"] = int_node(static_cast<long>(f.samples));
    st[what + "_min_nsec"] = int_node(static_cast<long>(f.min_ns));
    st[what + "_max_nsec"] = int_node(static_cast<long>(f.max_ns));
    st[what + "_avg_nsec"] = int_node(static_cast<long>(f.avg_ns));
  };
  put("put_egress", latency.put_egress);
  put("get_rtt", latency.get_rtt);
  put("put_ack", latency.put_ack);
  n["statistics"] = st;
}

void put_type_stats(YAML::Node& n, const MsgTypeStats& sent, const MsgTypeStats& received,
                    const MsgTypeStats& dropped) {
  n["sent_stats"] = type_stats(sent);
  n["received_stats"] = type_stats(received);
  n["dropped_stats"] = type_stats(dropped);
}

}  // namespace lnet::dlc
