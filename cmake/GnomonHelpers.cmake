# Shared compile settings for every gnomon target.
add_library(gnomon_options INTERFACE)
target_compile_options(gnomon_options INTERFACE -Wall -Wextra -Werror
                                                -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC 12 at -O3 reports false -Wrestrict/-Wstringop-overflow inside std::string (GCC PR 105329).
  target_compile_options(gnomon_options INTERFACE -Wno-restrict -Wno-stringop-overflow)
endif()
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  # Clang checks the locks against src/base/thread_annotations.h (errors, with -Werror). Not
  # -Wthread-safety-precise: the scheduler's parts reach their shared engine lock through
  # different references (JobTable::mu() of each part's table_), which that check cannot tell
  # are one lock; a call with no lock held at all is still reported.
  target_compile_options(gnomon_options INTERFACE -Wthread-safety -Wno-thread-safety-precise)
endif()
if(GNOMON_SANITIZE)
  list(JOIN GNOMON_SANITIZE "," _gnomon_san)
  target_compile_options(gnomon_options INTERFACE -fsanitize=${_gnomon_san} -fno-omit-frame-pointer
                                                  -fno-sanitize-recover=all)
  target_link_options(gnomon_options INTERFACE -fsanitize=${_gnomon_san})
  if("thread" IN_LIST GNOMON_SANITIZE)
    # Asio brackets handler calls with std::atomic_thread_fence, which TSan cannot model (GCC:
    # -Werror=tsan). On Linux the hand-offs it guards go through mutex-protected queues that TSan
    # does see, so the TSan build leaves the fences out.
    target_compile_definitions(gnomon_options INTERFACE BOOST_ASIO_DISABLE_FENCED_BLOCK)
  endif()
endif()

if(GNOMON_BUILD_FUZZ)
  # Coverage feedback for the fuzzers from all library code.
  target_compile_options(gnomon_options INTERFACE -fsanitize=fuzzer-no-link)
endif()

# gnomon_module(NAME SOURCES ... DEPS ...): one static library per module under src/.
function(gnomon_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE $<BUILD_INTERFACE:gnomon_options>)
endfunction()

# gnomon_test(NAME SOURCES ... DEPS ... [LABELS ...]): one GoogleTest binary, one ctest entry.
function(gnomon_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT GNOMON_BUILD_TESTS)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${name} PRIVATE GNOMON_TESTDATA_DIR="${PROJECT_SOURCE_DIR}/tests/testdata")
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main gnomon_options)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "GNOMON_TESTDATA=${PROJECT_SOURCE_DIR}/tests/testdata")
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()
