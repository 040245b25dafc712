# Man pages: docs/man/NAME.S.md stays the source; at build time scripts/md2man.sh turns
# each into roff with lowdown (Debian's package, installed by scripts/setup.sh), gzipped
# as Debian ships man pages, so `man lnetctl` works once installed.
#   lnet_man_pages(COMPONENT comp PAGES lnetctl.8 lnetd.8 ...)
find_program(LNET_LOWDOWN lowdown)
find_program(LNET_GZIP gzip)
option(LNET_MAN "Build and install the man pages (needs lowdown)" ON)
if(LNET_MAN AND NOT (LNET_LOWDOWN AND LNET_GZIP))
  message(WARNING "lowdown or gzip not found: the man pages are not built (scripts/setup.sh installs lowdown; -DLNET_MAN=OFF silences this)")
  set(LNET_MAN OFF)
endif()
if(LNET_MAN)
  add_custom_target(man ALL)
endif()

function(lnet_man_pages)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "COMPONENT" "PAGES")
  if(NOT LNET_MAN)
    return()
  endif()
  foreach(page IN LISTS arg_PAGES)
    string(REGEX MATCH "\\.([1-8])$" _ "${page}")
    set(section ${CMAKE_MATCH_1})
    set(src ${PROJECT_SOURCE_DIR}/docs/man/${page}.md)
    set(out ${PROJECT_BINARY_DIR}/man/${page}.gz)
    add_custom_command(OUTPUT ${out}
      COMMAND ${PROJECT_SOURCE_DIR}/scripts/md2man.sh ${src} ${PROJECT_BINARY_DIR}/man/${page} ${PROJECT_VERSION}
      COMMAND ${LNET_GZIP} -9nf ${PROJECT_BINARY_DIR}/man/${page}
      DEPENDS ${src} ${PROJECT_SOURCE_DIR}/scripts/md2man.sh
      COMMENT "man page ${page}" VERBATIM)
    string(REPLACE "." "_" tgt "man_${page}")
    add_custom_target(${tgt} DEPENDS ${out})
    add_dependencies(man ${tgt})
    install(FILES ${out} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT ${arg_COMPONENT})
  endforeach()
endfunction()
