// xpu-calibrate: GEMM peak and collective busbw of this node's GPUs. All
// logic lives in calibrate.cc.
#include <iostream>
#include <string>
#include <vector>

#include "tools/calibrate/calibrate.h"

int main(int argc, char** argv) {
  return xpu::calibrate::CalibrateMain(std::vector<std::string>(argv + 1, argv + argc), std::cout,
                                       std::cerr);
}
