# zipmoe-plot: figure spec parsing, ticks, the chart's layout and pixels, and the executable end to
# end. Example PNGs go to ZIPMOE_ARTIFACTS_DIR (default: build/tests/artifacts) for a human to look at.
zipmoe_add_test(test_plot SOURCES tools/plot/test_plot.cpp LIBS zipmoe_plot)
target_include_directories(test_plot PRIVATE ${PROJECT_SOURCE_DIR}/tools/plot)
target_compile_definitions(test_plot PRIVATE
  ZIPMOE_PLOT_PATH="$<TARGET_FILE:zipmoe-plot>"
  ZIPMOE_DEFAULT_ARTIFACTS_DIR="${CMAKE_CURRENT_BINARY_DIR}/artifacts")
add_dependencies(test_plot zipmoe-plot)
