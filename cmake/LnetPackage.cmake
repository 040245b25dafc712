# What a site installs beside the programs (component "tools"): systemd units, their
# settings files, the example /etc/lnet.conf, the run directory's tmpfiles entry; and the
# Debian packages CPack makes of the components (scripts/package.sh; docs/design/
# packaging.md says why CPack).

# /etc when the prefix is /usr (the packages), else PREFIX/etc (a scratch or /opt install
# never writes into the host's /etc).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(LNET_FULL_SYSCONFDIR /etc)
  set(lnet_sysconf_dest /etc)
  set(lnet_unit_dest /usr/lib/systemd/system)
else()
  set(LNET_FULL_SYSCONFDIR ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SYSCONFDIR})
  set(lnet_sysconf_dest ${CMAKE_INSTALL_SYSCONFDIR})
  set(lnet_unit_dest lib/systemd/system)
endif()
set(LNET_DEFAULTS_DIR ${LNET_FULL_SYSCONFDIR}/default)
set(pk ${PROJECT_SOURCE_DIR}/packaging)
set(units ${PROJECT_BINARY_DIR}/units)

configure_file(${pk}/lnetd.service.in ${units}/lnetd.service @ONLY)
install(FILES ${units}/lnetd.service DESTINATION ${lnet_unit_dest} COMPONENT tools)
# `systemctl start lnet`, as with Lustre's own service.
file(CREATE_LINK lnetd.service ${units}/lnet.service SYMBOLIC)
install(FILES ${units}/lnet.service DESTINATION ${lnet_unit_dest} COMPONENT tools)
install(FILES ${pk}/lnet.conf DESTINATION ${lnet_sysconf_dest} COMPONENT tools)
install(FILES ${pk}/lnet.default DESTINATION ${lnet_sysconf_dest}/default RENAME lnet COMPONENT tools)
install(FILES ${pk}/tmpfiles.conf DESTINATION ${lnet_unit_dest}/../../tmpfiles.d RENAME lnet.conf COMPONENT tools)

# The standing proxy job: Open MPI's ompi-server and mpirun (the proxy's name service is
# Open MPI's; an MPICH build installs no proxy units). Called where MPI was found.
function(lnet_proxy_units)
  set(MPI_DETERMINE_LIBRARY_VERSION TRUE)
  find_package(MPI REQUIRED COMPONENTS C)
  if(NOT MPI_C_LIBRARY_VERSION_STRING MATCHES "Open MPI")
    return()
  endif()
  get_filename_component(mpi_bin "${MPIEXEC_EXECUTABLE}" DIRECTORY)
  find_program(LNET_OMPI_SERVER ompi-server HINTS ${mpi_bin})
  find_program(LNET_MPIRUN NAMES mpirun.openmpi mpirun HINTS ${mpi_bin})
  foreach(v IN ITEMS LNET_OMPI_SERVER LNET_MPIRUN)
    if(NOT ${v})
      message(FATAL_ERROR "${v}: not found beside ${MPIEXEC_EXECUTABLE} (the proxy's units run it)")
    endif()
  endforeach()
  configure_file(${pk}/lnet-ompi-server.service.in ${units}/lnet-ompi-server.service @ONLY)
  configure_file(${pk}/lnet-proxy.service.in ${units}/lnet-proxy.service @ONLY)
  install(FILES ${units}/lnet-ompi-server.service ${units}/lnet-proxy.service DESTINATION ${lnet_unit_dest}
          COMPONENT tools)
  install(FILES ${pk}/lnet-proxy.default DESTINATION ${lnet_sysconf_dest}/default RENAME lnet-proxy COMPONENT tools)
endfunction()
