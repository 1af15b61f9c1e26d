# A temporary PostgreSQL for the tests of the db workloads: scripts/pg.sh run
# as a ctest fixture (tests/db: db:postgres-start sets it up in
# ${CMAKE_BINARY_DIR}/pg, db:postgres-stop removes it). ctest runs the setup
# before, and the cleanup after, any selected test that requires it.
#   sm_requires_postgres(<test>...)
# makes the named tests (of the calling directory) require the fixture and
# gives them SM_TEST_DB_FILE, the file holding the libpq URL. Where no
# PostgreSQL server is installed the setup is skipped (exit 77) and that file
# is absent: such a test should then skip itself (exit 77) saying why.
# For tests whose names are not known at configure time (catch_discover_tests)
# the same two things are here as values:
#   SM_POSTGRES_FIXTURE  the fixture's name, for FIXTURES_REQUIRED
#   SM_POSTGRES_ENV      SM_TEST_DB_FILE=<file>, for ENVIRONMENT / EXTRA_ENV
set(SM_POSTGRES_SCRIPT "${PROJECT_SOURCE_DIR}/scripts/pg.sh")
set(SM_POSTGRES_DIR "${CMAKE_BINARY_DIR}/pg")
set(SM_POSTGRES_FIXTURE postgres)
set(SM_POSTGRES_ENV "SM_TEST_DB_FILE=${SM_POSTGRES_DIR}/url")

function(sm_requires_postgres)
  if(ARGC EQUAL 0)
    message(FATAL_ERROR "sm_requires_postgres: name the tests")
  endif()
  set_property(TEST ${ARGN} APPEND PROPERTY FIXTURES_REQUIRED ${SM_POSTGRES_FIXTURE})
  set_property(TEST ${ARGN} APPEND PROPERTY ENVIRONMENT "${SM_POSTGRES_ENV}")
endfunction()
