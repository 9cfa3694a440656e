# PostgreSQL tests (tests/pg/, issue 23). Each binary starts one throwaway
# cluster (tests/pg/pg_cluster.h) for all its test cases, which isolate
# themselves by schema; so each binary is ONE ctest test (not one per test
# case, which would start a cluster per case). initdb's output is cached in
# build/pg15-template between binaries.
add_library(wizq_pg_cluster STATIC tests/pg/pg_cluster.cc)
target_link_libraries(wizq_pg_cluster PUBLIC wizq_test_util wizq)
target_compile_options(wizq_pg_cluster PRIVATE ${WIZQ_TEST_OPT})
target_compile_definitions(wizq_pg_cluster PUBLIC
  WIZQ_BUILD_DIR="${CMAKE_BINARY_DIR}"
  WIZQ_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

# wizq_pg_test(NAME SOURCES...): a gtest binary NAME of SOURCES (under
# tests/pg/) linked with the cluster, and its ctest test.
function(wizq_pg_test name)
  list(TRANSFORM ARGN PREPEND tests/pg/)
  add_executable(${name} ${ARGN})
  target_compile_options(${name} PRIVATE ${WIZQ_TEST_OPT})
  target_link_libraries(${name} PRIVATE wizq_pg_cluster wizq
    GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT 300
    ENVIRONMENT "WIZQ_BUILD_DIR=${CMAKE_BINARY_DIR}")
endfunction()

wizq_pg_test(pg_cluster_test pg_cluster_test.cc)
wizq_pg_test(pg_conn_test pg_conn_test.cc pg_credentials_test.cc pg_ssl_test.cc)
wizq_pg_test(pg_migrate_test pg_migrate_test.cc pg_db_cli_test.cc)
add_dependencies(pg_migrate_test wizq_cli)
wizq_pg_test(pg_store_test pg_store_test.cc pg_store_race_test.cc pg_plan_test.cc
             pg_lost_claim_test.cc)
add_dependencies(pg_store_test store_tool)
# The churn case (10^5 tasks behind an old snapshot) is as long as all the
# others together: a ctest test (and a cluster) of its own, so that ctest -j
# runs the two side by side.
set(WIZQ_PG_CHURN_CASE PgStoreTest.ClaimsStayFastWhileAnOldSnapshotKeepsChurnedRowsAlive)
set_tests_properties(pg_store_test PROPERTIES TIMEOUT 600)
set_property(TEST pg_store_test APPEND PROPERTY
  ENVIRONMENT "GTEST_FILTER=-${WIZQ_PG_CHURN_CASE}")
add_test(NAME pg_store_churn_test COMMAND pg_store_test)
set_tests_properties(pg_store_churn_test PROPERTIES TIMEOUT 600
  ENVIRONMENT "WIZQ_BUILD_DIR=${CMAKE_BINARY_DIR};GTEST_FILTER=${WIZQ_PG_CHURN_CASE}")
wizq_pg_test(pg_cli_test pg_cli_test.cc pg_cli_hints_test.cc)
add_dependencies(pg_cli_test wizq_cli)
wizq_pg_test(pg_fence_test pg_fence_test.cc)
add_dependencies(pg_fence_test wizq_cli wizq_faketime_gate)
wizq_pg_test(pg_kill_test pg_kill_test.cc)
add_dependencies(pg_kill_test wizq_cli)
wizq_pg_test(pg_commit_test pg_commit_test.cc)
add_dependencies(pg_commit_test wizq_cli wizq_fault_proxy)
wizq_pg_test(pg_crash_test pg_crash_test.cc)
add_dependencies(pg_crash_test wizq_cli)
set_tests_properties(pg_crash_test PROPERTIES TIMEOUT 600)

# The CLI suites of WIZQ_BOTH_STORES (CMakeLists.txt) once more on
# PostgreSQL: one ctest test per suite (one cluster, a database per case:
# tests/pg/cli_on_pg.cc), without the cases that are about the directory
# store's own files (WIZQ_DIR_ONLY_<suite>, each named in
# docs/RELIABILITY.md with why).
foreach(name ${WIZQ_BOTH_STORES})
  set(filter "*")
  if(DEFINED WIZQ_DIR_ONLY_${name})
    list(JOIN WIZQ_DIR_ONLY_${name} ":" skipped)
    set(filter "*-${skipped}")
  endif()
  add_test(NAME ${name}_pg COMMAND ${name} --gtest_filter=${filter})
  set_tests_properties(${name}_pg PROPERTIES TIMEOUT 900
    ENVIRONMENT "WIZQ_BUILD_DIR=${CMAKE_BINARY_DIR};WIZQ_TEST_STORE=postgresql")
endforeach()

# with_pg_cluster COMMAND...: a test that is not a gtest binary (the MCP SDK
# client's, CMakeLists.txt) run on a throwaway cluster of its own.
add_executable(with_pg_cluster tests/pg/with_cluster.cc)
target_link_libraries(with_pg_cluster PRIVATE wizq_pg_cluster wizq)

# Start the long ones first (seconds on this 2-core machine, from
# CTestCostData.txt): a clean clone has no cost data, and ctest -j would
# run them last, one core idle for the tail.
set_tests_properties(pg_store_churn_test PROPERTIES COST 95)
set_tests_properties(pg_store_test PROPERTIES COST 70)
set_tests_properties(pg_kill_test pg_crash_test progress_cli_test_pg
  PROPERTIES COST 30)
set_tests_properties(wizq_cli_tasks_test_pg pg_commit_test barnum_cli_test_pg
  pg_fence_test agent_ways_out_test_pg agent_cli_test_pg reuse_test_pg
  PROPERTIES COST 15)
