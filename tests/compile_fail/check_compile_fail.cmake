# SPDX-License-Identifier: MIT
# Run as: cmake -DCOMPILER=... -DSTD_FLAG=... -DINCLUDE_DIR=... -DSOURCE=... -P check_compile_fail.cmake
# Passes iff SOURCE fails to compile with diagnostics matching every `// expect-error:` regex, and,
# when SOURCE has a `// holdfast: control` line, compiles with -DHOLDFAST_COMPILE_FAIL_CONTROL.
# The regexes are read here, at test time, so editing one needs no reconfigure.
cmake_minimum_required(VERSION 3.21)

file(STRINGS "${SOURCE}" expect_lines REGEX "^[ \t]*//[ \t]*expect-error:")
file(STRINGS "${SOURCE}" control_lines REGEX "^[ \t]*//[ \t]*holdfast:[ \t]*control[ \t]*$")
set(base_cmd "${COMPILER}" ${STD_FLAG} -fsyntax-only "-I${INCLUDE_DIR}" "${SOURCE}")

execute_process(COMMAND ${base_cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not")
endif()
foreach(line IN LISTS expect_lines)
  string(REGEX REPLACE "^[ \t]*//[ \t]*expect-error:[ \t]*" "" regex "${line}")
  string(STRIP "${regex}" regex)
  if(NOT out MATCHES "${regex}")
    message(FATAL_ERROR "${SOURCE} failed to compile, but not with the expected error.\n"
                        "expected (regex): ${regex}\ncompiler said:\n${out}")
  endif()
  message(STATUS "rejected as expected, matching: ${regex}")
endforeach()

if(control_lines)
  execute_process(COMMAND ${base_cmd} -DHOLDFAST_COMPILE_FAIL_CONTROL
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "control build of ${SOURCE} (-DHOLDFAST_COMPILE_FAIL_CONTROL) must compile, "
                        "but failed:\n${out}")
  endif()
  message(STATUS "control compiles")
endif()
