# The schedule chart: TimelineModel (sorting, visible range, merging, index, eviction) and
# TimelineView (window arithmetic, scene-graph rendering into an offscreen window).
zipmoe_add_test(test_timeline
  SOURCES app/chat/test_timeline.cpp
    ${PROJECT_SOURCE_DIR}/app/chat/timeline/timeline_model.cpp
    ${PROJECT_SOURCE_DIR}/app/chat/timeline/timeline_view.cpp
    ${PROJECT_SOURCE_DIR}/app/chat/timeline/timeline_colors.cpp
    ${PROJECT_SOURCE_DIR}/app/chat/timeline/synthetic_trace.cpp
  LIBS Qt6::Quick zipmoe_core)
target_include_directories(test_timeline PRIVATE ${PROJECT_SOURCE_DIR}/app/chat/timeline)
