# Decides LOOM_PYTHON_ENABLED (the Python module, python/CMakeLists.txt) and finds what it needs: the
# interpreter the tests run (/usr/bin/python3, whose Debian packages numpy and torch are the
# tests' references), its headers, and nanobind's CMake files.
if(NOT DEFINED Python_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python 3.8 COMPONENTS Interpreter Development.Module)

# nanobind, pinned in python/requirements-build.txt: the venv scripts/setup.sh makes beside the
# checkout's build folder, this build folder's, or the interpreter's own site-packages.
set(LOOM_NANOBIND_DIR "" CACHE PATH "nanobind's CMake folder (python -m nanobind --cmake_dir); found when empty")
set(loom_nanobind_pythons ${CMAKE_SOURCE_DIR}/build/python-venv/bin/python ${CMAKE_BINARY_DIR}/python-venv/bin/python
    ${Python_EXECUTABLE})
if(SKBUILD)  # pip install .: the build environment holds the nanobind pyproject.toml pins
  set(loom_nanobind_pythons ${Python_EXECUTABLE})
endif()
if(Python_FOUND AND NOT LOOM_NANOBIND_DIR)
  foreach(py ${loom_nanobind_pythons})
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

# AUTO (the default) decides at each configure, so a build folder configured before
# scripts/setup.sh made the venv picks the module up at its next configure.
set(LOOM_PYTHON AUTO CACHE STRING "Build the Python module (python/, docs/python.md): ON, OFF or AUTO (on where Python's headers and nanobind are found, off in sanitizer builds)")
set_property(CACHE LOOM_PYTHON PROPERTY STRINGS AUTO ON OFF)
if(LOOM_PYTHON STREQUAL "AUTO")
  set(LOOM_PYTHON_ENABLED OFF)
  if(Python_FOUND AND LOOM_NANOBIND_DIR AND NOT LOOM_SANITIZE)
    set(LOOM_PYTHON_ENABLED ON)
  endif()
elseif(LOOM_PYTHON)
  set(LOOM_PYTHON_ENABLED ON)
  if(NOT Python_FOUND)
    message(FATAL_ERROR "LOOM_PYTHON needs Python's headers (Debian: python3-dev; scripts/setup.sh installs it)")
  endif()
  if(NOT LOOM_NANOBIND_DIR)
    message(FATAL_ERROR "LOOM_PYTHON needs nanobind: run scripts/setup.sh (it makes build/python-venv from "
                        "python/requirements-build.txt), or set LOOM_NANOBIND_DIR to `python -m nanobind --cmake_dir`")
  endif()
else()
  set(LOOM_PYTHON_ENABLED OFF)
endif()
if(LOOM_PYTHON_ENABLED)
  message(STATUS "Python module: ${Python_EXECUTABLE} (${Python_VERSION}), nanobind from ${LOOM_NANOBIND_DIR}")
else()
  message(STATUS "Python module: off (LOOM_PYTHON=${LOOM_PYTHON}; Python headers found: ${Python_FOUND}; nanobind: '${LOOM_NANOBIND_DIR}')")
endif()
