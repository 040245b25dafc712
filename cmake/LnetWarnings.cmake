# Warnings as errors for the project's own code; call lnet_warnings(target).
function(lnet_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Werror
    $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual>
    -Wshadow)
  if(LNET_THREAD_SAFETY)
    # The lock annotations of <lnet/mutex.hpp>: a guarded member touched without its
    # lock, or a function called without the lock it requires, fails the build.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wthread-safety>)
  endif()
endfunction()
