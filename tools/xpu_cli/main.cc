// xpu: command-line client of xpu-engine. All logic lives in cli.cc.
#include <cstdlib>
#include <iostream>

#include "tools/xpu_cli/cli.h"

int main(int argc, char** argv) {
  const char* env = std::getenv("XPU_ENGINE");
  return xpu::cli::RunCli(std::vector<std::string>(argv + 1, argv + argc), env ? env : "",
                          std::cout, std::cerr);
}
