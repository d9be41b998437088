# `cmake --install` (docs/library.md). Two components:
#   runtime  bin/cann-dist-train, bin/cann-dashboard, share/cann-dist-train/knowledge_base (the
#            commands find it beside themselves, so the prefix may move);
#   dev      lib/libcdt.so (the communication core: the store, the communicator and its
#            collectives, the staged collectives on device memory), include/cdt/*.h (its contract) and lib/cmake/CannDistTrain, so that a
#            C++ program says find_package(CannDistTrain) and links cdt::cdt.
# The Python package installs with pip (setup.py), which takes the runtime component into the wheel.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The installed library is one shared object made of the static libraries the engine itself links
# (PIC throughout), so that their private dependencies (libsodium, OpenSSL, cpp-httplib) stay
# inside it and find_package needs only what the headers use (fmt, threads).
add_library(cdt SHARED $<TARGET_OBJECTS:cdt_comm> $<TARGET_OBJECTS:cdt_common> $<TARGET_OBJECTS:cdt_device>)
add_library(cdt::cdt ALIAS cdt)
target_link_libraries(cdt PUBLIC fmt::fmt Threads::Threads
                      PRIVATE PkgConfig::SODIUM OpenSSL::Crypto PkgConfig::HTTPLIB)
target_include_directories(cdt PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(cdt PROPERTIES VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)

# Installed programs keep the paths of the libraries they link from outside the build tree
# (a pip-installed libtorch in a virtual environment).
set_target_properties(cann-dist-train cann-dashboard PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS cann-dist-train cann-dashboard RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/knowledge_base
        DESTINATION ${CMAKE_INSTALL_DATADIR}/cann-dist-train COMPONENT runtime)

set(CDT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/CannDistTrain)
install(TARGETS cdt EXPORT CannDistTrainTargets COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/cdt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev)
install(EXPORT CannDistTrainTargets NAMESPACE cdt:: DESTINATION ${CDT_CMAKE_DIR} COMPONENT dev)
set(CDT_KNOWLEDGE_BASE_DIR ${CMAKE_INSTALL_DATADIR}/cann-dist-train/knowledge_base)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/CannDistTrainConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/CannDistTrainConfig.cmake
                              INSTALL_DESTINATION ${CDT_CMAKE_DIR}
                              PATH_VARS CDT_KNOWLEDGE_BASE_DIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/CannDistTrainConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/CannDistTrainConfig.cmake
              ${CMAKE_BINARY_DIR}/CannDistTrainConfigVersion.cmake
        DESTINATION ${CDT_CMAKE_DIR} COMPONENT dev)
