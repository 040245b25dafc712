// Prints a YAML::Node tree in the block layout of libyaml as lnetctl prints it: four
// spaces per level, sequence items as "- " at the parent's indent plus four, insertion
// order kept. yaml-cpp parses; this only prints.
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

namespace lnet::dlc {

std::string print_yaml(const YAML::Node& root);

}  // namespace lnet::dlc
