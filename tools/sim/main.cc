// xpu-sim: the cluster simulator. All logic lives in sim_flags.cc and
// simulator.cc.
#include <iostream>
#include <string>
#include <vector>

#include "tools/sim/sim_flags.h"

int main(int argc, char** argv) {
  return xpu::sim::SimMain(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
