# SPDX-License-Identifier: MIT
# The per-store targets holdfast::redis, holdfast::postgres and holdfast::etcd: holdfast::holdfast
# plus the client library that store's header needs (stores/redis.hpp: hiredis;
# stores/postgres.hpp: libpq; stores/etcd.hpp: libcurl and nlohmann/json).
#
# One file for both places these targets are made, so that a build tree and an installed package
# find the client libraries the same way: CMakeLists.txt includes it (holdfast as the top-level
# project, through add_subdirectory or FetchContent) and the installed holdfastConfig.cmake
# includes it (find_package(holdfast CONFIG COMPONENTS ...)).
#
# Each client library is looked up first as a CMake package that gives a target, then through
# pkg-config: hiredis >= 1.0 ships hiredis::hiredis (Debian 12's hiredis 0.14 has only a .pc
# file); CMake's own FindPostgreSQL and FindCURL give PostgreSQL::PostgreSQL and CURL::libcurl;
# nlohmann/json ships nlohmann_json::nlohmann_json. All lookups are QUIET: what is missing is
# reported once, by the caller, naming the Debian package.
include_guard(GLOBAL)

# _holdfast_pkg(<module> <out_var>): appends pkg-config's imported target for <module> to the list
# <out_var> in the caller's scope, if pkg-config finds it.
function(_holdfast_pkg module out_var)
  find_package(PkgConfig QUIET)
  if(NOT PkgConfig_FOUND)
    return()
  endif()
  string(MAKE_C_IDENTIFIER "holdfast_pc_${module}" prefix)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(TARGET PkgConfig::${prefix})
    set(${out_var} ${${out_var}} PkgConfig::${prefix} PARENT_SCOPE)
  endif()
endfunction()

# holdfast_store_libs(<store> <out_libs> <out_missing>)
# Finds the client libraries of <store> (redis, postgres or etcd). Sets <out_libs> to the targets
# to link, or to "" and <out_missing> to what is missing (with its Debian package).
function(holdfast_store_libs store out_libs out_missing)
  set(libs "")
  set(missing "")
  if(store STREQUAL "redis")
    find_package(hiredis CONFIG QUIET)
    if(TARGET hiredis::hiredis)
      set(libs hiredis::hiredis)
    else()
      _holdfast_pkg(hiredis libs)
    endif()
    if(NOT libs)
      set(missing "hiredis (Debian: libhiredis-dev)")
    endif()
  elseif(store STREQUAL "postgres")
    find_package(PostgreSQL QUIET)
    if(TARGET PostgreSQL::PostgreSQL)
      set(libs PostgreSQL::PostgreSQL)
    else()
      _holdfast_pkg(libpq libs)
    endif()
    if(NOT libs)
      set(missing "libpq (Debian: libpq-dev)")
    endif()
  elseif(store STREQUAL "etcd")
    set(curl "")
    find_package(CURL QUIET)
    if(TARGET CURL::libcurl)
      set(curl CURL::libcurl)
    else()
      _holdfast_pkg(libcurl curl)
    endif()
    set(json "")
    find_package(nlohmann_json 3 CONFIG QUIET)
    if(TARGET nlohmann_json::nlohmann_json)
      set(json nlohmann_json::nlohmann_json)
    else()
      _holdfast_pkg(nlohmann_json json)
    endif()
    if(NOT curl)
      list(APPEND missing "libcurl (Debian: libcurl4-openssl-dev)")
    endif()
    if(NOT json)
      list(APPEND missing "nlohmann/json 3 (Debian: nlohmann-json3-dev)")
    endif()
    if(curl AND json)
      set(libs ${curl} ${json})
    endif()
    list(JOIN missing " and " missing)
  else()
    message(FATAL_ERROR "holdfast_store_libs: no store named '${store}' (redis, postgres, etcd)")
  endif()
  set(${out_libs} "${libs}" PARENT_SCOPE)
  set(${out_missing} "${missing}" PARENT_SCOPE)
endfunction()

# holdfast_import_store(<store>): for the installed package. Makes the IMPORTED target
# holdfast::<store> in the caller's directory and sets holdfast_<store>_FOUND (and, when the client
# library is missing, holdfast_<store>_NOT_FOUND_MESSAGE) in the caller's scope.
function(holdfast_import_store store)
  if(NOT store MATCHES "^(redis|postgres|etcd)$")
    set(holdfast_${store}_FOUND FALSE PARENT_SCOPE)
    set(holdfast_${store}_NOT_FOUND_MESSAGE
        "holdfast has no component '${store}' (its components: redis, postgres, etcd)" PARENT_SCOPE)
    return()
  endif()
  if(NOT TARGET holdfast::${store})
    holdfast_store_libs(${store} libs missing)
    if(NOT libs)
      set(holdfast_${store}_FOUND FALSE PARENT_SCOPE)
      set(holdfast_${store}_NOT_FOUND_MESSAGE "holdfast::${store} needs ${missing}" PARENT_SCOPE)
      return()
    endif()
    add_library(holdfast::${store} INTERFACE IMPORTED)
    set_target_properties(holdfast::${store} PROPERTIES
                          INTERFACE_LINK_LIBRARIES "holdfast::holdfast;${libs}")
  endif()
  set(holdfast_${store}_FOUND TRUE PARENT_SCOPE)
endfunction()
