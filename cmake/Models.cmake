# The server models, read from servers/models.json (the one list of them; the
# file describes its fields, "model_fields"). Sets:
#   SM_MODELS                   every model's name, in the file's order
#   SM_MODEL_<name>_BINARY      its binary: the target servers/<name>/ defines
#   SM_MODEL_<name>_PLATFORM    linux or windows
#   SM_MODEL_<name>_LIBRARIES   the libraries it needs: libuv, liburing
#   SM_MODEL_<name>_DATABASE    ON when it reaches PostgreSQL (--db), else OFF
#   SM_MAX_DB_CONNECTIONS       limits.db_connections: the most --db-connections
# and defines sm_model_buildable(<name> <ok-var> <why-var>): whether the model
# can be built here (its platform, and its libraries found by
# cmake/Dependencies.cmake, included before this), else why not.
# Editing servers/models.json re-runs the configuration.
set(SM_MODELS_FILE "${PROJECT_SOURCE_DIR}/servers/models.json")
set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${SM_MODELS_FILE}")
file(READ "${SM_MODELS_FILE}" _sm_models_json)

# _sm_models_get(<out> <JSON type> <member or index>...): the value, which must
# have that type (STRING, ARRAY, ...), else a fatal error naming the file.
function(_sm_models_get out type)
  string(JSON t ERROR_VARIABLE err TYPE "${_sm_models_json}" ${ARGN})
  if(err)
    message(FATAL_ERROR "${SM_MODELS_FILE}: ${err}")
  endif()
  if(NOT t STREQUAL type)
    string(REPLACE ";" "." where "${ARGN}")
    message(FATAL_ERROR "${SM_MODELS_FILE}: ${where} is ${t}, expected ${type}")
  endif()
  if(type STREQUAL "ARRAY")
    string(JSON value LENGTH "${_sm_models_json}" ${ARGN})
  else()
    string(JSON value GET "${_sm_models_json}" ${ARGN})
  endif()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

set(SM_MODELS "")
set(_sm_listed "")
_sm_models_get(_sm_count ARRAY models)
if(_sm_count EQUAL 0)
  message(FATAL_ERROR "${SM_MODELS_FILE}: no models")
endif()
math(EXPR _sm_last "${_sm_count} - 1")
foreach(_sm_i RANGE ${_sm_last})
  _sm_models_get(_sm_name STRING models ${_sm_i} name)
  if(NOT _sm_name MATCHES "^[a-z][a-z0-9_]*$" OR _sm_name IN_LIST SM_MODELS)
    message(FATAL_ERROR "${SM_MODELS_FILE}: model name '${_sm_name}': "
                        "expected a unique lower-case word (it is also servers/<name>/)")
  endif()
  _sm_models_get(_sm_binary STRING models ${_sm_i} binary)
  if(NOT _sm_binary MATCHES "^[A-Za-z0-9_.-]+$")
    message(FATAL_ERROR "${SM_MODELS_FILE}: model ${_sm_name}: binary '${_sm_binary}' is not a target name")
  endif()
  _sm_models_get(_sm_platform STRING models ${_sm_i} platform)
  if(NOT _sm_platform MATCHES "^(linux|windows)$")
    message(FATAL_ERROR "${SM_MODELS_FILE}: model ${_sm_name}: platform '${_sm_platform}', "
                        "expected linux or windows")
  endif()
  _sm_models_get(_sm_nlibs ARRAY models ${_sm_i} libraries)
  set(_sm_libs "")
  if(_sm_nlibs GREATER 0)
    math(EXPR _sm_lastlib "${_sm_nlibs} - 1")
    foreach(_sm_j RANGE ${_sm_lastlib})
      _sm_models_get(_sm_lib STRING models ${_sm_i} libraries ${_sm_j})
      if(NOT _sm_lib MATCHES "^(libuv|liburing)$")
        message(FATAL_ERROR "${SM_MODELS_FILE}: model ${_sm_name}: library '${_sm_lib}' is not one "
                            "cmake/Models.cmake knows (libuv, liburing): find it in "
                            "cmake/Dependencies.cmake and add it to sm_model_buildable()")
      endif()
      list(APPEND _sm_libs "${_sm_lib}")
    endforeach()
  endif()
  string(JSON _sm_db_type ERROR_VARIABLE _sm_err TYPE "${_sm_models_json}" models ${_sm_i} database)
  if(NOT _sm_db_type MATCHES "^(BOOLEAN)$")
    message(FATAL_ERROR "${SM_MODELS_FILE}: model ${_sm_name}: database must be true or false")
  endif()
  string(JSON _sm_database GET "${_sm_models_json}" models ${_sm_i} database)
  if(_sm_database)
    set(_sm_database_cpp true)
  else()
    set(_sm_database_cpp false)
  endif()
  _sm_models_get(_sm_shows STRING models ${_sm_i} shows)
  # For --help: plain text (the file's `code` marks are for the docs), as a
  # C++ string literal.
  string(REPLACE "`" "" _sm_shows "${_sm_shows}")
  string(REPLACE "\\" "\\\\" _sm_shows "${_sm_shows}")
  string(REPLACE "\"" "\\\"" _sm_shows "${_sm_shows}")
  string(APPEND _sm_listed "    {\"${_sm_name}\", \"${_sm_binary}\",\n     \"${_sm_shows}\", ${_sm_database_cpp}},\n")
  list(APPEND SM_MODELS "${_sm_name}")
  # The target: the file name without the .exe a Windows binary's name ends in.
  string(REGEX REPLACE "\\.exe$" "" _sm_target "${_sm_binary}")
  set(SM_MODEL_${_sm_name}_BINARY "${_sm_target}")
  set(SM_MODEL_${_sm_name}_PLATFORM "${_sm_platform}")
  set(SM_MODEL_${_sm_name}_LIBRARIES "${_sm_libs}")
  if(_sm_database)
    set(SM_MODEL_${_sm_name}_DATABASE ON)
  else()
    set(SM_MODEL_${_sm_name}_DATABASE OFF)
  endif()
endforeach()

_sm_models_get(SM_MAX_DB_CONNECTIONS NUMBER limits db_connections)
if(NOT SM_MAX_DB_CONNECTIONS MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "${SM_MODELS_FILE}: limits.db_connections '${SM_MAX_DB_CONNECTIONS}': expected a whole number >= 1")
endif()

# The list for C++: runtime/models.hpp in SM_GENERATED_DIR (sm_runtime's
# serve() takes a model's --help line from it). Written only when it changes.
set(SM_GENERATED_DIR "${PROJECT_BINARY_DIR}/generated")
file(CONFIGURE OUTPUT "${SM_GENERATED_DIR}/runtime/models.hpp" CONTENT
"// Generated by cmake/Models.cmake from servers/models.json: edit that file.
#pragma once

#include <string_view>

namespace sm::runtime {

struct ListedModel {
    std::string_view name;    // servers/<name>/
    std::string_view binary;  // the executable
    std::string_view shows;   // what it shows, one line (its --help description)
    bool database;            // it reaches PostgreSQL for the workloads: it takes --db
};

inline constexpr ListedModel kListedModels[] = {
${_sm_listed}};

// The most --db-connections a model takes (connections per thread; the
// event-loop models keep a slot for each): servers/models.json's limits.
inline constexpr unsigned kMaxDbConnections = ${SM_MAX_DB_CONNECTIONS};

}  // namespace sm::runtime
" @ONLY)

function(sm_model_buildable model ok_var why_var)
  set(why "")
  set(platform "${SM_MODEL_${model}_PLATFORM}")
  if(platform STREQUAL "linux" AND NOT CMAKE_SYSTEM_NAME STREQUAL "Linux")
    list(APPEND why "not Linux")
  elseif(platform STREQUAL "windows" AND NOT CMAKE_SYSTEM_NAME STREQUAL "Windows")
    list(APPEND why "not Windows")
  endif()
  foreach(lib IN LISTS SM_MODEL_${model}_LIBRARIES)
    if(lib STREQUAL "libuv" AND NOT (LIBUV_FOUND OR TARGET libuv::uv))
      list(APPEND why "libuv not found")
    elseif(lib STREQUAL "liburing" AND NOT LIBURING_FOUND)
      list(APPEND why "liburing not found")
    endif()
  endforeach()
  if(why)
    set(${ok_var} FALSE PARENT_SCOPE)
  else()
    set(${ok_var} TRUE PARENT_SCOPE)
  endif()
  string(REPLACE ";" ", " why "${why}")
  set(${why_var} "${why}" PARENT_SCOPE)
endfunction()
