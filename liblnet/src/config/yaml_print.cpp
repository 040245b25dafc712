// The libyaml-style block printer.
#include "config/yaml_print.hpp"

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
  if (n.Tag() == "!quoted" || needs_quotes(s)) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') q += '\\';
      if (c == '\n') {
        q += "\\n";
        continue;
      }
      q += c;
    }
    return q + "\"";
  }
  return s;
}

void emit(const YAML::Node& n, int indent, std::string& out);
void emit_seq(const YAML::Node& n, int item, std::string& out);

void emit_value_after_key(const YAML::Node& v, int indent, std::string& out) {
  // `indent` is the column of the key.
  if (v.IsMap() && v.size() > 0) {
    out += "\n";
    emit(v, indent + 4, out);
  } else if (v.IsSequence() && v.size() > 0) {
    // lnetctl's layout: a top-level key's items four columns in, nested ones two.
    out += "\n";
    emit_seq(v, indent + (indent == 0 ? 4 : 2), out);
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

void emit_map(const YAML::Node& n, int indent, bool first_inline, std::string& out) {
  bool first = true;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!(first && first_inline)) out += std::string(static_cast<std::size_t>(indent), ' ');
    first = false;
    out += scalar(it->first) + ":";
    emit_value_after_key(it->second, indent, out);
  }
}

void emit(const YAML::Node& n, int indent, std::string& out) {
  if (n.IsMap()) {
    emit_map(n, indent, false, out);
  } else if (n.IsSequence()) {
    emit_seq(n, indent, out);
  } else if (n.IsScalar()) {
    out += std::string(static_cast<std::size_t>(indent), ' ') + scalar(n) + "\n";
  }
}

void emit_seq(const YAML::Node& n, int item, std::string& out) {
  for (const auto& e : n) {
    out += std::string(static_cast<std::size_t>(item), ' ') + "- ";
    if (e.IsMap() && e.size() > 0) {
      emit_map(e, item + 2, true, out);
    } else if (e.IsSequence() && e.size() > 0) {
      out += "\n";
      emit_seq(e, item + 4, out);
    } else {
      out += scalar(e) + "\n";
    }
  }
}

}  // namespace

std::string print_yaml(const YAML::Node& root) {
  std::string out;
  emit(root, 0, out);
  return out;
}

}  // namespace lnet::dlc
