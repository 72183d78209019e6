# zipmoe_warnings(target): the project's warning set. The build stays at zero warnings;
# CI turns them into errors with -DZIPMOE_WARNINGS_AS_ERRORS=ON.
function(zipmoe_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
    -Wunused -Woverloaded-virtual -Wconversion -Wnull-dereference
    -Wformat=2 -Wimplicit-fallthrough)
  if(ZIPMOE_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
