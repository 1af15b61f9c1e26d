# sm_python_with_module(<var> <module>): sets <var> to a Python 3 interpreter
# that can import <module> (or several, as an import statement lists them:
# "jsonschema, scipy"), for a test written in Python: the one
# find_package(Python3) finds when it has the module, else /usr/bin/python3
# when that has it (a pyenv or venv Python found first may lack what Debian's
# python3-<module> installs for /usr/bin/python3), else the one found anyway,
# so that the test runs and fails naming what is missing. Empty without any
# Python 3 interpreter.
function(sm_python_with_module var module)
  find_package(Python3 COMPONENTS Interpreter)
  set(${var} "" PARENT_SCOPE)
  if(NOT Python3_Interpreter_FOUND)
    return()
  endif()
  set(found "${Python3_EXECUTABLE}")
  foreach(candidate IN ITEMS "${Python3_EXECUTABLE}" /usr/bin/python3)
    if(EXISTS "${candidate}")
      execute_process(COMMAND "${candidate}" -c "import ${module}"
        RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
      if(rc EQUAL 0)
        set(found "${candidate}")
        break()
      endif()
    endif()
  endforeach()
  set(${var} "${found}" PARENT_SCOPE)
endfunction()
