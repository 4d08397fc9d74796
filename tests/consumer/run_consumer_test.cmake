# Installs the toga build tree into a scratch prefix, then configures, builds and runs the
# consumer project against it. Variables: TOGA_BUILD_DIR, CONSUMER_SOURCE_DIR, WORK_DIR,
# WANT_CUDA, CUDA_ARCHS (comma-separated CMAKE_CUDA_ARCHITECTURES for the CUDA consumer), CMAKE_GENERATOR.
file(REMOVE_RECURSE "${WORK_DIR}")
set(cuda_archs "")
if(WANT_CUDA AND CUDA_ARCHS)
  string(REPLACE "," ";" archs "${CUDA_ARCHS}")
  set(cuda_archs "-DCMAKE_CUDA_ARCHITECTURES=${archs}")
endif()
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${what}:\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package test: ${what} failed (exit ${rc})")
  endif()
endfunction()
run("install toga" ${CMAKE_COMMAND} --install "${TOGA_BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
run("configure the consumer" ${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build"
    -G "${CMAKE_GENERATOR}" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix"
    -DTOGA_CONSUMER_CUDA=${WANT_CUDA} ${cuda_archs})
run("build the consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("core_app" "${WORK_DIR}/build/core_app")
if(EXISTS "${WORK_DIR}/build/sim_app")
  run("sim_app" "${WORK_DIR}/build/sim_app")
endif()
if(WANT_CUDA)
  run("cuda_app" "${WORK_DIR}/build/cuda_app")
endif()
