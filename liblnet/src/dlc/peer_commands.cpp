// lnetctl peer show | list | add | del, ping and discover.
#include <algorithm>

#include <lnet/log.hpp>
#include <lnet/nid_range.hpp>

#include "commands.hpp"
#include "yaml_print.hpp"

namespace lnet::dlc {

namespace {

// A peer NI as `peer show -v N` prints it (lnetctl 2.17): udsp info (4), state; its
// credits, refcount and statistics with the latencies (1); the counts by message type
// and health (2).
YAML::Node peer_ni_node(const PeerNiInfo& i, int verbose) {
  YAML::Node e;
  e["nid"] = i.nid.to_string();
  if (verbose > 3)
    e["udsp info"] = udsp_info_node(i.net_priority, i.selection_priority, i.preferred_gateways, i.preferred_sources);
  e["state"] = !i.aliveness ? "NA" : i.up ? "up" : "down";
  if (verbose > 0) {
    e["max_ni_tx_credits"] = int_node(i.max_tx_credits);
    e["available_tx_credits"] = int_node(i.tx_credits);
    e["min_tx_credits"] = int_node(i.min_tx_credits);
    e["tx_q_num_of_buf"] = int_node(static_cast<long>(i.tx_q_nob));
    e["available_rtr_credits"] = int_node(i.rtr_credits);
    e["min_rtr_credits"] = int_node(i.min_rtr_credits);
    e["refcount"] = int_node(i.refcount);
    put_statistics(e, i.sent, i.received, i.dropped, i.latency);
  }
  if (verbose > 1) {
    put_type_stats(e, i.sent, i.received, i.dropped);
    // Health, the failures that lowered it, and recovery.
    YAML::Node h;
    h["health value"] = int_node(i.health);
    h["dropped"] = int_node(static_cast<long>(i.hs_dropped));
    h["timeout"] = int_node(static_cast<long>(i.hs_timeout));
    h["error"] = int_node(static_cast<long>(i.hs_error));
    h["network timeout"] = int_node(static_cast<long>(i.hs_network_timeout));
    h["ping_count"] = int_node(static_cast<long>(i.ping_count));
    h["next_ping"] = int_node(static_cast<long>(i.next_ping));
    e["health stats"] = h;
  }
  return e;
}

YAML::Node peer_node(const PeerInfo& p, int verbose) {
  YAML::Node n;
  n["primary nid"] = p.primary_nid.to_string();
  n["Multi-Rail"] = p.multi_rail ? "true" : "false";
  if (verbose > 2) n["peer state"] = int_node(static_cast<long>(p.state));
  YAML::Node nis(YAML::NodeType::Sequence);
  for (const PeerNiInfo& i : p.nis) nis.push_back(peer_ni_node(i, verbose));
  n["peer ni"] = nis;
  return n;
}

// The `what:` list of the answers and the `manage:` list of the failures, in ping's and
// discover's compact layout (each failure's descr as lnetctl writes it: `! '...'`).
Response list_response(const char* what, const YAML::Node& list, const YAML::Node& errors, int rc) {
  std::string text;
  if (list.size() > 0) {
    YAML::Node root;
    root[what] = list;
    text = print_yaml_compact(root);
  }
  if (errors.size() > 0) {
    for (YAML::Node item : errors) item["descr"].SetTag("!tag-sq");
    YAML::Node root;
    root["manage"] = errors;
    text += print_yaml_compact(root);
  }
  return Response{rc, text};
}

// Whether LNet holds the peer of `nid` for multi-rail (what ping and discover say).
bool multi_rail_peer(Instance& lnet, Nid nid) {
  for (const PeerInfo& p : lnet.control().peer_info())
    for (const PeerNiInfo& n : p.nis)
      if (n.nid == nid) return p.multi_rail;
  return false;
}

// --nid of peer add/del: NIDs and NID ranges, expanded in LNet's order (at most the
// NIDs a peer may have besides its primary).
Result<std::vector<Nid>> nids_arg(const Request& r, const std::string& name) {
  std::vector<Nid> out;
  for (const std::vector<std::string>& values : {r.args.count(name) ? r.args.at(name) : std::vector<std::string>{}})
    for (const std::string& v : values) {
      auto n = expand_nid_list(v, kMaxNidsPerPeer);
      if (!n) return Failure{n.code(), "--" + name + ": " + n.message()};
      for (Nid x : *n)
        if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
      if (out.size() > kMaxNidsPerPeer)
        return Failure{-E2BIG, "--" + name + " names more than " + std::to_string(kMaxNidsPerPeer) + " NIDs"};
    }
  return out;
}

// --prim_nid: one NID (a range names no single primary).
Result<Nid> primary_arg(const std::string& text) {
  if (text.find_first_of("[*,") != std::string::npos)
    return Failure{-EINVAL, "--prim_nid " + text + ": a primary NID is one NID, not a list or range"};
  auto n = Nid::parse(text);
  if (!n) return Failure{-EINVAL, "--prim_nid: " + n.message()};
  if (n->is_any() || n->is_lo()) return Failure{-EINVAL, "--prim_nid " + n->to_string() + " cannot be a peer"};
  return *n;
}

// ping: each NID pinged; what it answers is printed, nothing recorded.
Response ping_nids(Instance& lnet, const Request& r) {
  auto nids = list_arg(r, "nid");
  if (nids.empty()) return error_block("manage", "ping", -EINVAL, "ping needs at least one NID");
  auto timeout = int_arg(r, "timeout", 1, 1, 3600);
  if (!timeout) return error_block("manage", "ping", timeout.code(), timeout.message());
  Nid source = Nid::any();
  if (const std::string* src = r.arg("source")) {
    auto s = Nid::parse(*src);
    if (!s) return error_block("manage", "ping", -EINVAL, "--source: " + s.message());
    source = *s;
  }
  YAML::Node list(YAML::NodeType::Sequence);
  YAML::Node errors(YAML::NodeType::Sequence);
  int first_rc = 0;
  for (const std::string& s : nids) {
    auto id = ProcessId::parse(s);
    if (!id) {
      errors.push_back(error_item("ping", -EINVAL, id.message()));
      if (!first_rc) first_rc = -EINVAL;
      continue;
    }
    auto res = lnet.ping(*id, std::chrono::seconds(*timeout), 256, source);
    if (!res) {
      errors.push_back(error_item("ping", res.code(), "failed to ping " + id->nid.to_string() + ": " + res.message()));
      if (!first_rc) first_rc = res.code();
      continue;
    }
    const PingInfo& info = res->info;
    YAML::Node p;
    p["primary nid"] = (info.nis.size() > 1 ? info.nis[1].nid : id->nid).to_string();
    // As lnetctl: multi-rail when LNet holds the peer so (discovery says it), not what
    // the reply's features offer.
    p["Multi-Rail"] = multi_rail_peer(lnet, id->nid) ? "true" : "false";
    YAML::Node pnis(YAML::NodeType::Sequence);
    for (std::size_t i = 1; i < info.nis.size(); ++i) {
      YAML::Node e;
      e["nid"] = info.nis[i].nid.to_string();
      pnis.push_back(e);
    }
    p["peer_ni"] = pnis;
    list.push_back(p);
  }
  return list_response("ping", list, errors, first_rc);
}

// discover: each NID's peer discovered (a round of the discovery state machine); the
// peer as it is afterwards, with every NI it has.
Response discover_nids(Instance& lnet, const Request& r) {
  auto nids = list_arg(r, "nid");
  if (nids.empty()) return error_block("manage", "discover", -EINVAL, "discover needs at least one NID");
  // A round is a ping and a push, each bounded by the transaction timeout.
  auto wait = std::chrono::seconds(2 * lnet.control().globals().transaction_timeout + 1);
  YAML::Node list(YAML::NodeType::Sequence);
  YAML::Node errors(YAML::NodeType::Sequence);
  int first_rc = 0;
  for (const std::string& s : nids) {
    auto nid = Nid::parse(s);
    if (!nid) {
      errors.push_back(error_item("discover", -EINVAL, nid.message()));
      if (!first_rc) first_rc = -EINVAL;
      continue;
    }
    auto res = lnet.control().discover(*nid, r.flag("force"), wait);
    if (!res) {
      errors.push_back(
          error_item("discover", res.code(), "failed to discover " + nid->to_string() + ": " + res.message()));
      if (!first_rc) first_rc = res.code();
      continue;
    }
    YAML::Node p;
    p["primary nid"] = res->primary_nid.to_string();
    p["Multi-Rail"] = res->multi_rail ? "true" : "false";
    YAML::Node pnis(YAML::NodeType::Sequence);
    for (const PeerNiInfo& n : res->nis) {
      YAML::Node e;
      e["nid"] = n.nid.to_string();
      pnis.push_back(e);
    }
    p["peer_ni"] = pnis;
    list.push_back(p);
  }
  return list_response("discover", list, errors, first_rc);
}

}  // namespace

Response peer_show(Instance& lnet, const Request& r, const Hooks&) {
  std::optional<Nid> filter;
  if (const std::string* n = r.arg("nid")) {
    auto p = Nid::parse(*n);
    if (!p) return error_block("show", "peer", -EINVAL, p.message());
    filter = *p;
  }
  auto verbose = int_arg(r, "verbose", 0, 0, INT_MAX);
  if (!verbose) return error_block("show", "peer", verbose.code(), verbose.message());
  YAML::Node list(YAML::NodeType::Sequence);
  for (const PeerInfo& p : lnet.control().peer_info()) {
    if (filter) {
      bool has = false;
      for (const auto& i : p.nis) has = has || i.nid == *filter;
      if (!has) continue;
    }
    list.push_back(peer_node(p, static_cast<int>(*verbose)));
  }
  if (filter && list.size() == 0)
    return error_block("show", "peer", -ENOENT, "no peer with NID " + filter->to_string());
  if (list.size() == 0) return ok(YAML::Node());  // no peer: nothing, as lnetctl
  YAML::Node root;
  root["peer"] = list;
  return ok_netlink(root);
}

Response peer_list(Instance& lnet, const Request&, const Hooks&) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const PeerInfo& p : lnet.control().peer_info()) {
    YAML::Node e;
    e["nid"] = p.primary_nid.to_string();
    list.push_back(e);
  }
  YAML::Node root;
  root["peer list"] = list;
  return ok_netlink(root);
}

Response peer_add(Instance& lnet, const Request& r, const Hooks&) {
  const std::string* prim = r.arg("prim_nid");
  if (!prim) return error_block("add", "peer_ni", -EINVAL, "peer add needs --prim_nid");
  auto primary = primary_arg(*prim);
  if (!primary) return error_block("add", "peer_ni", primary.code(), primary.message());
  auto nids = nids_arg(r, "nid");
  if (!nids) return error_block("add", "peer_ni", nids.code(), nids.message());
  nids->erase(std::remove(nids->begin(), nids->end(), *primary), nids->end());
  Status s = lnet.control().add_peer(PeerConfig{*primary, !r.flag("non_mr"), *nids, r.flag("lock_prim")}, true);
  if (!s) return error_block("add", "peer_ni", s.code(), s.message());
  return ok(YAML::Node());
}

Response peer_del(Instance& lnet, const Request& r, const Hooks&) {
  const std::string* prim = r.arg("prim_nid");
  if (!prim) return error_block("del", "peer_ni", -EINVAL, "peer del needs --prim_nid");
  auto primary = primary_arg(*prim);
  if (!primary) return error_block("del", "peer_ni", primary.code(), primary.message());
  auto nids = nids_arg(r, "nid");
  if (!nids) return error_block("del", "peer_ni", nids.code(), nids.message());
  Status s = lnet.control().del_peer(*primary, *nids, r.flag("force"));
  if (!s) return error_block("del", "peer_ni", s.code(), s.message());
  return ok(YAML::Node());
}

Response ping(Instance& lnet, const Request& r, const Hooks&) { return ping_nids(lnet, r); }
Response discover(Instance& lnet, const Request& r, const Hooks&) { return discover_nids(lnet, r); }

Response peer_set(Instance& lnet, const Request& r, const Hooks&) {
  auto health = int_arg(r, "health", -1, 0, 1000);
  if (!health) return error_block("set", "peer", -EINVAL, health.message());
  auto state = int_arg(r, "state", -1, 0, 0xffffffffL);
  if (!state) return error_block("set", "peer", -EINVAL, state.message());
  if (*health < 0 && *state < 0)
    return error_block("set", "peer", -EINVAL, "peer set needs --health (0..1000) or --state");
  std::vector<Nid> nids;
  if (r.flag("all")) {
    nids.push_back(Nid::any());
  } else {
    for (const std::string& text : list_arg(r, "nid")) {
      auto p = Nid::parse(text);
      if (!p) return error_block("set", "peer", -EINVAL, p.message());
      nids.push_back(*p);
    }
    if (nids.empty()) return error_block("set", "peer", -EINVAL, "peer set needs --nid or --all");
  }
  if (*state >= 0 && (nids.size() != 1 || nids[0].is_any()))
    return error_block("set", "peer", -EINVAL, "peer set --state needs one --nid");
  for (Nid nid : nids) {
    if (*state >= 0)
      if (Status s = lnet.control().set_peer_state(nid, static_cast<std::uint32_t>(*state)); !s)
        return error_block("set", "peer", s.code(), s.message());
    if (*health >= 0)
      if (Status s = lnet.control().set_peer_ni_health(nid, static_cast<int>(*health)); !s)
        return error_block("set", "peer", s.code(), s.message());
  }
  return ok(YAML::Node());
}

Response debug_recovery(Instance& lnet, const Request& r, const Hooks&) {
  bool local = r.flag("local"), peer = r.flag("peer");
  if (local == peer) return error_block("debug", "recovery", -EINVAL, "debug recovery needs --local or --peer");
  YAML::Node q(YAML::NodeType::Map);
  std::vector<Nid> nids = lnet.control().recovery_queue(local);
  if (nids.empty()) return ok(YAML::Node());  // nothing in recovery: nothing to show, as lnetctl
  for (std::size_t k = 0; k < nids.size(); ++k) q["nid-" + std::to_string(k)] = nids[k].to_string();
  YAML::Node root;
  root[local ? "Local NI recovery" : "Peer NI recovery"] = q;
  return ok(root);
}

Response debug_peer(Instance& lnet, const Request& r, const Hooks&) {
  const std::string* text = r.arg("prim_nid");
  if (!text) text = r.arg("nid");
  if (!text) return error_block("debug", "peer", -EINVAL, "debug peer needs --prim_nid");
  auto nid = Nid::parse(*text);
  if (!nid) return error_block("debug", "peer", -EINVAL, nid.message());
  for (const PeerInfo& p : lnet.control().peer_info()) {
    bool has = false;
    for (const PeerNiInfo& n : p.nis) has = has || n.nid == *nid;
    if (!has) continue;
    // What peer show -v 4 says of it, line by line, into the log (nothing on stdout).
    YAML::Node root;
    root["peer"].push_back(peer_node(p, 4));
    std::string dump = print_yaml_netlink(root);
    std::size_t at = 0;
    while (at < dump.size()) {
      std::size_t nl = dump.find('\n', at);
      if (nl == std::string::npos) nl = dump.size();
      LNET_LOG(Warn, kLogConfig, "debug peer %s: %s", nid->to_string().c_str(), dump.substr(at, nl - at).c_str());
      at = nl + 1;
    }
    return ok(YAML::Node());
  }
  return error_block("debug", "peer", -ENOENT, "no peer with NID " + nid->to_string());
}

}  // namespace lnet::dlc
