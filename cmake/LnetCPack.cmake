# Debian packages of the install components, made by CPack's DEB generator
# (scripts/package.sh; docs/design/packaging.md says why CPack):
#   lnet-utils     lnetd, lnetctl, lst, lnet-xfer, lnet-proxy, lst-node, lnet-proxy-supervise, their
#                  man pages, systemd units, /etc/lnet.conf and settings, completion
#   liblnet0, liblnet-up0, liblnet-mpi0   the runtime libraries
#   liblnet-dev    headers, the .so links, CMake package, pkg-config files, man 3 and 7
# Their dependencies on Debian's packages come from dpkg-shlibdeps (our own libraries are
# found in the build tree and named through the component dependencies instead).
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_PACKAGE_NAME lnet-mpi)
set(CPACK_PACKAGE_VENDOR "lnet-mpi")
set(CPACK_PACKAGE_CONTACT "lnet-mpi maintainers <lnet-mpi@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
    ${PROJECT_BINARY_DIR}/liblnet ${PROJECT_BINARY_DIR}/uplnd ${PROJECT_BINARY_DIR}/mpilnd)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://localhost/lnet-mpi")
set(CPACK_STRIP_FILES OFF)
set(CPACK_COMPONENTS_ALL tools liblnet liblnet-up dev)
if(LNET_WITH_MPI)
  list(APPEND CPACK_COMPONENTS_ALL liblnet-mpi)
endif()

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME lnet-utils)
set(CPACK_DEBIAN_LIBLNET_PACKAGE_NAME liblnet0)
set(CPACK_DEBIAN_LIBLNET-UP_PACKAGE_NAME liblnet-up0)
set(CPACK_DEBIAN_LIBLNET-MPI_PACKAGE_NAME liblnet-mpi0)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME liblnet-dev)
set(CPACK_DEBIAN_LIBLNET_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIBLNET-UP_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIBLNET-MPI_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)

# (The first line of every package's description is the project's; these follow it.)
set(CPACK_DEBIAN_TOOLS_DESCRIPTION
    "Daemons and tools: lnetd (the host LNet, wire-compatible with ksocklnd), lnetctl and lst as Lustre sites use them, lnet-xfer (serve a buffer; ping, PUT and GET with rates), the parallel proxy lnet-proxy and its supervisor, lst-node; systemd units for lnetd and a standing proxy job.")
set(CPACK_DEBIAN_LIBLNET_DESCRIPTION
    "The library liblnet: portals, PUT/GET, multi-rail, health, discovery, routing, the socket LND.")
set(CPACK_DEBIAN_LIBLNET-UP_DESCRIPTION "The UP LND library liblnet-up: the bridge between lnetd and the parallel proxy.")
set(CPACK_DEBIAN_LIBLNET-MPI_DESCRIPTION
    "The MPI LND library liblnet-mpi: LNet between the ranks of an MPI job, and through the proxy.")
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "Development files: headers of the C and C++ APIs, the CMake package and pkg-config files, man pages lnet(3) and lnet-lnd(7).")

set(CPACK_COMPONENT_TOOLS_DEPENDS liblnet liblnet-up)
set(CPACK_COMPONENT_LIBLNET-UP_DEPENDS liblnet)
set(CPACK_COMPONENT_DEV_DEPENDS liblnet liblnet-up)
if(LNET_WITH_MPI)
  list(APPEND CPACK_COMPONENT_TOOLS_DEPENDS liblnet-mpi)
  set(CPACK_COMPONENT_LIBLNET-MPI_DEPENDS liblnet)
  list(APPEND CPACK_COMPONENT_DEV_DEPENDS liblnet-mpi)
  set(CPACK_DEBIAN_TOOLS_PACKAGE_RECOMMENDS "openmpi-bin, bash-completion")
  set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libopenmpi-dev, linux-libc-dev")
else()
  set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "linux-libc-dev")
endif()
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "adduser")
# The files under /etc are the site's: dpkg keeps a changed one on upgrade (asking) and
# on remove; purge takes them.
# (Packages are made for the prefix /usr: elsewhere the files are not under /etc.)
set(CPACK_DEBIAN_TOOLS_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/debian/postinst ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
    ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(lnet_conffiles "/etc/lnet.conf\n/etc/default/lnet\n")
  if(EXISTS ${PROJECT_BINARY_DIR}/units/lnet-proxy.service)
    string(APPEND lnet_conffiles "/etc/default/lnet-proxy\n")
  endif()
  file(WRITE ${PROJECT_BINARY_DIR}/packaging/conffiles "${lnet_conffiles}")
  list(APPEND CPACK_DEBIAN_TOOLS_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/packaging/conffiles)
endif()
set(CPACK_DEBIAN_TOOLS_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
