# hook/layers_tests.cmake — tests of the interposition layers, included by
# hook/CMakeLists.txt when XPU_BUILD_TESTS is on. (hook_exports_unittest,
# which inspects the built libxpu_hook.so, is registered there.)
#
#   hook_comm_registry_unittest   communicator ids and sequence numbering
#   hook_layers_unittest          the *_hooks.cc entry points against a
#                                 recording double of the hook core and fake
#                                 "real" CUDA/cuBLAS/NCCL functions
#   hook_layers_missing_unittest  the same entry points with no real library
#   hook_symver_interposition     an unversioned preloaded definition binds a
#                                 versioned reference (as libxpu_hook.so's
#                                 do against libcudart.so.13's), and
#                                 dlsym(RTLD_NEXT) still finds the real one

set(XPU_LAYER_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/layers_fake_tracer.cc
  ${CMAKE_CURRENT_LIST_DIR}/cudart_hooks.cc
  ${CMAKE_CURRENT_LIST_DIR}/driver_hooks.cc
  ${CMAKE_CURRENT_LIST_DIR}/cublas_hooks.cc
  ${CMAKE_CURRENT_LIST_DIR}/cublaslt_hooks.cc
  ${CMAKE_CURRENT_LIST_DIR}/nccl_hooks.cc
  ${CMAKE_CURRENT_LIST_DIR}/comm_registry.cc)

add_executable(hook_comm_registry_unittest
  ${CMAKE_CURRENT_LIST_DIR}/comm_registry_unittest.cc
  ${CMAKE_CURRENT_LIST_DIR}/comm_registry.cc)
target_include_directories(hook_comm_registry_unittest PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(hook_comm_registry_unittest PRIVATE
  xpu_abi Threads::Threads GTest::gtest GTest::gtest_main)
gtest_discover_tests(hook_comm_registry_unittest DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 60)

# The layers and the core double, compiled once for both test programs.
add_library(xpu_hook_layers_testobj OBJECT ${XPU_LAYER_TEST_SOURCES})
target_include_directories(xpu_hook_layers_testobj PUBLIC
  ${CMAKE_CURRENT_LIST_DIR}/.. ${XPU_CUDA_INCLUDE})
target_link_libraries(xpu_hook_layers_testobj PUBLIC xpu_abi)

foreach(t layers layers_missing)
  # Linking an OBJECT library links its objects and passes on its includes.
  add_executable(hook_${t}_unittest ${CMAKE_CURRENT_LIST_DIR}/${t}_unittest.cc)
  target_link_libraries(hook_${t}_unittest PRIVATE
    xpu_hook_layers_testobj Threads::Threads GTest::gtest GTest::gtest_main)
  gtest_discover_tests(hook_${t}_unittest DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 60)
endforeach()

# Symbol-version probe: a "real" library whose symbol carries a version node
# (like cudaLaunchKernel@@libcudart.so.13), a program linked against it (so
# its reference is versioned), and an interposer built like libxpu_hook.so
# (anonymous version node, unversioned definition).
set(_probe ${CMAKE_CURRENT_BINARY_DIR}/symver_probe)
file(WRITE ${_probe}/real.c "int xpu_symver_probe(void) { return 1; }\n")
file(WRITE ${_probe}/real.map
  "libxpu_symver_real.so.1 { global: xpu_symver_probe; local: *; };\n")
file(WRITE ${_probe}/preload.c [=[
#define _GNU_SOURCE
#include <dlfcn.h>
int xpu_symver_probe(void) {
  int (*real)(void) = (int (*)(void))dlsym(RTLD_NEXT, "xpu_symver_probe");
  return 100 + (real ? real() : 0);
}
]=])
file(WRITE ${_probe}/preload.map "{ global: xpu_symver_probe; local: *; };\n")
file(WRITE ${_probe}/main.c [=[
#include <stdio.h>
int xpu_symver_probe(void);
int main(void) { printf("probe=%d\n", xpu_symver_probe()); return 0; }
]=])

add_library(xpu_symver_real SHARED ${_probe}/real.c)
set_target_properties(xpu_symver_real PROPERTIES OUTPUT_NAME xpu_symver_real SOVERSION 1
  LINK_DEPENDS ${_probe}/real.map)
target_link_options(xpu_symver_real PRIVATE -Wl,--version-script=${_probe}/real.map)

add_library(xpu_symver_preload SHARED ${_probe}/preload.c)
set_target_properties(xpu_symver_preload PROPERTIES LINK_DEPENDS ${_probe}/preload.map)
target_link_options(xpu_symver_preload PRIVATE -Wl,--version-script=${_probe}/preload.map)
target_link_libraries(xpu_symver_preload PRIVATE ${CMAKE_DL_LIBS})

add_executable(xpu_symver_main ${_probe}/main.c)
target_link_libraries(xpu_symver_main PRIVATE xpu_symver_real)

# Control: without the interposer the real (versioned) definition answers.
add_test(NAME hook_symver_control COMMAND xpu_symver_main)
set_tests_properties(hook_symver_control PROPERTIES
  PASS_REGULAR_EXPRESSION "probe=1\n" TIMEOUT 30)
# Preloaded unversioned definition wins and forwards to the real one.
add_test(NAME hook_symver_interposition
  COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=$<TARGET_FILE:xpu_symver_preload>
          $<TARGET_FILE:xpu_symver_main>)
set_tests_properties(hook_symver_interposition PROPERTIES
  PASS_REGULAR_EXPRESSION "probe=101\n" TIMEOUT 30)
