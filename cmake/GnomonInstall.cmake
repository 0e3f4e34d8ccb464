# Installation of libgnomon for embedders: headers, static module libraries, a CMake package
# (find_package(gnomon) -> gnomon::gnomon; COMPONENTS redis etcd -> gnomon::redis, gnomon::etcd)
# and pkg-config files (gnomon.pc, gnomon-redis.pc, gnomon-etcd.pc).
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

# The Redis and etcd coordinators: a component each, in an export set of its own, so that an
# embedder of the SQLite backend alone needs neither hiredis nor cpp-httplib.
foreach(component redis etcd)
  set_target_properties(gnomon_coord_${component} PROPERTIES EXPORT_NAME ${component})
  install(TARGETS gnomon_coord_${component}
    EXPORT gnomon-${component}-targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT gnomon-${component}-targets NAMESPACE gnomon::
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gnomon)
endforeach()

# pkg-config: modules in link order (users first, then what they use).
set(GNOMON_PC_LIBS "")
foreach(m gnomon_schedule gnomon_exec gnomon_net gnomon_coord_sqlite gnomon_coord_memory gnomon_coord_util
          gnomon_job gnomon_cron gnomon_time gnomon_base)
  string(APPEND GNOMON_PC_LIBS " -l${m}")
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/gnomon.pc.in ${PROJECT_BINARY_DIR}/gnomon.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gnomon.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# gnomon-redis.pc and gnomon-etcd.pc: the coordinator's library before gnomon's (which it uses),
# then what it links.
set(GNOMON_PC_COMPONENT redis)
set(GNOMON_PC_COMPONENT_DESCRIPTION "the Redis coordinator (redis://, rediss://, Sentinel)")
set(GNOMON_PC_COMPONENT_REQUIRES "hiredis openssl")
configure_file(${PROJECT_SOURCE_DIR}/cmake/gnomon-component.pc.in ${PROJECT_BINARY_DIR}/gnomon-redis.pc @ONLY)
set(GNOMON_PC_COMPONENT etcd)
set(GNOMON_PC_COMPONENT_DESCRIPTION "the etcd coordinator (etcd://, etcds://)")
set(GNOMON_PC_COMPONENT_REQUIRES "cpp-httplib openssl")
configure_file(${PROJECT_SOURCE_DIR}/cmake/gnomon-component.pc.in ${PROJECT_BINARY_DIR}/gnomon-etcd.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gnomon-redis.pc ${PROJECT_BINARY_DIR}/gnomon-etcd.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
