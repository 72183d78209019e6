# zipmoe_warnings(target): the project's warning set. The build stays at zero warnings;
# CI turns them into errors with -DZIPMOE_WARNINGS_AS_ERRORS=ON.
# zipmoe_warnings_on_sources(files...): the same set on our own files only, for targets that
# also compile generated code (QML type registration, qmlcachegen output) we do not control.
set(ZIPMOE_WARNING_FLAGS
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Wunused -Woverloaded-virtual -Wconversion -Wnull-dereference
  -Wformat=2 -Wimplicit-fallthrough)
if(ZIPMOE_WARNINGS_AS_ERRORS)
  list(APPEND ZIPMOE_WARNING_FLAGS -Werror)
endif()

function(zipmoe_warnings target)
  target_compile_options(${target} PRIVATE ${ZIPMOE_WARNING_FLAGS})
endfunction()

function(zipmoe_warnings_on_sources)
  foreach(f ${ARGN})
    if(f MATCHES "\\.cpp$")
      set_property(SOURCE ${f} APPEND PROPERTY COMPILE_OPTIONS ${ZIPMOE_WARNING_FLAGS})
    endif()
  endforeach()
endfunction()
