# Installation of libgnomon for embedders: headers, static module libraries, a CMake package
# (find_package(gnomon) -> gnomon::gnomon) and a pkg-config file (gnomon.pc).
include(CMakePackageConfigHelpers)

set(GNOMON_EXPORTED_MODULES
  gnomon_base gnomon_time gnomon_cron gnomon_job gnomon_schedule gnomon_exec gnomon_net gnomon_coord_util
  gnomon_coord_sqlite gnomon_coord_memory)

# The tz library by name when installed (its path belongs to the build machine).
set_property(TARGET gnomon_cctz PROPERTY INTERFACE_LINK_LIBRARIES
  "$<BUILD_INTERFACE:${CCTZ_LIBRARY}>;$<INSTALL_INTERFACE:cctz>")

# The one target embedders link.
# (The binary is called gnomon, so the library target is gnomon_lib, exported as gnomon::gnomon.)
add_library(gnomon_lib INTERFACE)
add_library(gnomon::gnomon ALIAS gnomon_lib)
set_target_properties(gnomon_lib PROPERTIES EXPORT_NAME gnomon)
target_link_libraries(gnomon_lib INTERFACE ${GNOMON_EXPORTED_MODULES})

install(TARGETS gnomon_lib gnomon_cctz ${GNOMON_EXPORTED_MODULES}
  EXPORT gnomonTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/gnomon DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT gnomonTargets NAMESPACE gnomon:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gnomon)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gnomonConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gnomonConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gnomon)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gnomonConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gnomonConfig.cmake ${PROJECT_BINARY_DIR}/gnomonConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gnomon)

# pkg-config: modules in link order (users first, then what they use).
set(GNOMON_PC_LIBS "")
foreach(m gnomon_schedule gnomon_exec gnomon_net gnomon_coord_sqlite gnomon_coord_memory gnomon_coord_util
          gnomon_job gnomon_cron gnomon_time gnomon_base)
  string(APPEND GNOMON_PC_LIBS " -l${m}")
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/gnomon.pc.in ${PROJECT_BINARY_DIR}/gnomon.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gnomon.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
