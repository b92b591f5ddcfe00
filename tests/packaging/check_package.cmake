# cmake -DBUILD_DIR=... -DWORK_DIR=... -DDPKG_DEB=... -DCPACK=... -DVERSION=...
#       -DEXPECT_GUI=ON|OFF -DEXPECT_COLLECTORS=ON|OFF -DEXAMPLE=share/... -P check_package.cmake
#
# Builds the .deb into WORK_DIR (not the build folder, so a concurrent
# `make package` is not disturbed), unpacks it into an empty root and checks
# what a user gets: the programs run from there, the desktop entry, the MIME
# type and the icons are where the desktop looks for them, and the package
# depends on what the programs load.
cmake_minimum_required(VERSION 3.25)

if(NOT DPKG_DEB OR NOT EXISTS "${DPKG_DEB}" OR NOT CPACK OR NOT EXISTS "${CPACK}")
  message("tst_packaging: SKIP: dpkg-deb or cpack is not installed (apt-get install dpkg-dev)")
  return()
endif()

set(failures 0)
macro(fail what)
  message("FAIL: ${what}")
  math(EXPR failures "${failures} + 1")
endmacro()
macro(pass what)
  message("PASS: ${what}")
endmacro()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/out" "${WORK_DIR}/root")

# ---- build the package -------------------------------------------------------
execute_process(COMMAND "${CPACK}" -G DEB --config "${BUILD_DIR}/CPackConfig.cmake" -B "${WORK_DIR}/out"
                WORKING_DIRECTORY "${BUILD_DIR}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(GLOB debs "${WORK_DIR}/out/pipescope_*.deb")
list(LENGTH debs ndebs)
if(NOT rc EQUAL 0 OR NOT ndebs EQUAL 1)
  message(FATAL_ERROR "FAIL: cpack -G DEB (exit ${rc}, ${ndebs} package(s)):\n${out}\n${err}")
endif()
list(GET debs 0 deb)
file(SIZE "${deb}" size)
get_filename_component(debname "${deb}" NAME)
pass("cpack built ${debname} (${size} bytes)")

execute_process(COMMAND "${DPKG_DEB}" -f "${deb}" Package Version Depends
                RESULT_VARIABLE rc OUTPUT_VARIABLE fields OUTPUT_STRIP_TRAILING_WHITESPACE)
message("${fields}")
if(NOT fields MATCHES "Package: pipescope\n")
  fail("Package field is not pipescope")
endif()
if(NOT fields MATCHES "Version: ${VERSION}-1\n")
  fail("Version field is not ${VERSION}-1")
endif()
# dpkg-shlibdeps ran: the linked libraries' packages are there, with versions.
foreach(dep "libc6 \\(>= " "libsqlite3-0 \\(>= " "zlib1g \\(>= " "libstdc\\+\\+6 \\(>= ")
  if(NOT fields MATCHES "Depends: .*${dep}")
    fail("Depends lacks ${dep}")
  endif()
endforeach()
if(EXPECT_GUI)
  foreach(dep "libqt6widgets6 \\(>= " "libqcustomplot2.1-qt6" "qt6-qpa-plugins" "fonts-dejavu-core")
    if(NOT fields MATCHES "Depends: .*${dep}")
      fail("Depends lacks ${dep}")
    endif()
  endforeach()
endif()
if(fields MATCHES "cupti|cuda")
  fail("Depends names a CUDA library, which no Debian package provides")
endif()

# ---- unpack into an empty root -------------------------------------------------
set(root "${WORK_DIR}/root")
execute_process(COMMAND "${DPKG_DEB}" -x "${deb}" "${root}" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "FAIL: dpkg-deb -x: ${err}")
endif()
set(usr "${root}/usr")

set(files
    bin/pipescope
    share/mime/packages/pipescope.xml
    share/icons/hicolor/scalable/apps/pipescope.svg
    lib/python3/dist-packages/pipescope_annotate.py
    share/doc/pipescope/export.md
    ${EXAMPLE})
foreach(s 16 22 24 32 48 64 128 256)
  list(APPEND files share/icons/hicolor/${s}x${s}/apps/pipescope.png)
endforeach()
if(EXPECT_GUI)
  list(APPEND files bin/pipescope-gui share/applications/pipescope.desktop)
endif()
if(EXPECT_COLLECTORS)
  list(APPEND files lib/pipescope/libpipescope_cupti.so lib/pipescope/libpipescope_nccl.so)
endif()
foreach(f IN LISTS files)
  if(EXISTS "${usr}/${f}")
    pass("/usr/${f}")
  else()
    fail("/usr/${f} is not in the package")
  endif()
endforeach()

# PNG icons: the header says PNG and the size the folder promises.
foreach(s 16 22 24 32 48 64 128 256)
  set(png "${usr}/share/icons/hicolor/${s}x${s}/apps/pipescope.png")
  if(EXISTS "${png}")
    file(READ "${png}" head LIMIT 24 HEX)
    math(EXPR hex "${s}" OUTPUT_FORMAT HEXADECIMAL)
    string(SUBSTRING "${hex}" 2 -1 hex)
    string(LENGTH "${hex}" n)
    while(n LESS 8)
      string(PREPEND hex "0")
      math(EXPR n "${n} + 1")
    endwhile()
    if(NOT head STREQUAL "89504e470d0a1a0a0000000d49484452${hex}${hex}")
      fail("${s}x${s}/apps/pipescope.png is not a ${s}x${s} PNG")
    endif()
  endif()
endforeach()

# ---- the programs run from the unpacked tree -----------------------------------
execute_process(COMMAND "${usr}/bin/pipescope" --version
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(rc EQUAL 0 AND out STREQUAL "pipescope ${VERSION}")
  pass("pipescope --version: ${out}")
else()
  fail("pipescope --version: exit ${rc}, '${out}' ${err}")
endif()
execute_process(COMMAND "${usr}/bin/pipescope" info --json "${usr}/${EXAMPLE}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 AND out MATCHES "\"schema\": \"pipescope.info/1\"")
  pass("pipescope info on the packaged example")
else()
  fail("pipescope info ${EXAMPLE}: exit ${rc} ${err}")
endif()
if(EXPECT_GUI)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env QT_QPA_PLATFORM=offscreen "${usr}/bin/pipescope-gui" --version
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc EQUAL 0 AND out MATCHES " ${VERSION}$")
    pass("pipescope-gui --version: ${out}")
  else()
    fail("pipescope-gui --version: exit ${rc}, '${out}' ${err}")
  endif()
endif()
# Nothing of the build tree leaks into the installed binaries. A sanitizer
# build (make asan) is never packaged for users, and AddressSanitizer keeps
# the source file of every instrumented global, generated ones in the build
# tree included: the check is for release builds.
foreach(bin pipescope pipescope-gui)
  if(SANITIZED)
    pass("bin/${bin}: build-folder check left to release builds (a sanitizer build names its generated sources)")
  elseif(EXISTS "${usr}/bin/${bin}")
    file(STRINGS "${usr}/bin/${bin}" leaks REGEX "${BUILD_DIR}")
    if(leaks)
      fail("bin/${bin} still names the build folder ${BUILD_DIR}")
    endif()
  endif()
endforeach()

# ---- desktop entry and MIME type -----------------------------------------------
if(EXPECT_GUI AND EXISTS "${usr}/share/applications/pipescope.desktop")
  file(STRINGS "${usr}/share/applications/pipescope.desktop" lines)
  foreach(want "Exec=pipescope-gui %F" "MimeType=application/x-pipescope;" "Icon=pipescope" "Type=Application")
    list(FIND lines "${want}" at)
    if(at LESS 0)
      fail("pipescope.desktop has no line '${want}'")
    endif()
  endforeach()
  find_program(VALIDATE desktop-file-validate)
  if(VALIDATE)
    execute_process(COMMAND "${VALIDATE}" "${usr}/share/applications/pipescope.desktop"
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      fail("desktop-file-validate: ${out}${err}")
    endif()
  endif()
endif()
find_program(UPDATE_MIME update-mime-database)
if(UPDATE_MIME AND EXISTS "${usr}/share/mime/packages/pipescope.xml")
  # What dpkg's trigger does on install, into a scratch MIME database.
  file(MAKE_DIRECTORY "${WORK_DIR}/mime/packages")
  file(COPY "${usr}/share/mime/packages/pipescope.xml" DESTINATION "${WORK_DIR}/mime/packages")
  execute_process(COMMAND "${UPDATE_MIME}" "${WORK_DIR}/mime" RESULT_VARIABLE rc ERROR_VARIABLE err)
  file(STRINGS "${WORK_DIR}/mime/globs2" globs REGEX "pipescope")
  file(READ "${WORK_DIR}/mime/magic" magic HEX)
  # "SQLite format 3\0" at 0, and within it "PSCP" at 68.
  string(HEX "SQLite format 3" sqlite)
  if(NOT rc EQUAL 0 OR NOT globs MATCHES "application/x-pipescope:\\*\\.pipescope")
    fail("update-mime-database did not register *.pipescope: ${err}")
  elseif(NOT magic MATCHES "${sqlite}00.*50534350")
    fail("the compiled MIME magic lacks the SQLite header and the PSCP application id")
  else()
    pass("MIME type application/x-pipescope (glob and magic)")
  endif()
endif()

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} packaging check(s) failed; the package and its unpacked tree are in ${WORK_DIR}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
message("tst_packaging: all checks passed")
