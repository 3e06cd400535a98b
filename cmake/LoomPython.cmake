# Decides LOOM_PYTHON (the Python module, python/CMakeLists.txt) and finds what it needs: the
# interpreter the tests run (/usr/bin/python3, whose Debian packages numpy and torch are the
# tests' references), its headers, and nanobind's CMake files.
if(NOT DEFINED Python_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python 3.8 COMPONENTS Interpreter Development.Module)

# nanobind, pinned in python/requirements-build.txt: the venv scripts/setup.sh makes beside the
# checkout's build folder, this build folder's, or the interpreter's own site-packages.
set(LOOM_NANOBIND_DIR "" CACHE PATH "nanobind's CMake folder (python -m nanobind --cmake_dir); found when empty")
if(Python_FOUND AND NOT LOOM_NANOBIND_DIR)
  foreach(py ${CMAKE_SOURCE_DIR}/build/python-venv/bin/python ${CMAKE_BINARY_DIR}/python-venv/bin/python ${Python_EXECUTABLE})
    if(EXISTS ${py})
      execute_process(COMMAND ${py} -m nanobind --cmake_dir OUTPUT_VARIABLE dir RESULT_VARIABLE rc
                      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(rc EQUAL 0 AND EXISTS ${dir})
        set(LOOM_NANOBIND_DIR ${dir} CACHE PATH "nanobind's CMake folder" FORCE)
        break()
      endif()
    endif()
  endforeach()
endif()

set(loom_python_default OFF)
if(Python_FOUND AND LOOM_NANOBIND_DIR AND NOT LOOM_SANITIZE)
  set(loom_python_default ON)
endif()
option(LOOM_PYTHON "Build the Python module (python/, docs/python.md)" ${loom_python_default})
if(LOOM_PYTHON)
  if(NOT Python_FOUND)
    message(FATAL_ERROR "LOOM_PYTHON needs Python's headers (Debian: python3-dev; scripts/setup.sh installs it)")
  endif()
  if(NOT LOOM_NANOBIND_DIR)
    message(FATAL_ERROR "LOOM_PYTHON needs nanobind: run scripts/setup.sh (it makes build/python-venv from "
                        "python/requirements-build.txt), or set LOOM_NANOBIND_DIR to `python -m nanobind --cmake_dir`")
  endif()
  message(STATUS "Python module: ${Python_EXECUTABLE} (${Python_VERSION}), nanobind from ${LOOM_NANOBIND_DIR}")
else()
  message(STATUS "Python module: off (Python headers found: ${Python_FOUND}; nanobind: '${LOOM_NANOBIND_DIR}')")
endif()
