# xpu_add_gtest: one GoogleTest executable, registered with CTest.
#
#   xpu_add_gtest(<name>
#     SOURCES <file>...            # default: <name>.cc
#     LIBS <target>...             # linked privately, with GTest::gtest_main
#     [NO_MAIN]                    # the test has its own main()
#     [LABELS <label>...]
#     [TIMEOUT <seconds>]          # per test case, default 60
#     [DISCOVER_PER_CASE]          # one CTest test per TEST() (gtest_discover_tests)
#     [ONE_TEST]                   # the whole binary is one CTest test
#     [ARGS <arg>...])             # command-line arguments (implies ONE_TEST)
#
# By default each test case becomes its own CTest test (gtest_discover_tests),
# which lets `ctest -j` spread the cases. Further properties (compile
# definitions, include directories, dependencies) are set on the target
# <name> after the call.
include_guard(GLOBAL)

function(xpu_add_gtest name)
  cmake_parse_arguments(T "NO_MAIN;ONE_TEST" "TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  if(NOT T_SOURCES)
    set(T_SOURCES ${name}.cc)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock)
  if(NOT T_NO_MAIN)
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
  endif()
  if(T_ARGS OR T_ONE_TEST)
    add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
  else()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${T_TIMEOUT})
    # Labels go on after discovery: gtest_discover_tests flattens PROPERTIES,
    # which would split a list of labels into property names.
    if(T_LABELS)
      set(labels_script ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
      file(WRITE ${labels_script}
        "foreach(t IN LISTS ${name}_TESTS)\n"
        "  set_tests_properties(\"\${t}\" PROPERTIES LABELS \"${T_LABELS}\")\n"
        "endforeach()\n")
      set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_script})
    endif()
  endif()
endfunction()
