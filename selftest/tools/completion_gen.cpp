// Writes the bash completion of lnetctl or lst from its command table, so that the
// completion cannot drift from the commands the tool takes. Run at build time; the
// output is installed under share/bash-completion/completions/.
//   completion_gen lnetctl|lst
#include <cstdio>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <lnet/dlc.hpp>
#include <selftest/lst.hpp>

namespace {

// The shared completer: the words typed so far name a command prefix ("net", "fault
// drop"); before a whole command it offers the next words of the commands that start so,
// after one that command's options. CMDS and OPTS are the tool's tables below it.
const char* kCompleter = R"SH(_lnet_complete() {  # CMDS_ARRAY OPTS_MAP GLOBAL_OPTIONS OPTION_WITH_VALUE
  local -n cmds=$1 opts=$2
  local global=$3 valued=$4 cur=${COMP_WORDS[COMP_CWORD]} prefix="" i w c rest next=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]}
    if [[ $w == -* ]]; then
      [[ -n $valued && $w == "$valued" && -z $prefix ]] && ((i++))
      continue
    fi
    [[ -n $prefix && -n ${opts[$prefix]+x} ]] && break
    prefix+="${prefix:+ }$w"
  done
  if [[ -n $prefix && -n ${opts[$prefix]+x} ]]; then
    [[ $cur == -* ]] && COMPREPLY=($(compgen -W "${opts[$prefix]} --help" -- "$cur"))
    return 0
  fi
  if [[ -z $prefix && $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$global" -- "$cur"))
    return 0
  fi
  for c in "${cmds[@]}"; do
    if [[ -z $prefix ]]; then
      next+=("${c%% *}")
    elif [[ $c == "$prefix "* ]]; then
      rest=${c#"$prefix "}
      next+=("${rest%% *}")
    fi
  done
  COMPREPLY=($(compgen -W "$(printf '%s\n' "${next[@]}" | sort -u)" -- "$cur"))
}
)SH";

void write(const char* tool, const std::vector<lnet::dlc::CommandSpec>& table, const char* global, const char* valued) {
  std::string id = tool;
  std::printf(
      "# bash completion for %s: generated from its command table by completion_gen at build\n"
      "# time (selftest/tools/completion_gen.cpp); not to be edited.\n",
      tool);
  std::printf("%s", kCompleter);
  std::printf("_%s_cmds=(", id.c_str());
  for (const auto& c : table) std::printf(" \"%s\"", c.name);
  std::printf(" )\ndeclare -A _%s_opts=(\n", id.c_str());
  for (const auto& c : table) {
    std::string opts;
    for (const auto& o : c.options) {
      if (o.kind == lnet::dlc::OptionSpec::Kind::Positional || o.unsupported) continue;
      opts += std::string(opts.empty() ? "" : " ") + "--" + o.name;
    }
    std::printf("  [\"%s\"]=\"%s\"\n", c.name, opts.c_str());
  }
  std::printf(")\n_%s() { _lnet_complete _%s_cmds _%s_opts \"%s\" \"%s\"; }\ncomplete -F _%s %s\n", id.c_str(),
              id.c_str(), id.c_str(), global, valued, id.c_str(), tool);
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view tool = argc == 2 ? argv[1] : "";
  if (tool == "lnetctl") {
    write("lnetctl", lnet::dlc::commands(), "--socket --help --version --list-commands", "--socket");
  } else if (tool == "lst") {
    write("lst", lnet::selftest::lst::commands(), "--help --list-commands", "");
  } else {
    std::fprintf(stderr, "usage: completion_gen lnetctl|lst\n");
    return 2;
  }
  return 0;
}
